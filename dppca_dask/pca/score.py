"""Private PC score summaries: ``dp_score`` (docs/spec/SPEC_dppca.md §6).

Stages, in order:

1. validate every argument and resolve the budget (loading + score) before any data pass; with a
   supplied ``V_dp`` the loading allocation is recorded as a prior release, not spent;
2. directions (:func:`~dppca_dask.pca.directions.release_directions`): the loading stage (one
   Kendall pass and its noise) or ``V_dp``; columns ``axes`` give the score coordinates s_i = (x_iᵀv_a, x_iᵀv_b)
   (raw projections, no centring: the private frame locates the centre);
3. the private frame (:mod:`dppca_dask.pca.frame`) with 35 % of the score ε;
4. one pass for the (per-group) cell counts on the frame's grid, then on the driver the "add"
   and/or "sparse" histograms (:mod:`dppca_dask.pca.histograms`) with 65 % of the score ε and all of
   its δ, each method with the full allocation; groups by parallel composition.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr

from dppca_dask._typing import (
    Calibration,
    DataLike,
    FrameMethod,
    GroupLike,
    Pairs,
    PairsOption,
    Preset,
    RngLike,
    ScoreMethod,
    Sensitivity,
)
from dppca_dask.graph.groups import label_strings
from dppca_dask.graph.kendall_layout import DEFAULT_PAIR_BLOCK
from dppca_dask.graph.kept_scores import Scores, keep_decision, keep_scores
from dppca_dask.graph.rounds import Stage, run
from dppca_dask.io.data import DataSource, as_data
from dppca_dask.pca.directions import (
    Directions,
    DirectionsLike,
    directions_records,
    parse_v_dp,
    release_directions,
)
from dppca_dask.pca.frame import (
    INFLATE,
    Frame,
    frame_records,
    frame_stage,
    smooth_frame,
)
from dppca_dask.pca.frame_ranged import RANGED_MIN_N_EPS
from dppca_dask.pca.histograms import (
    HISTOGRAM_METHODS,
    bin_count_pass,
    frame_breaks,
    grouped_bin_count_pass,
    release_histograms,
)
from dppca_dask.pca.options import ScoreOptions, Setup
from dppca_dask.privacy.accountant import Accountant, account
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import BudgetPlan, PrivacyBudget, PrivacyControl, resolve_budget
from dppca_dask.privacy.mechanisms import (
    gaussian_histogram_record,
    geometric_histogram_record,
    stability_histogram_record,
)
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState, as_rng
from dppca_dask.results.base import Part, base_metadata, coord_labels, freeze_dataset
from dppca_dask.results.frame import frame_resolution_variables
from dppca_dask.results.histogram_intervals import histogram_interval_variables
from dppca_dask.results.score import ScoreResult

__all__ = [
    "FRAME_SHARE",
    "RANGED_MIN_N_EPS",
    "frame_method",
    "dp_score",
    "plan_score",
    "score_records",
    "score_rounds",
    "score_stage",
]

FRAME_SHARE = 0.35
"""Share of the score ε spent on the private frame; the histogram gets the rest and all of δ."""


def frame_method(setup: Setup, budget: BudgetPlan) -> str:
    """The frame a fit runs: the option, with ``"auto"`` resolved from public n and the frame ε
    (:data:`RANGED_MIN_N_EPS`); the stage, its plan records and its pass count all call it."""
    method = setup.options.frame
    if method != "auto":
        return method
    eps = FRAME_SHARE * budget.spend("score").eps
    return "ranged" if setup.n * eps >= RANGED_MIN_N_EPS else "capped"

def dp_score(
    X: DataLike,
    *,
    privacy: PrivacyControl,
    axes: Sequence[int] = (1, 2),
    bins: int | Sequence[int] | None = None,
    method: ScoreMethod | Sequence[ScoreMethod] | None = None,
    group: GroupLike | None = None,
    V_dp: DirectionsLike | None = None,
    frame: FrameMethod | None = None,
    cpp_option: bool = True,
    non_private: bool = False,
    calibration: Calibration | None = None,
    rng: RngLike = None,
    block_rows: int | None = None,
    sensitivity: Sensitivity | None = None,
    preset: Preset = "recommended",
    pairs: PairsOption = "all",
    pair_block: int = DEFAULT_PAIR_BLOCK,
    ledger: Accountant | None = None,
) -> ScoreResult:
    """Differentially private 2-D histograms of PC scores inside a private frame.

    The scores of each row on two private directions are binned on a grid over a privately
    released frame, and the cell counts are released with Gaussian ("add") or stability-based
    Laplace ("sparse") noise. Budget: the loading allocation for the directions (unless ``V_dp``
    is given), and the score allocation split 35 % of ε to the frame and 65 % of ε plus all of δ
    to the histogram; each histogram method gets the full histogram allocation (releasing several
    needs composition), and each group gets it too (the groups are disjoint: parallel
    composition). n, the schema and (grouped) the group sizes are treated as public.

    Parameters
    ----------
    X
        Observations in rows (as for :func:`~dppca_dask.dp_loading`); at least two rows and two
        numeric columns.
    privacy
        A :func:`~dppca_dask.privacy_control` with loading and score budgets (total eps/delta are
        split 50/50 when no split is given).
    axes
        The two 1-based components to plot, e.g. ``(1, 2)``.
    bins
        ``(m_x, m_y)``, one int for both, or ``None``: round((n/ln n)^{1/3}) on each axis.
    method
        ``"add"``, ``"sparse"``, ``"geometric"`` (pure ε two-sided geometric noise on the
        counts, scale 2/ε; it uses no δ) or several (always released in that order); ``None``
        (default): the preset's (``"geometric"``; ``preset="seed"``: ``"add"``).
    group
        A column of ``X`` (data-frame column, Zarr/Dataset variable) or labels of length n. The
        frame and grid are shared; histograms are released per group (levels sorted, as R's ``factor``
        does: the order of first appearance would reveal the group of row 0), each normalised
        on its own.
    V_dp
        Earlier private directions (p × k, e.g. a :class:`~dppca_dask.LoadingResult`); the loading
        allocation then only records that release.
    frame
        ``None`` (default): the preset's (``"auto"``; ``preset="seed"``: ``"durfee"``).
        ``"auto"`` (the recommended): ``"ranged"`` where n·ε_frame ≥ 500 (ε_frame = 35 % of the
        score ε; the demo's n = 5000 at ε = 1 has 583), else ``"capped"``. ``"ranged"`` ( pure ε-DP, three count passes, equivariant to units and
        location: a private interval of the median on a signed geometric grid, refined inside
        it, then private quantiles of ``|s − c|`` on a two-sided geometric grid and a tail
        extrapolation to the 0.995 quantile; docs/design/frame.md), ``"durfee"`` (the seed's;
        pure ε-DP per-axis Durfee median and 0.995 radius, rectangular, inflated by 0.2; two
        count passes, grids fixed in the data's units), ``"capped"`` (the same passes; the
        0.995 radius search runs only between a private median S of ``|s − c|`` and 8·S, so it
        cannot run away; pure ε-DP) or ``"smooth"``
        (legacy v0.1.0 square frame from smooth-sensitivity quantiles; collects the n × 2 scores on the driver). The smooth frame
        needs δ: it takes 35 % of the score δ as well as 35 % of ε, and the histogram gets the
        remaining 65 % of δ.
    cpp_option
        Loading stage kernel (see :func:`~dppca_dask.dp_loading`).
    non_private
        Also store the observed cell proportions on the same grid and the observed scores. These
        references are **not** private.
    calibration
        Gaussian calibration of the loading noise and the add histogram: ``"analytic"`` or
        ``"classical"``; ``None`` (default): the preset's.
    sensitivity
        Bound used for the loading (Kendall) noise: ``"tight"`` (2√2/n) or ``"seed"`` (4/n);
        ``None`` (default): the preset's; see :func:`~dppca_dask.dp_loading`.
    preset
        Where the options left at ``None`` come from (an option given explicitly wins):
        ``"recommended"`` (default) -- ``calibration="analytic"``, ``sensitivity="tight"``, ``method=("geometric",)``, ``frame="auto"``;
        ``"seed"`` -- the R package's configuration, ``calibration="classical"``,
        ``sensitivity="seed"``, ``method=("add",)``, ``frame="durfee"``, which the R comparisons use
        (:data:`~dppca_dask.pca.options.PRESETS`).
    rng
        ``None``, an int seed, or a generator; the seed is never stored.
    block_rows
        Rows per block of the loading stage's Kendall tiling.
    pairs, pair_block
        The Kendall pairs of the loading stage: ``"all"`` (default), ``"blocks"`` (linear time:
        pairs within consecutive groups of at most ``pair_block`` rows) or ``"auto"`` (all while
        the all-pairs work is small, blocks above; from n and p only); see
        :func:`~dppca_dask.dp_loading`.
    ledger
        An :class:`~dppca_dask.privacy.accountant.Accountant` (e.g.
        ``dppca_dask.ledger_accountant(dataset=...)``) that reserves this release in the
        persistent budget ledger before any data is read, with the CLI's cap check; default:
        the one set by ``with dppca_dask.accounting(...)``, else none.

    Returns
    -------
    ScoreResult
        ``.probability`` (mechanism, [group,] y_bin, x_bin), ``.frame``, ``.ledger``, ``.plot()``,
        ``.sample()``.

    Raises
    ------
    BudgetError
        If the budget does not cover loading and score, the frame radius is not positive, or an
        add histogram is all zero after noise.

    Examples
    --------
    >>> from dppca_dask import privacy_control
    >>> X = np.random.default_rng(0).normal(size=(400, 3)) * [3.0, 1.0, 0.5]
    >>> fit = dp_score(X, privacy=privacy_control(eps=4, delta=1e-4),
    ...                calibration="analytic", bins=(6, 5), rng=1)
    >>> fit.probability.dims, fit.probability.shape
    (('mechanism', 'y_bin', 'x_bin'), (1, 5, 6))
    >>> round(float(fit.probability.sum()), 12)
    1.0
    """
    owner = "dp_score"
    options = ScoreOptions.parse(
        owner, cpp_option=cpp_option, non_private=non_private, calibration=calibration,
        frame=frame, score_methods=method, axes=axes, bins=bins, sensitivity=sensitivity,
        preset=preset, pairs=pairs, pair_block=pair_block, block_rows=block_rows)
    plan = resolve_budget(privacy, owner=owner, prior=("loading",) if V_dp is not None else ())
    state = as_rng(rng, owner=owner)
    source = as_data(X, owner=owner, min_cols=2, group=group)
    supplied = parse_v_dp(V_dp, source, owner) if V_dp is not None else None
    setup = options.bind(source.n, source.p, supplied)
    return account(ledger, X, score_plan_of(setup, plan), n=source.n, owner=owner,
                   rng_state=state,
                   fit=lambda tracked: fit_score(source, plan, setup, tracked))


def fit_score(source: DataSource, plan: BudgetPlan, setup: Setup, rng_state: RngState
              ) -> ScoreResult:
    """Run dp_score on a validated source and bound options (the CLI's ``score`` task too)."""
    plan.spend("score")  # spendable (never prior): checked before any data pass
    directions, _ = release_directions(source, plan, setup, rng_state)
    scores = keep_scores(source.array, directions.matrix[:, :max(setup.options.axes)],
                         rounds=score_rounds(frame_method(setup, plan)))
    return run(score_stage(
        source, plan, directions, setup, rng_state, scores=scores,
        extra={"cpp_option": setup.options.cpp_option,
               "v_dp_supplied": setup.supplied is not None})).result


def score_split(score_budget: PrivacyBudget, frame: str) -> tuple[PrivacyBudget, PrivacyBudget]:
    """The score allocation split: :data:`FRAME_SHARE` of ε (and, for the smooth frame, of δ)
    to the frame, the rest to the histograms (the one split formula: the stage, its plan
    records and the plan text use it)."""
    frame_delta = FRAME_SHARE * score_budget.delta if frame == "smooth" else 0.0
    return (PrivacyBudget(FRAME_SHARE * score_budget.eps, frame_delta),
            PrivacyBudget((1 - FRAME_SHARE) * score_budget.eps, score_budget.delta - frame_delta))


def score_stage(
    source: DataSource,
    plan: BudgetPlan,
    released: Directions,
    setup: Setup,
    rng_state: RngState,
    *,
    extra: dict[str, Any],
    scores: Scores | None = None,
) -> Stage[Part[ScoreResult]]:
    """The score stage after the directions (:mod:`dppca_dask.graph.rounds`): the frame's
    passes, then the cell counts; returns the :class:`ScoreResult` (``released``: the
    directions and their ledger entries). Its passes read ``scores`` (the directions'
    :class:`~dppca_dask.graph.kept_scores.Scores`, kept or not; default: X itself)."""
    options = setup.options
    axes, m_bins, methods = options.axes, setup.m_bins, options.score_methods
    frame = frame_method(setup, plan)
    non_private, calibration = options.non_private, options.calibration
    assert m_bins is not None
    state = rng_state
    levels, codes, sizes = None, None, np.array([source.n])
    groups = source.groups
    lazy_groups = isinstance(groups, da.Array)  # read by the bin-count pass itself
    if isinstance(groups, np.ndarray):
        codes, uniques = pd.factorize(groups, sort=True)  # order: public, not row 0's
        levels = [str(u) for u in uniques]
        sizes = np.bincount(codes, minlength=len(levels))

    frame_budget, hist_budget = score_split(plan.spend("score"), frame)
    v2 = np.ascontiguousarray(released.matrix[:, [axes[0] - 1, axes[1] - 1]])
    if scores is None:
        scores = Scores(source.array, released.matrix, kept=False)
    cols = [axes[0] - 1, axes[1] - 1]
    data, dirs = scores.operand(cols)  # X and v2, or the kept scores and their positions
    labels = (f"PC{axes[0]}", f"PC{axes[1]}")

    observed = None
    if frame != "smooth":
        fr, frame_ledger = yield from frame_stage(
            frame, data, dirs, n=source.n, eps=frame_budget.eps,
            rng=state.generator, labels=labels)
    else:
        (observed,) = yield (scores.scores(cols),)
        fr, frame_ledger = smooth_frame(
            observed, budget=frame_budget,
            rng=state.generator, labels=labels)
    x_breaks, y_breaks = frame_breaks(fr, m_bins)
    if isinstance(groups, da.Array):
        lazy = [grouped_bin_count_pass(data, groups, dirs, x_breaks, y_breaks,
                                       plan.owner)]
    else:
        lazy = [bin_count_pass(data, dirs, x_breaks, y_breaks, codes,
                               0 if levels is None else len(levels))]
    if non_private and observed is None:
        lazy.append(scores.scores(cols))
    if non_private and lazy_groups:  # the NOT-private reference holds n scores: and n labels
        lazy.append(groups)
    computed = yield tuple(lazy)
    if lazy_groups:  # {level: counts}: levels sorted (public order, not row 0's), sizes summed
        levels = sorted(computed[0])
        counts = np.stack([computed[0][level] for level in levels]).astype(np.int64)
        sizes = counts.sum(axis=(1, 2))
    else:
        counts = np.asarray(computed[0])
    if non_private and observed is None:
        observed = np.asarray(computed[1])
    if non_private and lazy_groups:
        labels_seen = label_strings(computed[-1], plan.owner)
        codes = np.searchsorted(np.asarray(levels, dtype=str), labels_seen)
    if int(counts.sum()) != source.n:  # an internal invariant of the pass
        raise RuntimeError(f"The bin-count pass counted {int(counts.sum())} rows, not {source.n}.")
    hist = release_histograms(counts, sizes, methods=methods, budget=hist_budget,
                              calibration=calibration, rng=state.generator, levels=levels)
    ledger = (*released.records, *frame_ledger, *hist.records)
    return Part(_build_result(
        source=source, plan=plan, ledger=ledger, frame=fr, x_breaks=x_breaks, y_breaks=y_breaks,
        hist=hist, counts=counts, sizes=sizes, levels=levels, codes=codes, directions=v2,
        labels=labels, axes=axes, bins=m_bins, observed=observed if non_private else None,
        calibration=calibration, seeded=state.seeded,
        extra={**extra,
               "score_split": {"frame_eps": frame_budget.eps,
                               "frame_delta": frame_budget.delta, "hist_eps": hist_budget.eps,
                               "hist_delta": hist_budget.delta}},
    ), ledger)


def _private(description: str) -> dict[str, Any]:
    return {"private": 1, "description": description}


def _reference(description: str) -> dict[str, Any]:
    return {"private": 0, "description": "NOT PRIVATE: " + description}


def _build_result(
    *, source: DataSource, plan: BudgetPlan, ledger: Sequence[SpendRecord], frame: Frame,
    x_breaks: np.ndarray, y_breaks: np.ndarray, hist: Any, counts: np.ndarray,
    sizes: np.ndarray, levels: list[str] | None, codes: np.ndarray | None,
    directions: np.ndarray, labels: tuple[str, str], axes: tuple[int, int],
    bins: tuple[int, int], observed: np.ndarray | None, calibration: str, seeded: bool,
    extra: dict[str, Any],
) -> ScoreResult:
    grouped = levels is not None
    cells = ("y_bin", "x_bin")
    gdims = ("group",) if grouped else ()
    prob = hist.probability if grouped else hist.probability[:, 0]
    total = hist.total if grouped else hist.total[:, 0]
    coords: dict[str, Any] = {
        "mechanism": coord_labels(hist.methods),
        "x_bin": np.arange(bins[0]), "y_bin": np.arange(bins[1]),
        **{f"{a}_{side}": (f"{a}_bin", edges, _private(f"{side} {a} edge of each bin (from the "
                                                       "private frame)"))
           for a, br in (("x", x_breaks), ("y", y_breaks))
           for side, edges in (("lower", br[:-1]), ("upper", br[1:]))},
        "axis": coord_labels(["x", "y"]), "axis_label": ("axis", coord_labels(labels)),
        "variable": coord_labels(source.variables),
    }
    if grouped:
        coords["group"] = coord_labels(levels)
    data_vars: dict[str, Any] = {
        "probability": (("mechanism", *gdims, *cells), prob,
                        _private("released cell probabilities (each histogram sums to 1; a "
                                 "sparse histogram may be all zero)")),
        "released_total": (("mechanism", *gdims), total,
                           _private("released mass before normalising (add: sum of noisy "
                                    "counts; geometric: the public n of the histogram; "
                                    "sparse: group size times sum of proportions)")),
        "x_breaks": (("x_edge",), x_breaks, _private("bin edges on the x axis")),
        "y_breaks": (("y_edge",), y_breaks, _private("bin edges on the y axis")),
        "frame_center": (("axis",), np.array(frame.center), _private("private frame centre")),
        "frame_radius": (("axis",), np.array(frame.radius), _private("private frame radius")),
        "frame_lower": (("axis",), np.array([frame.xlim[0], frame.ylim[0]]),
                        _private("frame lower limit: centre - (1 + inflate) * radius")),
        "frame_upper": (("axis",), np.array([frame.xlim[1], frame.ylim[1]]),
                        _private("frame upper limit: centre + (1 + inflate) * radius")),
        "directions": (("variable", "axis"), directions,
                       _private("the two private PC directions used for the scores")),
        **frame_resolution_variables(frame),
    }
    if grouped:
        data_vars["group_size"] = (("group",), sizes.astype(np.int64), {
            "private": 0, "description": "NOT PRIVATE unless group sizes are public: observed "
            "group sizes (used by the sparse mechanism and 'observed' sampling weights)"})
    if observed is not None:
        ref = counts / sizes[:, None, None]
        data_vars["nonprivate_probability"] = (
            (*gdims, *cells), ref if grouped else ref[0],
            _reference("observed cell proportions on the private grid"))
        data_vars["observed_score"] = (("observation", "axis"), observed,
                                       _reference("observed scores on the private directions"))
        if grouped and codes is not None:  # gathered for the reference only (never otherwise)
            data_vars["observed_group"] = (("observation",), coord_labels(np.asarray(levels)[codes]),
                                           _reference("group label of each observed score"))
    meta = base_metadata(
        kind="score", n=source.n, p=source.p, plan=plan, ledger=ledger, calibration=calibration,
        seeded=seeded, non_private=observed is not None,
        extra={"axes": list(axes), "labels": list(labels), "bins": list(bins),
               "methods": list(hist.methods), "frame": frame.method, "inflate": INFLATE,
               "groups": levels, **extra},
    )
    data_vars.update(histogram_interval_variables(
        hist.methods, hist.probability, hist.total, sizes, meta["ledger"],
        ("mechanism", *gdims, *cells)))
    ds = xr.Dataset(data_vars, coords=coords, attrs={
        "title": "dppca_dask: differentially private PC score histograms",
        "dppca_kind": "score", "dppca_metadata": json.dumps(meta)})
    return ScoreResult(freeze_dataset(ds))



def score_records(setup: Setup, budget: BudgetPlan) -> list[SpendRecord]:
    """The score stage's planned records: the frame's searches, then one per histogram method
    (groups are disjoint: parallel composition, one record each)."""
    options = setup.options
    methods, calibration = options.score_methods, options.calibration
    frame = frame_method(setup, budget)
    frame_budget, hist = score_split(budget.spend("score"), frame)
    out: list[SpendRecord] = frame_records(frame, frame_budget.eps, frame_budget.delta,
                                           n=setup.n)
    for m in (m for m in HISTOGRAM_METHODS if m in methods):  # one record for all groups
        label = f"{m} histogram (groups: parallel composition)"
        if m == "add":
            out.append(gaussian_histogram_record(component="score", budget=hist,
                                                 calibration=calibration, cells=None,
                                                 label=label))
        elif m == "geometric":
            out.append(geometric_histogram_record(component="score", eps=hist.eps, cells=None,
                                                  label=label))
        else:
            out.append(stability_histogram_record(component="score", budget=hist, cells=None,
                                                  label=label))
    return out


def score_rounds(frame: str) -> int:
    """Data passes of the score stage: the frame's (ranged: locate, refine and scale counts;
    durfee, capped: centre and radius counts; smooth: the observed scores), then the cell
    counts."""
    return {"ranged": 4, "smooth": 2}.get(frame, 3)


def score_plan_of(setup: Setup, budget: BudgetPlan) -> Plan:
    """What ``dp_score`` spends and how often it reads X, for bound options."""
    records = [*directions_records(setup, budget), *score_records(setup, budget)]
    rounds = score_rounds(frame_method(setup, budget))
    keeps = keep_decision(setup.n, setup.p, max(setup.options.axes), rounds)
    return Plan(tuple(records), passes=(setup.supplied is None) + keeps + rounds)


def plan_score(n: int, p: int, budget: BudgetPlan, *, methods: Sequence[str] | None = None,
               frame: str | None = None, supplied: tuple[np.ndarray, str] | None = None,
               calibration: str | None = None, sensitivity: str | None = None,
               preset: str = "recommended", pairs: Pairs = "all",
               pair_block: int = DEFAULT_PAIR_BLOCK) -> Plan:
    """What ``dp_score`` spends and how often it reads X, from public quantities only."""
    options = ScoreOptions.parse("dp_score", score_methods=None if methods is None else
                                 tuple(methods), frame=frame, calibration=calibration,
                                 sensitivity=sensitivity, preset=preset, pairs=pairs,
                                 pair_block=pair_block)
    return score_plan_of(options.bind(n, p, supplied), budget)
