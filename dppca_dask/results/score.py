"""The ``dp_score`` result: :class:`ScoreResult` (kind ``"score"``), its print, summary and sampler.

Dataset schema (every private variable has ``private = 1``; references have ``private = 0`` and a
description starting with "NOT PRIVATE"):

* ``probability(mechanism, [group,] y_bin, x_bin)`` -- released cell probabilities (each method's,
  and each group's, sum to one; a sparse histogram may be all zero);
* ``released_total(mechanism, [group])`` -- released mass before normalising (add: Σ noisy counts;
  sparse: n_g·Σq), used by ``group_weights="private"``;
* bin-edge coordinates ``x_lower/x_upper(x_bin)``, ``y_lower/y_upper(y_bin)`` and the breaks
  ``x_breaks(x_edge)``, ``y_breaks(y_edge)``;
* the frame ``frame_center/frame_radius/frame_lower/frame_upper(axis)``, axis = x, y, and its
  search resolution ``frame_center_cell_lower/upper``, ``frame_radius_cell_lower/upper`` and
  ``frame_resolution`` (axis; :func:`~dppca_dask.results.frame.frame_resolution_variables`);
* ``directions(variable, axis)`` -- the two private directions used (released by the loading
  stage, or the supplied ``V_dp``);
* grouped fits: ``group_size(group)`` -- observed group sizes, treated as public (the sparse
  mechanism and the default sampling weights use them);
* with ``non_private=True``: ``nonprivate_probability([group,] y_bin, x_bin)`` on the same grid,
  ``observed_score(observation, axis)`` and, grouped, ``observed_group(observation)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import xarray as xr

from dppca_dask._rformat import format_r_matrix, format_r_scalar
from dppca_dask._typing import RngLike
from dppca_dask._validation import bad_param, parse_choice
from dppca_dask.privacy.rng import as_rng
from dppca_dask.results.base import Result, budget_line
from dppca_dask.results.frame import Frame, frame_resolution_lines, stored_cells
from dppca_dask.results.histogram_intervals import histogram_interval_lines
from dppca_dask.results.plotters import plotter
from dppca_dask.results.recorded import recorded_lines
from dppca_dask.results.sampling import (
    SamplingLike,
    allocate_sizes,
    as_sampling_control,
    sample_cells,
)

__all__ = ["GROUP_WEIGHTS", "ScoreResult", "ScoreSummary", "histogram_split_text"]

GROUP_WEIGHTS = ("observed", "private")


def _r(value: float) -> str:
    return format_r_scalar(value)


def _lines(meta: dict[str, Any], result: ScoreResult) -> list[str]:
    bins = meta["bins"]
    lines = [
        f"Data: {meta['n']} observations x {meta['p']} variables",
        f"Axes: {meta['labels'][0]} and {meta['labels'][1]}",
        f"Histogram: {bins[0]} x {bins[1]} bins; methods: {', '.join(result.methods)}",
    ]
    levels = result.groups
    if levels is not None:
        shown = ", ".join(levels[:6]) + (", ..." if len(levels) > 6 else "")
        lines.append(f"Groups: {len(levels)} ({shown})")
    frame = result.frame
    lines.append(
        f"Private frame ({frame.method}): {meta['labels'][0]} in [{_r(frame.xlim[0])}, "
        f"{_r(frame.xlim[1])}] ; {meta['labels'][1]} in [{_r(frame.ylim[0])}, "
        f"{_r(frame.ylim[1])}]"
    )
    return lines


def histogram_split_text(split: dict[str, Any], methods: Sequence[str]) -> str:
    """The histogram part of the score split, e.g. ``histogram eps = 0.65 ; delta = 1e-05 each
    method``; the geometric method spends no δ, and the text says so.

    Examples
    --------
    >>> split = {"hist_eps": 0.65, "hist_delta": 1e-05}
    >>> histogram_split_text(split, ("geometric",))
    'histogram eps = 0.65 each method ; delta unused (geometric is pure eps)'
    >>> histogram_split_text(split, ("add", "geometric"))
    'histogram eps = 0.65 ; delta = 1e-05 each method (geometric: pure eps, no delta)'
    """
    with_delta = [m for m in methods if m != "geometric"]
    text = f"histogram eps = {_r(split['hist_eps'])}"
    if with_delta:
        text += f" ; delta = {_r(split['hist_delta'])}"
    text += " each method"
    if "geometric" in methods:
        text += (" (geometric: pure eps, no delta)" if with_delta
                 else " ; delta unused (geometric is pure eps)")
    return text


def _budget_lines(meta: dict[str, Any], methods: Sequence[str]) -> list[str]:
    alloc = meta["privacy"]["allocations"]
    loading, score = alloc["loading"], alloc["score"]
    split = meta["score_split"]
    status = "prior release (V_dp supplied)" if loading["status"] == "prior" else "spent"
    return [
        budget_line(meta["privacy"]["total"]),
        f"Loading budget: eps = {_r(loading['eps'])} ; delta = {_r(loading['delta'])} ({status})",
        f"Score budget: eps = {_r(score['eps'])} ; delta = {_r(score['delta'])} "
        f"(frame eps = {_r(split['frame_eps'])} ; delta = {_r(split['frame_delta'])} ; "
        f"{histogram_split_text(split, methods)})",
        f"Spent by this release (basic composition): eps = {_r(meta['ledger_total']['eps'])} ; "
        f"delta = {_r(meta['ledger_total']['delta'])}",
    ]


@dataclass(frozen=True)
class ScoreResult(Result):
    """Private score histograms (``dp_score``); see :func:`~dppca_dask.dp_score`."""

    kind: ClassVar[str] = "score"

    @property
    def probability(self) -> xr.DataArray:
        """Released probabilities, dims ``(mechanism, [group,] y_bin, x_bin)``."""
        return self.dataset["probability"]

    @property
    def nonprivate_probability(self) -> xr.DataArray | None:
        """Observed cell proportions on the same grid (NOT private), or ``None``."""
        return self.dataset.get("nonprivate_probability")

    @property
    def observed_scores(self) -> pd.DataFrame | None:
        """The observed scores (NOT private; ``group`` column when grouped), or ``None``."""
        if "observed_score" not in self.dataset:
            return None
        s = self.dataset["observed_score"].values
        frame = pd.DataFrame({"pc_x": s[:, 0], "pc_y": s[:, 1]})
        if self.groups is not None:
            frame["group"] = pd.Categorical(self.dataset["observed_group"].values,
                                            categories=self.groups)
        return frame

    @property
    def mechanisms(self) -> tuple[str, ...]:
        """The histogram mechanisms released, in the order of the ``mechanism`` dimension."""
        return tuple(str(m) for m in self.dataset["mechanism"].values)

    @property
    def methods(self) -> tuple[str, ...]:
        """Same as :attr:`mechanisms` (the ``method=`` argument of ``dp_score``)."""
        return self.mechanisms

    @property
    def groups(self) -> list[str] | None:
        """Group levels (sorted), or ``None`` for an ungrouped fit."""
        if "group" not in self.dataset.dims:
            return None
        return [str(g) for g in self.dataset["group"].values]

    @property
    def labels(self) -> tuple[str, str]:
        a, b = self.metadata["labels"]
        return a, b

    @property
    def frame(self) -> Frame:
        ds = self.dataset
        c, r = ds["frame_center"].values, ds["frame_radius"].values
        meta = self.metadata
        center_cell, radius_cell = stored_cells(ds)
        return Frame(meta["frame"], (float(c[0]), float(c[1])), (float(r[0]), float(r[1])),
                     meta["inflate"], center_cell=center_cell, radius_cell=radius_cell)

    @property
    def x_breaks(self) -> np.ndarray:
        return np.asarray(self.dataset["x_breaks"].values)

    @property
    def y_breaks(self) -> np.ndarray:
        return np.asarray(self.dataset["y_breaks"].values)

    @property
    def group_sizes(self) -> np.ndarray:
        """Observed group sizes (n for an ungrouped fit); treated as public."""
        if self.groups is None:
            return np.array([self.metadata["n"]])
        return np.asarray(self.dataset["group_size"].values)

    def _grid(self, target: str) -> np.ndarray:
        """(group, m_y, m_x) probabilities of ``target`` ("nonprivate" or a method)."""
        if target == "nonprivate":
            arr = self.nonprivate_probability
            if arr is None:
                raise bad_param("targets", "ScoreResult.sample", "methods of the fit; "
                                "'nonprivate' needs a fit with non_private=True", target)
        else:
            arr = self.probability.sel(mechanism=target)
        values = np.asarray(arr.values)
        return values if self.groups is not None else values[None]

    def table(self, method: str, group: str | None = None) -> pd.DataFrame:
        """One histogram as R's table: xmin, xmax, ymin, ymax, prob, cells with x fastest."""
        targets = ("nonprivate", *self.methods) if self.nonprivate_probability is not None \
            else self.methods
        method = parse_choice(method, "method", "ScoreResult.table", targets)
        grid = self._grid(method)
        g = 0
        if self.groups is not None:
            g = self.groups.index(parse_choice(group, "group", "ScoreResult.table", self.groups))
        elif group is not None:
            raise bad_param("group", "ScoreResult.table", "None for an ungrouped fit", group)
        xb, yb = self.x_breaks, self.y_breaks
        mx, my = xb.size - 1, yb.size - 1
        jx, jy = np.tile(np.arange(mx), my), np.repeat(np.arange(my), mx)
        return pd.DataFrame({"xmin": xb[jx], "xmax": xb[jx + 1], "ymin": yb[jy],
                             "ymax": yb[jy + 1], "prob": grid[g].ravel()})

    def sample(
        self,
        sampling: SamplingLike = None,
        *,
        targets: Sequence[str] | None = None,
        group_weights: str = "observed",
        rng: RngLike = None,
    ) -> dict[str, dict[str, pd.DataFrame]]:
        """Synthetic score points from the released histograms (post-processing; no budget).

        Parameters
        ----------
        sampling
            A :func:`~dppca_dask.sampling_control` (default ``sampling_control()``). Its
            ``sample_size`` is the total per method (over all groups); ``None`` means n.
        targets
            Histograms to sample: ``"nonprivate"`` (only when stored) and/or the fit's methods.
            Default: all of them, non-private first.
        group_weights
            Grouped fits: ``"observed"`` splits the total in proportion to the observed group
            sizes (this assumes group sizes are public, as the sparse mechanism already does);
            ``"private"`` uses each histogram's released mass (``released_total``), which needs
            no assumption. The non-private reference always uses the observed sizes.
        rng
            ``None``, a seed or a generator.

        Returns
        -------
        dict
            ``{target: {method: DataFrame(pc_x, pc_y[, group])}}``.
        """
        owner = "ScoreResult.sample"
        control = as_sampling_control(sampling, owner)
        group_weights = parse_choice(group_weights, "group_weights", owner, GROUP_WEIGHTS)
        available = (("nonprivate",) if self.nonprivate_probability is not None else ()) \
            + self.methods
        if targets is None:
            targets = available
        elif isinstance(targets, str):
            targets = (targets,)
        rule = f"a str or a sequence of str among {available}"
        if not isinstance(targets, Sequence) or any(
                not isinstance(t, str) or t not in available for t in targets):
            raise bad_param("targets", owner, rule, targets)
        gen = as_rng(rng, owner=owner).generator
        total = control.sample_size if control.sample_size is not None else self.metadata["n"]
        out: dict[str, dict[str, pd.DataFrame]] = {}
        xb, yb = self.x_breaks, self.y_breaks
        for target in targets:
            grid = self._grid(target)
            if self.groups is None:
                sizes = np.array([total])
            else:
                weights = self.group_sizes
                if group_weights == "private" and target != "nonprivate":
                    weights = self.dataset["released_total"].sel(mechanism=target).values
                sizes = allocate_sizes(total, weights)
            parts: dict[str, list[pd.DataFrame]] = {m: [] for m in control.method}
            for g in range(grid.shape[0]):
                drawn = sample_cells(grid[g], xb, yb, methods=control.method,
                                      bandwidth=control.bandwidth, size=int(sizes[g]), rng=gen)
                for m, frame in drawn.items():
                    if self.groups is not None:
                        frame = frame.assign(group=self.groups[g])
                    parts[m].append(frame)
            out[target] = {m: self._concat(frames) for m, frames in parts.items()}
        return out

    def _concat(self, frames: list[pd.DataFrame]) -> pd.DataFrame:
        frame = pd.concat(frames, ignore_index=True)
        if self.groups is not None:
            frame["group"] = pd.Categorical(frame["group"], categories=self.groups)
        return frame

    def plot(
        self,
        private_plot: str | Sequence[str] = ("histogram", "sample"),
        sampling: SamplingLike = None,
        *,
        group_weights: str = "observed",
        control: Any = None,
        rng: RngLike = None,
    ) -> Any:
        """Score plot panels (SPEC §9.1); see :func:`dppca_dask.plots.score.plot_score`."""
        return plotter("score")(self, private_plot=private_plot, sampling=sampling,
                                group_weights=group_weights, control=control, rng=rng)

    def summary(self) -> ScoreSummary:
        """Summarise the fit without recomputing anything or spending budget."""
        return ScoreSummary(self)

    def __repr__(self) -> str:
        stored = "stored" if self.nonprivate_probability is not None else "not stored"
        return "\n".join([
            "Differentially Private PC Scores",
            *_lines(self.metadata, self),
            budget_line(self.metadata["privacy"]["total"]),
            f"Non-private reference: {stored} ",
        ])


