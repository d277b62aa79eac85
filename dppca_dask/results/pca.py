"""The ``dp_pca`` result: :class:`PCAResult` (kind ``"pca"``), one store with three parts.

Layout (an :class:`xarray.DataTree`, written as ONE Zarr group or NetCDF-4 file):

* ``/`` -- no variables; attrs ``dppca_kind = "pca"`` and ``dppca_metadata`` (n, p, the budget
  plan, the ledger of the whole release, the shared settings, the number of data passes);
* ``/loading`` -- the :class:`~dppca_dask.LoadingResult` dataset (the shared directions);
* ``/scree`` -- the :class:`~dppca_dask.ScreeResult` dataset;
* ``/score`` -- the :class:`~dppca_dask.ScoreResult` dataset.

Each part keeps its own ``dppca_kind``/``dppca_metadata``, so a part can also be read on its own
(``load_result("pca.zarr/score")``). The scree and score parts record the loading allocation as a
prior release (the shared directions), never as a second spend; the root ledger lists every
mechanism call once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import xarray as xr

from dppca_dask._rformat import format_r_matrix, format_r_scalar
from dppca_dask.errors import InputError
from dppca_dask.results.base import (
    LoadingResult,
    Result,
    budget_line,
    consolidate_zarr,
    fixed_width_labels,
    fixed_width_writer,
    freeze_dataset,
    guarantee_of,
    matrix_block,
    plain_strings,
    rename_legacy,
    write_atomically,
)
from dppca_dask.results.cf import add_cf_attributes
from dppca_dask.results.direction_intervals import direction_interval_lines
from dppca_dask.results.frame import frame_resolution_lines
from dppca_dask.results.plotters import plotter
from dppca_dask.results.recorded import recorded_lines
from dppca_dask.results.score import ScoreResult, histogram_split_text, score_interval_lines
from dppca_dask.results.scree import ScreeResult, scree_interval_lines
from dppca_dask.results.scree_utility import released_noise_lines

__all__ = ["PCAResult", "PCASummary"]

PARTS = ("loading", "scree", "score")
_SHOWN = 8


def _r(value: float) -> str:
    return format_r_scalar(value)


def _pair(entry: dict[str, float]) -> str:
    return f"eps = {_r(entry['eps'])} ; delta = {_r(entry['delta'])}"


@dataclass(frozen=True)
class PCAResult(Result):
    """Private directions, scree values and score histograms of one ``dp_pca`` release.

    ``dataset`` is the root (metadata only); ``tree`` holds the three parts. See
    :func:`~dppca_dask.dp_pca`.
    """

    tree: xr.DataTree | None = None
    kind: ClassVar[str] = "pca"

    def _part(self, name: str) -> xr.Dataset:
        if self.tree is None or name not in self.tree.children:
            raise InputError(f"This dp_pca result has no {name!r} part.")
        return self.tree[name].to_dataset()

    @property
    def loading(self) -> LoadingResult:
        """The shared private directions (``dp_loading`` part)."""
        return LoadingResult(self._part("loading"))

    @property
    def scree(self) -> ScreeResult:
        """The private scree values and PVE on the shared directions."""
        return ScreeResult(self._part("scree"))

    @property
    def score(self) -> ScoreResult:
        """The private frame and score histograms on the shared directions."""
        return ScoreResult(self._part("score"))

    @property
    def directions(self) -> xr.DataArray:
        return self.loading.directions

    def to_tree(self) -> xr.DataTree:
        assert self.tree is not None
        return self.tree

    def _canonical_tree(self) -> xr.DataTree:
        """The tree as the writers store it: every node's labels and variable order in one
        form (:func:`~dppca_dask.results.base.plain_strings`), so the same release gives the same
        bytes whether it was just fitted or loaded."""
        tree = self.to_tree()
        return xr.DataTree.from_dict({node.path: plain_strings(node.to_dataset(inherit=False))
                                      for node in tree.subtree})

    def to_zarr(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> str:
        """Write the root and the three parts as one Zarr group (atomically; no overwrite)."""
        def write(tmp: str) -> None:
            tree = xr.DataTree.from_dict({node.path: fixed_width_labels(
                node.to_dataset(inherit=False)) for node in self._canonical_tree().subtree})
            with fixed_width_writer():
                tree.to_zarr(tmp, mode="w", consolidated=False)
                consolidate_zarr(tmp)

        return write_atomically(path, write, overwrite=overwrite)

    def to_netcdf(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> str:
        """Write the root and the three parts as one NetCDF-4 file with groups (h5netcdf)."""
        return write_atomically(
            path, lambda tmp: self._canonical_tree().to_netcdf(tmp, engine="h5netcdf"),
            overwrite=overwrite)

    @classmethod
    def _open(cls, target: Path) -> PCAResult:
        """Read a store written by :meth:`to_zarr`/:meth:`to_netcdf` (used by load_result)."""
        if target.is_dir():
            tree = xr.open_datatree(target, engine="zarr", consolidated=False).load()
        else:
            tree = xr.open_datatree(target, engine="h5netcdf").load()
        missing = [p for p in PARTS if p not in tree.children]
        if missing:
            raise InputError(f"{str(target)!r} is not a complete dp_pca result (missing "
                             f"{missing}).")
        return build_pca_result(
            tree.to_dataset(),
            {p: freeze_dataset(plain_strings(rename_legacy(tree[p].to_dataset())))
             for p in PARTS})

    def plot(self, panels: Any = ("score", "biplot"), sampling: Any = None, *,
             group_weights: str = "observed", control: Any = None, rng: Any = None) -> Any:
        """Score and biplot panels (SPEC §9.2); see :func:`dppca_dask.plots.pca.plot_pca`."""
        return plotter("pca")(self, panels=panels, sampling=sampling,
                              group_weights=group_weights, control=control, rng=rng)

    def summary(self) -> PCASummary:
        """Summarise the fit without recomputing anything or spending budget."""
        return PCASummary(self)

    def _head(self) -> list[str]:
        meta = self.metadata
        score = self.score
        a, b = score.labels
        return [
            f"Data: {meta['n']} observations x {meta['p']} variables",
            f"Components: {self.directions.shape[1]} PC directions; scree values for "
            f"{self.scree.k} components; scores on {a} and {b}",
            f"Methods: scree {', '.join(self.scree.methods)} ; score histogram "
            f"{', '.join(score.methods)}",
        ]

    def _stored(self) -> str:
        return "stored" if self.metadata["non_private"] else "not stored"

    def __repr__(self) -> str:
        return "\n".join([
            "Differentially Private PCA",
            *self._head(),
            budget_line(self.metadata["privacy"]["total"]),
            f"Non-private reference: {self._stored()} ",
        ])


@dataclass(frozen=True)
class PCASummary:
    """What ``PCAResult.summary()`` returns: directions, PVE, frame, budgets, work."""

    result: PCAResult
    digits: int = 3

    def _budget_lines(self) -> list[str]:
        meta = self.result.metadata
        alloc = meta["privacy"]["allocations"]
        loading = alloc["loading"]
        how = ("prior release (supplied V_dp), not spent again" if loading["status"] == "prior"
               else "spent once on the shared directions")
        split = self.result.score.metadata["score_split"]
        return [
            budget_line(meta["privacy"]["total"]),
            f"  loading: {_pair(loading)} ({how})",
            f"  scree: {_pair(alloc['scree'])} (each method)",
            f"  score: {_pair(alloc['score'])} (frame eps = {_r(split['frame_eps'])} ; "
            f"{histogram_split_text(split, self.result.score.methods)})",
            f"Ledger total (basic composition): {_pair(meta['ledger_total'])} ",
        ]

    def __repr__(self) -> str:
        res = self.result
        meta = res.metadata
        scree, score = res.scree, res.score
        comps = [str(c) for c in scree.pve["component"].values]
        shown = min(_SHOWN, len(comps))
        more = f" (first {shown} of {len(comps)} components)" if shown < len(comps) else ""
        frame = score.frame
        a, b = score.labels
        lines = ["DP PCA Summary", *res._head(), ""]
        lines += [*matrix_block("Private PC directions", res.directions, self.digits), ""]
        lines += [f"Private PVE{more}:",
                  format_r_matrix(scree.pve.values[:, :shown].tolist(), list(scree.methods),
                                  comps[:shown], digits=self.digits), ""]
        lines.append(f"Private frame ({frame.method}): {a} in [{_r(frame.xlim[0])}, "
                     f"{_r(frame.xlim[1])}] ; {b} in [{_r(frame.ylim[0])}, {_r(frame.ylim[1])}]")
        bins = score.metadata["bins"]
        lines.append(f"Histogram: {bins[0]} x {bins[1]} bins; methods: {', '.join(score.methods)}")
        if score.groups is not None:
            levels = score.groups
            lines.append(f"Groups: {len(levels)} ({', '.join(levels[:6])}"
                         f"{', ...' if len(levels) > 6 else ''})")
        lines += ["", *self._budget_lines()]
        lines += [f"Data passes: {meta['passes']} reads of the input",
                  f"Non-private reference: {res._stored()} ",
                  "The parts are available as .loading, .scree and .score."]
        lines += released_noise_lines(scree.metadata, np.atleast_2d(
            scree.dataset["scree_raw"].values).tolist())  # after the seed's lines
        lines += scree_interval_lines(scree.dataset, angles=False)
        loading = res.loading.dataset
        if "angle_upper" in loading:
            guaranteed = loading.get("angle_upper_guaranteed")
            lines += direction_interval_lines(
                np.asarray(loading["angle_upper"].values),
                np.asarray(loading["direction_identifiable"].values),
                guaranteed=None if guaranteed is None else np.asarray(guaranteed.values))
        lines += frame_resolution_lines(frame, score.labels)
        lines += score_interval_lines(score)
        lines += recorded_lines(meta)
        return "\n".join(lines)


def build_pca_result(root: xr.Dataset, parts: dict[str, xr.Dataset]) -> PCAResult:
    """Assemble a :class:`PCAResult` from its root (attrs) and the three part datasets."""
    if "dppca_metadata" in root.attrs:  # the stored root says it too, as every part does
        root.attrs["dppca_guarantee"] = guarantee_of(json.loads(root.attrs["dppca_metadata"]))
    tree = xr.DataTree.from_dict({"/": add_cf_attributes(root),
                                  **{f"/{name}": add_cf_attributes(parts[name])
                                     for name in PARTS}})
    return PCAResult(freeze_dataset(root), tree)
