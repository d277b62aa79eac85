"""Private PCA end to end: ``dp_pca`` (docs/spec/SPEC_dppca.md §8; docs/spec/seeds/privacy_control.txt).

One budget, shared directions: the loading release is made once (or a supplied ``V_dp`` is
recorded as a prior release) and both the scree and the score stages use it.

Stages, in order:

1. validate every argument and resolve the budget for {loading, scree, score} (equal thirds when
   the split is implicit; an explicit split or absolute budgets must name exactly those three).
   Everything that can be checked from public quantities (n, p, k, axes, bins, methods,
   controls) is checked here, so a plan that does not fit is refused **before any data pass**;
2. the loading stage (:func:`~dppca_dask.pca.directions.release_directions`): one Kendall pass,
   its noise (none with ``V_dp``);
3. the scree stage (:func:`~dppca_dask.pca.scree.scree_stage`) and the score stage
   (:func:`~dppca_dask.pca.score.score_stage`) **together**, on one driver
   (:func:`~dppca_dask.graph.rounds.gather`): each round batches the pending requests of both
   into one Dask computation, so the two stages share every read of the input.

Number of passes over the data (Dask computations)::

    passes = [1, unless V_dp is given] + [1 when the scores are kept] + max(R_scree, R_score)

with R_score = 4 (the default ``frame="ranged"``: locate, refine and radius counts, cell counts;
3 with ``"durfee"``/``"capped"``, 2 with ``"smooth"``) and R_scree = C + M: C = 2 for the
private centre (1 empirical, 0 public constants) and M the largest over the requested methods of
clipped 1, pmwm 2, huber 1 + T. The default (clipped, private centre, ranged frame) makes
**5 passes** (4 with ``V_dp``; 6 when the scores are kept). Non-private
references ride along existing passes and add none.

The scores on the released directions are kept (:mod:`dppca_dask.graph.kept_scores`: Dask config
``dppca.scores.keep``, by default for inputs of 64 MiB or more) by one pass that reads X; the
R rounds after it read the kept n × K scores instead of X (bit-identical releases).

Order of random draws: the loading noise; then, round by round, the score stage's draws for the
pass just computed, then the scree stage's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from dppca_dask._typing import (
    Calibration,
    CenterLike,
    DataLike,
    FrameMethod,
    GroupLike,
    Pairs,
    PairsOption,
    Preset,
    RngLike,
    ScoreMethod,
    ScreeMethod,
    Sensitivity,
)
from dppca_dask.graph.kendall_layout import DEFAULT_PAIR_BLOCK
from dppca_dask.graph.kept_scores import keep_decision, keep_scores
from dppca_dask.graph.rounds import gather, run
from dppca_dask.graph.scree_passes import ScoresBackend
from dppca_dask.io.data import DataSource, as_data
from dppca_dask.pca.directions import (
    SHARED,
    Directions,
    DirectionsLike,
    directions_records,
    parse_v_dp,
    prior_record,
    release_directions,
)
from dppca_dask.pca.options import PCAOptions, Setup
from dppca_dask.pca.score import frame_method, score_records, score_rounds, score_stage
from dppca_dask.pca.scree import (
    center_rounds,
    method_rounds,
    scree_records,
    scree_rounds,
    scree_stage,
)
from dppca_dask.pca.scree_controls import ScreeControlLike
from dppca_dask.privacy.accountant import Accountant, account
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import BudgetPlan, PrivacyControl, resolve_budget
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState, as_rng
from dppca_dask.results.base import LoadingResult, base_metadata, coord_labels, freeze_dataset
from dppca_dask.results.pca import PCAResult, build_pca_result

__all__ = ["dp_pca", "expected_reads", "plan_pca"]

_OWNER = "dp_pca"


def expected_reads(*, scree_methods: Sequence[str], center: Any = "private",
                   huber_steps: int = 0, frame: str = "ranged", v_dp: bool = False) -> int:
    """The documented number of reads of the input of one ``dp_pca`` fit (module docstring).

    ``huber_steps`` is T of the Huber method (when requested).

    Examples
    --------
    >>> expected_reads(scree_methods=["clipped"])
    5
    >>> expected_reads(scree_methods=["clipped"], frame="capped")
    4
    >>> expected_reads(scree_methods=["clipped", "pmwm"], v_dp=True)
    4
    >>> expected_reads(scree_methods=["huber"], huber_steps=9)
    13
    """
    m = max(method_rounds(name, huber_steps) for name in scree_methods)
    return (0 if v_dp else 1) + max(center_rounds(center) + m, score_rounds(frame))


def _supplied_loading(v: np.ndarray, source: DataSource, plan: BudgetPlan, calibration: str,
                      seeded: bool, record: SpendRecord) -> LoadingResult:
    """A loading part for supplied directions (p × k'): recorded as a prior release."""
    comps = [f"PC{j + 1}" for j in range(v.shape[1])]
    meta = base_metadata(kind="loading", n=source.n, p=source.p, plan=plan, ledger=(record,),
                         calibration=calibration, seeded=seeded, non_private=False,
                         extra={"v_dp_supplied": True})
    ds = xr.Dataset(
        {"directions": (("variable", "component"), v,
                        {"private": 1, "description": "supplied private PC directions (V_dp, "
                         "an earlier release)"})},
        coords={"variable": coord_labels(source.variables), "component": coord_labels(comps)},
        attrs={"title": "dppca_dask: differentially private PC directions (supplied)",
               "dppca_kind": "loading", "dppca_metadata": json.dumps(meta)})
    return LoadingResult(freeze_dataset(ds))


def dp_pca(
    X: DataLike,
    *,
    privacy: PrivacyControl,
    k: int | None = None,
    scree_method: ScreeMethod | Sequence[ScreeMethod] = "clipped",
    scree_control: ScreeControlLike = None,
    bins: int | Sequence[int] | None = None,
    score_method: ScoreMethod | Sequence[ScoreMethod] | None = None,
    axes: Sequence[int] = (1, 2),
    group: GroupLike | None = None,
    V_dp: DirectionsLike | None = None,
    mono: bool = True,
    cpp_option: bool = True,
    non_private: bool = False,
    calibration: Calibration | None = None,
    rng: RngLike = None,
    center: CenterLike = "private",
    frame: FrameMethod | None = None,
    block_rows: int | None = None,
    sensitivity: Sensitivity | None = None,
    preset: Preset = "recommended",
    pairs: PairsOption = "all",
    pair_block: int = DEFAULT_PAIR_BLOCK,
    ledger: Accountant | None = None,
) -> PCAResult:
    """Differentially private PCA: directions, scree values/PVE and score histograms at once.

    The budget covers three components (SPEC §2): ``loading`` (the noisy spherical Kendall
    directions, released once and shared), ``scree`` (:func:`~dppca_dask.dp_scree` on the shared
    directions) and ``score`` (:func:`~dppca_dask.dp_score`: 35 % of its ε on the private frame,
    65 % and all of its δ on the histograms). Without an explicit split the total is divided into
    equal thirds. Each requested scree or histogram method gets its component's full allocation
    (releasing several needs composition). The input is read a small, fixed number of times: 4
    by default (see :func:`expected_reads` and the module docstring).

    Parameters
    ----------
    X
        Observations in rows (NumPy, pandas, dask, xarray, or a Zarr path/URL); at least two
        rows and two numeric columns, finite values.
    privacy
        A :func:`~dppca_dask.privacy_control` for {loading, scree, score}.
    k
        Scree components, 1 ≤ k ≤ p (default min(p, 10); all columns of a supplied matrix).
    scree_method, scree_control
        ``"clipped"``, ``"pmwm"``, ``"huber"`` or several, and their controls (see
        :func:`~dppca_dask.dp_scree`; the data-scale parameters are required).
    bins, score_method, axes, group
        The score histograms (see :func:`~dppca_dask.dp_score`).
    V_dp
        Earlier private directions (a :class:`~dppca_dask.LoadingResult` or a p × k' matrix);
        the loading allocation then records that release and is not spent again (nor given to
        scree or score).
    mono
        Monotone (PAVA) post-processing of the scree values.
    cpp_option
        Kendall kernel of the loading stage.
    non_private
        Also store the non-private references of every part (NOT private).
    calibration
        ``"analytic"`` or ``"classical"`` Gaussian calibration; ``None`` (default): the
        preset's.
    sensitivity
        Bound used for the loading (Kendall) noise: ``"tight"`` (2√2/n) or ``"seed"`` (4/n);
        ``None`` (default): the preset's; see :func:`~dppca_dask.dp_loading`.
    preset
        Where the options left at ``None`` come from (an option given explicitly wins):
        ``"recommended"`` (default) -- ``calibration="analytic"``, ``sensitivity="tight"``, ``score_method=("geometric",)``, ``frame="auto"``;
        ``"seed"`` -- the R package's configuration, ``calibration="classical"``,
        ``sensitivity="seed"``, ``score_method=("add",)``, ``frame="durfee"``, which the R comparisons use
        (:data:`~dppca_dask.pca.options.PRESETS`).
    rng
        ``None``, an int seed or a Generator; the seed is never stored.
    center
        Centring of the scree scores (see :func:`~dppca_dask.dp_scree`).
    frame
        The score frame (see :func:`~dppca_dask.dp_score`); ``None`` (default): the preset's.
    block_rows
        Rows per block of the Kendall tiling.
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
    PCAResult
        ``.loading``, ``.scree``, ``.score``, ``.ledger`` (every mechanism call once),
        ``.plot()``, ``.summary()``, ``.to_zarr()`` (one store).

    Raises
    ------
    BudgetError
        The budget does not name exactly loading, scree and score (explicit split or absolute),
        the frame radius is not positive, or an add histogram is all zero.
    ParameterError, InputError
        Bad arguments, caught before any data pass.

    Examples
    --------
    >>> from dppca_dask import clipped_control, privacy_control
    >>> X = np.random.default_rng(0).normal(size=(400, 4)) * [3.0, 2.0, 1.0, 0.5]
    >>> fit = dp_pca(X, privacy=privacy_control(eps=6, delta=1e-4),
    ...              calibration="analytic", k=3, bins=5,
    ...              scree_control=clipped_control(C_clip=40), rng=1)
    >>> fit.scree.pve.shape, fit.score.probability.shape
    ((1, 3), (1, 5, 5))
    >>> round(fit.metadata["ledger_total"]["eps"], 12), fit.metadata["passes"]
    (6.0, 4)
    """
    options = PCAOptions.parse(
        _OWNER, scree_methods=scree_method, control=scree_control, k=k, mono=mono,
        center=center, score_methods=score_method, bins=bins, axes=axes, frame=frame,
        cpp_option=cpp_option, non_private=non_private, calibration=calibration,
        sensitivity=sensitivity, preset=preset, pairs=pairs, pair_block=pair_block,
        block_rows=block_rows)
    plan = resolve_budget(privacy, owner=_OWNER, prior=("loading",) if V_dp is not None else ())
    state = as_rng(rng, owner=_OWNER)
    source = as_data(X, owner=_OWNER, min_cols=2, group=group)
    supplied = parse_v_dp(V_dp, source, _OWNER) if V_dp is not None else None
    setup = options.bind(source.n, source.p, supplied)
    return account(ledger, X, pca_plan_of(setup, plan), n=source.n, owner=_OWNER,
                   rng_state=state,
                   fit=lambda tracked: fit_pca(source, plan, setup, tracked))


def fit_pca(source: DataSource, plan: BudgetPlan, setup: Setup, rng_state: RngState
            ) -> PCAResult:
    """Run dp_pca on a validated source and bound options (the CLI's ``pca`` task too)."""
    options, n, p, k, supplied = setup.options, setup.n, setup.p, setup.k, setup.supplied
    assert k is not None
    assert setup.m_bins is not None
    plan.spend("scree"), plan.spend("score")  # both must be spendable (never prior)

    released, fitted = release_directions(source, plan, setup, rng_state)
    if fitted is None:
        passes = 0
        loading = _supplied_loading(released.matrix, source, plan, options.calibration,
                                    rng_state.seeded, released.records[0])
        shared = released
    else:
        passes = 1
        loading = fitted
        shared = Directions(released.matrix, (prior_record(plan, SHARED),), SHARED,
                            released.angles, released.guaranteed)
    v = shared.matrix

    scores = keep_scores(source.array, v[:, :kept_width(setup)], rounds=_rounds(setup, plan))
    passes += scores.kept  # the pass that keeps the scores: every later round reads them
    score = score_stage(
        source, plan, shared, setup, rng_state, scores=scores,
        extra={"cpp_option": options.cpp_option, "v_dp_supplied": supplied is not None,
               "shared_directions": "dp_pca"})
    scree = scree_stage(source, plan, shared, setup, rng_state)
    backend = ScoresBackend(scores, k=k)
    score, scree = run(gather([score, scree]), backend)  # score first: its draws come first
    passes += backend.passes

    ledger = [*released.records,  # the parts hand over their records: no JSON round trip
              *(r for r in scree.records if r.status == "spent"),
              *(r for r in score.records if r.status == "spent")]
    meta = base_metadata(
        kind="pca", n=n, p=p, plan=plan, ledger=ledger, calibration=options.calibration,
        seeded=rng_state.seeded, non_private=options.non_private,
        extra={"k": k, "scree_methods": list(options.scree_methods), "score_methods":
               list(options.score_methods), "axes": list(options.axes),
               "bins": list(setup.m_bins), "v_dp_supplied": supplied is not None,
               "cpp_option": options.cpp_option, "passes": passes,
               "draw_order": "loading; then per round: score, then scree"})
    root = xr.Dataset(attrs={"title": "dppca_dask: differentially private PCA (loading, scree "
                                      "and score parts)",
                             "dppca_kind": "pca", "dppca_metadata": json.dumps(meta)})
    return build_pca_result(root, {"loading": loading.dataset, "scree": scree.result.dataset,
                                   "score": score.result.dataset})


def pca_plan_of(setup: Setup, budget: BudgetPlan) -> Plan:
    """What ``dp_pca`` spends and how often it reads X, for bound options.

    The records are the fit's ledger: the loading release (or the supplied V_dp's prior
    record), the scree stage's and the score stage's mechanisms.
    """
    records = [*directions_records(setup, budget), *scree_records(setup, budget),
               *score_records(setup, budget)]
    rounds = _rounds(setup, budget)
    keeps = keep_decision(setup.n, setup.p, kept_width(setup), rounds)
    return Plan(tuple(records), passes=(setup.supplied is None) + keeps + rounds)


def kept_width(setup: Setup) -> int:
    """K, the directions the passes after the loading release read: the scree's k and the
    score plot's axes."""
    assert setup.k is not None
    return max(setup.k, *setup.options.axes)


def _rounds(setup: Setup, budget: BudgetPlan) -> int:
    """The passes after the directions: the scree and the score stages side by side."""
    return max(scree_rounds(setup), score_rounds(frame_method(setup, budget)))


def plan_pca(n: int, p: int, budget: BudgetPlan, *, k: int | None = None,
             scree_methods: Sequence[str] = ("clipped",), controls: dict[str, Any] | None = None,
             score_methods: Sequence[str] | None = None, center: Any = "private",
             frame: str | None = None, supplied: tuple[np.ndarray, str] | None = None,
             calibration: str | None = None, sensitivity: str | None = None,
             preset: str = "recommended", pairs: Pairs = "all",
             pair_block: int = DEFAULT_PAIR_BLOCK) -> Plan:
    """What ``dp_pca`` spends and how often it reads X, from public quantities only."""
    options = PCAOptions.parse(
        _OWNER, k=k, scree_methods=tuple(scree_methods), control=controls,
        score_methods=None if score_methods is None else tuple(score_methods), center=center,
        frame=frame, calibration=calibration, sensitivity=sensitivity, preset=preset,
        pairs=pairs, pair_block=pair_block)
    return pca_plan_of(options.bind(n, p, supplied), budget)