@dataclass(frozen=True)
class ScoreSummary:
    """What ``ScoreResult.summary()`` returns: the frame, budgets and the released histograms."""

    result: ScoreResult
    digits: int = 3
    max_bins: int = 8

    def _matrix(self, grid: np.ndarray) -> str:
        my, mx = grid.shape
        rows = list(range(my - 1, -1, -1))[: self.max_bins]
        cols = list(range(mx))[: self.max_bins]
        values = [[float(grid[r, c]) for c in cols] for r in rows]
        return format_r_matrix(values, [f"y{r + 1}" for r in rows], [f"x{c + 1}" for c in cols],
                               digits=self.digits)

    def __repr__(self) -> str:
        res = self.result
        meta = res.metadata
        frame = res.frame
        lines = ["DP Score Summary", *_lines(meta, res), ""]
        lines.append(
            f"Frame centre: {_r(frame.center[0])} , {_r(frame.center[1])} ; radius: "
            f"{_r(frame.radius[0])} , {_r(frame.radius[1])} ; inflation {_r(frame.inflate)}"
        )
        lines += frame_resolution_lines(frame, res.labels)
        lines.append("")
        my, mx = meta["bins"][1], meta["bins"][0]
        shown = f"first {min(my, self.max_bins)} x {min(mx, self.max_bins)} cells, " \
            if max(my, mx) > self.max_bins else ""
        targets = [("Non-private", "nonprivate")] if res.nonprivate_probability is not None else []
        targets += [(m.capitalize(), m) for m in res.methods]
        levels: Sequence[str | None] = res.groups or [None]
        for title, target in targets:
            grid = res._grid(target)
            for g, level in enumerate(levels):
                where = f", group {level}" if level is not None else ""
                note = " (NOT PRIVATE)" if target == "nonprivate" else ""
                lines += [f"{title} histogram{where}{note}  ({shown}rows: "
                          f"{res.labels[1]} high to low; columns: {res.labels[0]}):",
                          self._matrix(grid[g]), ""]
        lines += _budget_lines(meta, res.methods)
        stored = "stored" if res.nonprivate_probability is not None else "not stored"
        lines += [f"Non-private reference: {stored} ",
                  "The full histograms are available as .probability."]
        lines += score_interval_lines(res)
        lines += recorded_lines(meta)
        return "\n".join(lines)


def score_interval_lines(res: ScoreResult) -> list[str]:
    """The summary's cell-interval lines (none for a store written before they existed)."""
    ds = res.dataset
    if "probability_lower" not in ds:
        return []
    lower, upper = ds["count_lower"].values, ds["count_upper"].values
    if res.groups is None:
        lower, upper = lower[:, None], upper[:, None]
        sizes: Sequence[int] = [int(res.metadata["n"])]
    else:
        sizes = [int(v) for v in res.group_sizes]
    return histogram_interval_lines(res.methods, lower, upper, sizes, res.groups or [None])
