"""Private scree values and PVE: ``dp_scree`` (docs/spec/SPEC_dppca.md §5; docs/spec/seeds/privacy_control.txt).

Stages, in order:

1. validate every argument, resolve the budget (loading + scree) and the controls -- before any
   data pass, so a refused call never touches data;
2. directions (:func:`~dppca_dask.pca.directions.release_directions`): the loading release (its
   own Kendall pass), or a supplied ``V_dp`` whose loading allocation is recorded as a prior
   release;
3. the centre of the scores: private (two passes; docs/design/scree.md), empirical (one pass,
   R-compatible, outside the guarantee) or public constants (no pass);
4. the methods, run side by side by the pass protocol (:mod:`dppca_dask.graph.rounds`): every
   data pass returns small exact aggregates of the scores Y = X·V and the noise is drawn on the
   driver (:func:`scree_stage` is this and step 5, ready to share rounds with other stages);
5. post-processing: the centre-noise correction, the monotone PAVA fit and the PVE.

Budget: ε_ℓ = ε/k and δ_ℓ = δ/k per component (basic composition); each method gets the full scree
allocation (less the centre's share, which all methods share), so releasing several methods
together needs composition -- the ledger records every call.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from dppca_dask._typing import (
    Calibration,
    CenterLike,
    DataLike,
    Pairs,
    PairsOption,
    Preset,
    RngLike,
    ScreeMethod,
    Sensitivity,
)
from dppca_dask.errors import UtilityWarning
from dppca_dask.graph.kendall_layout import DEFAULT_PAIR_BLOCK
from dppca_dask.graph.kept_scores import keep_decision, keep_scores
from dppca_dask.graph.moments import moments
from dppca_dask.graph.rounds import Stage, chain, counted, gather, once, run
from dppca_dask.graph.scree_passes import ScoresBackend
from dppca_dask.io.data import DataSource, as_data
from dppca_dask.pca.directions import (
    Directions,
    DirectionsLike,
    directions_records,
    parse_v_dp,
    release_directions,
)
from dppca_dask.pca.options import (
    DEFAULT_MAX_K,
    ScreeOptions,
    Setup,
    check_scree_args,
    resolve_k,
)
from dppca_dask.pca.postprocess import monotone_scree, ordered_eigh, scree_to_pve
from dppca_dask.pca.scree_controls import ScreeControlLike
from dppca_dask.pca.scree_methods import (
    CENTER_NOISE_WARN,
    CENTER_SHARE,
    PROCEDURES,
    Context,
    center_records,
    empirical_center,
    huber_defaults,
    method_records,
    private_center,
)
from dppca_dask.pca.scree_utility import warn_unreliable
from dppca_dask.privacy.accountant import Accountant, account
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import BudgetPlan, PrivacyBudget, PrivacyControl, resolve_budget
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState, as_rng
from dppca_dask.results.base import Part
from dppca_dask.results.scree import ScreeResult, build_scree_result

__all__ = [
    "DEFAULT_MAX_K",
    "center_rounds",
    "check_scree_args",
    "method_rounds",
    "dp_scree",
    "plan_scree",
    "resolve_k",
    "scree_records",
    "scree_rounds",
    "scree_stage",
]

_OWNER = "dp_scree"


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-component details of single-component runs, joined (lists concatenated)."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            out[key] = out.get(key, []) + value if isinstance(value, list) else value
    return out


def dp_scree(
    X: DataLike,
    *,
    privacy: PrivacyControl,
    k: int | None = None,
    method: ScreeMethod | Sequence[ScreeMethod] = "clipped",
    control: ScreeControlLike = None,
    V_dp: DirectionsLike | None = None,
    mono: bool = True,
    cpp_option: bool = True,
    non_private: bool = False,
    calibration: Calibration | None = None,
    rng: RngLike = None,
    center: CenterLike = "private",
    sensitivity: Sensitivity | None = None,
    preset: Preset = "recommended",
    pairs: PairsOption = "all",
    pair_block: int = DEFAULT_PAIR_BLOCK,
    ledger: Accountant | None = None,
) -> ScreeResult:
    """Differentially private scree values (variances along private PC directions) and PVE.

    For each of the first k directions v_ℓ, the scores y = Xv_ℓ give w_i = (y_i − c_ℓ)² and
    λ_ℓ = (n/(n−1))·mean(w); each method privately estimates mean(w) (docs/spec/SPEC_dppca.md §5):

    * ``"clipped"`` -- Gaussian mechanism on mean(min(w, C_clip)), Δ = C_clip/(n−1);
    * ``"pmwm"`` -- private modified winsorized mean: Durfee quantile cut-offs, then a noisy
      winsorized mean (Ramsay & Spicker 2025);
    * ``"huber"`` -- private m₂ histogram, Huber threshold τ, T noisy gradient steps (Yu, Ren &
      Zhou 2024).

    Each component gets ε/k and δ/k of the method's budget; each requested method gets the full
    scree allocation (releasing several together needs composition; the ledger records every
    call). With ``mono`` the values are made non-negative and non-increasing (PAVA); PVE divides
    by the sum of the k values. The classical Gaussian calibration is proven only for ε < 1;
    ``calibration="analytic"`` is valid for every ε.

    Parameters
    ----------
    X
        Observations in rows (NumPy, pandas, dask, xarray, or a Zarr path/URL); finite values.
    privacy
        A :func:`~dppca_dask.privacy_control` object for {loading, scree}: without a split the
        total is halved between them.
    k
        Number of components, 1 ≤ k ≤ p (≤ columns of a supplied matrix). Default: min(p, 10),
        or every column of a supplied matrix.
    method
        ``"clipped"`` (default), ``"pmwm"``, ``"huber"`` or a list of distinct ones.
    control
        :func:`clipped_control`, :func:`pmwm_control` or :func:`huber_control` (or a dict of their
        parameters) for one method; for several, a dict keyed by method name. The parameters
        without defaults are required: they set public data scales.
    V_dp
        Earlier private directions: a :class:`~dppca_dask.LoadingResult` or a p × k matrix. The
        loading allocation then records that prior release and is not spent again.
    mono
        Apply the monotone post-processing (default ``True``).
    cpp_option
        Kendall kernel of the loading step (``True``: tiled BLAS-3; ``False``: reference).
    non_private
        Also store **non-private** references: the covariance eigenvalues and their PVE, and the
        exact variance along each released direction.
    calibration
        ``"analytic"`` (Balle & Wang 2018) or ``"classical"`` (the package's σ); ``None``
        (default): the preset's.
    sensitivity
        Bound used for the loading (Kendall) noise: ``"tight"`` (2√2/n) or ``"seed"`` (4/n);
        ``None`` (default): the preset's; see :func:`~dppca_dask.dp_loading`.
    preset
        Where the options left at ``None`` come from (an option given explicitly wins):
        ``"recommended"`` (default) -- ``calibration="analytic"``, ``sensitivity="tight"``;
        ``"seed"`` -- the R package's configuration, ``calibration="classical"``,
        ``sensitivity="seed"``, which the R comparisons use
        (:data:`~dppca_dask.pca.options.PRESETS`).
    rng
        ``None`` (OS entropy), an int seed or a Generator; the seed is never stored.
    center
        ``"private"`` (default): centre the scores on a private estimate of their mean, spending
        20% of the scree allocation once for all methods (docs/design/scree.md); the expected
        excess from the centre's noise is removed (it is public). ``"empirical"``: the scores'
        own mean, as the R package does -- one extreme row moves every w_i, so this is
        **outside the privacy guarantee** (flagged in the metadata; for R cross-checks). Or
        public constants: a number or one per variable (the centre of X), never computed from
        the data; the values are then mean squares about that centre.
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
    ScreeResult
        ``.scree``/``.pve`` (mechanism × component), ``.nonprivate``, ``.ledger``, ``.plot()``.

    Raises
    ------
    ParameterError, BudgetError, InputError
        Bad arguments, controls or budget; n < 4 with ``"huber"``.

    Examples
    --------
    >>> from dppca_dask import clipped_control, privacy_control
    >>> X = np.random.default_rng(0).normal(size=(500, 4)) * [3.0, 2.0, 1.0, 0.5]
    >>> fit = dp_scree(X, privacy=privacy_control(eps=4, delta=1e-5), calibration="analytic", k=2,
    ...                control=clipped_control(C_clip=40), rng=1)
    >>> fit.scree.dims, fit.pve.shape
    (('mechanism', 'component'), (1, 2))
    >>> bool(fit.scree.values[0, 0] > fit.scree.values[0, 1])
    True
    """
    options = ScreeOptions.parse(
        _OWNER, scree_methods=method, control=control, k=k, mono=mono, cpp_option=cpp_option,
        non_private=non_private, calibration=calibration, center=center,
        sensitivity=sensitivity, preset=preset, pairs=pairs, pair_block=pair_block)
    plan = resolve_budget(privacy, owner=_OWNER, prior=("loading",) if V_dp is not None else ())
    state = as_rng(rng, owner=_OWNER)
    source = as_data(X, owner=_OWNER)
    supplied = parse_v_dp(V_dp, source, _OWNER) if V_dp is not None else None
    setup = options.bind(source.n, source.p, supplied)
    release = scree_plan_of(setup, plan)
    assert setup.k is not None
    warn_unreliable(options.scree_methods, options.controls, n=source.n, k=setup.k,
                    budget=scree_split(plan.spend("scree"), setup)[1],
                    calibration=options.calibration)
    return account(ledger, X, release, n=source.n, owner=_OWNER, rng_state=state,
                   fit=lambda tracked: fit_scree(source, plan, setup, tracked))


def fit_scree(source: DataSource, plan: BudgetPlan, setup: Setup, rng_state: RngState, *,
              lockstep: bool = True) -> ScreeResult:
    """Run dp_scree on a validated source and bound options (the CLI task too)."""
    plan.spend("scree")  # spendable (never prior): checked before any data pass
    assert setup.k is not None
    directions, _ = release_directions(source, plan, setup, rng_state)
    scores = keep_scores(source.array, directions.matrix[:, :setup.k],
                         rounds=scree_rounds(setup))
    backend = ScoresBackend(scores)
    return run(scree_stage(source, plan, directions, setup, rng_state, lockstep=lockstep),
               backend).result


def scree_split(scree_budget: PrivacyBudget, setup: Setup
                ) -> tuple[PrivacyBudget | None, PrivacyBudget]:
    """The scree allocation split: the private centre's :data:`CENTER_SHARE` (``None`` for
    another centre) and the rest, which each method gets in full (the one split formula: the
    stage, its plan records and the plan text use it)."""
    if not setup.private_center:
        return None, scree_budget
    return scree_budget.scaled(CENTER_SHARE), scree_budget.scaled(1.0 - CENTER_SHARE)


def scree_stage(
    source: DataSource,
    plan: BudgetPlan,
    released: Directions,
    setup: Setup,
    rng_state: RngState,
    *,
    lockstep: bool = True,
) -> Stage[Part[ScreeResult]]:
    """The scree part after the directions, as a stage of :mod:`dppca_dask.graph.rounds`.

    Its requests are :class:`~dppca_dask.graph.scree_passes.Request` objects on the scores of the
    first ``setup.k`` directions, so it runs on a
    :class:`~dppca_dask.graph.scree_passes.ScoresBackend` of ``released.matrix[:, :k]``.
    """
    options = setup.options
    methods, controls, mono = options.scree_methods, options.controls, options.mono
    non_private, calibration, center = options.non_private, options.calibration, options.center
    k = setup.k
    assert k is not None
    n, p = source.n, source.p
    directions = released.matrix[:, :k]
    scree_budget = plan.spend("scree")
    center_budget, method_budget = scree_split(scree_budget, setup)
    share = CENTER_SHARE if center_budget is not None else 0.0
    ledger = list(released.records)
    ctx = Context(n=n, k=k, calibration=calibration, rng=rng_state.generator, ledger=ledger)
    extras: tuple[Any, ...] = (moments(source.array),) if non_private else ()
    correction = 0.0
    center_details: dict[str, Any] = {}
    passes = 0
    if isinstance(center, np.ndarray):
        ctx.center = np.broadcast_to(center, (p,)) @ directions
        mode = "constants"
    elif center == "empirical":
        (ctx.center, extras), rounds = yield from counted(gather([empirical_center(ctx),
                                                                  once(*extras)]))
        mode = "empirical"
    else:
        ((ctx.center, center_details), extras), rounds = yield from counted(gather(
            [private_center(ctx, cast(PrivacyBudget, center_budget)), once(*extras)]))
        correction = n / (n - 1.0) * center_details["sd"] ** 2
        mode = "private"
    if mode != "constants":
        passes += rounds

    comps = list(range(k))
    late = extras if mode == "constants" else ()  # otherwise computed with the centre's pass
    if lockstep:
        procs = [PROCEDURES[m](ctx, controls[m], method_budget, comps) for m in methods]
        (outcomes, late), rounds = yield from counted(gather([gather(procs), once(*late)]))
        raw_list = [values for values, _ in outcomes]
        details = {m: d for m, (_, d) in zip(methods, outcomes, strict=True)}
    else:
        procs = [PROCEDURES[m](ctx, controls[m], method_budget, [c]) for m in methods
                 for c in comps]
        (flat, late), rounds = yield from counted(gather([chain(procs), once(*late)]))
        raw_list = [np.concatenate([v for v, _ in flat[i * k:(i + 1) * k]])
                    for i in range(len(methods))]
        details = {m: _merge([d for _, d in flat[i * k:(i + 1) * k]])
                   for i, m in enumerate(methods)}
    passes += rounds
    if mode == "constants":
        extras = late
    if mode == "private":
        _check_center(correction, np.vstack(raw_list))
    raw = np.maximum(np.vstack(raw_list) - correction, 0.0)
    scree = np.vstack([monotone_scree(r) for r in raw]) if mono else raw
    pve = np.vstack([scree_to_pve(s) for s in scree])

    reference = None
    if non_private:
        n_rows, _, m2 = extras[0]
        cov = m2 / (n_rows - 1)
        eig = ordered_eigh(cov)[0][:k]
        reference = {"scree": eig, "pve": scree_to_pve(eig),
                     "direction_variance": np.einsum("ij,ik,kj->j", directions, cov, directions)}
    meta = {
        "methods": list(methods),
        "controls": {m: controls[m].to_dict() for m in methods},
        "k": k,
        "mono": mono,
        "directions": released.origin,
        "cpp_option": options.cpp_option,
        "center": mode,
        "center_share": share,
        "center_noise_correction": correction,
        "center_release": center_details,
        "releases": details,
        "outside_guarantee": mode == "empirical",
        "allocations": {
            "center": center_budget.as_dict() if center_budget is not None else None,
            "each_method": method_budget.as_dict(),
            "per_component": method_budget.scaled(1.0 / k).as_dict(),
        },
        "passes": passes,
        "draw_order": "lockstep" if lockstep else "sequential",
    }
    adaptive = [m for m in methods if m in ADAPTIVE_SCALE_METHODS]
    if adaptive:  # their cut-offs are private estimates; their records' scales follow them
        meta["post_processing"] = ["ledger", *sorted({k for m in adaptive
                                                      for k in ADAPTIVE_SCALE_METHODS[m]})]
    return Part(build_scree_result(
        methods=methods, scree=scree, scree_raw=raw, pve=pve, directions=directions,
        variables=source.variables,
        center=None if mode == "empirical" else np.asarray(ctx.center, dtype=np.float64),
        center_private=mode == "private", nonprivate=reference, n=n, plan=plan, ledger=ledger,
        calibration=calibration, seeded=rng_state.seeded, scree_meta=meta,
        angles=None if released.angles is None else released.angles[:k],
        guaranteed=None if released.guaranteed is None else released.guaranteed[:k],
    ), tuple(ledger))


ADAPTIVE_SCALE_METHODS = {"pmwm": ("lower", "upper"), "huber": ("m2", "tau")}
"""Scree methods whose noise scale follows a private estimate made in the same release, with
the keys of that estimate in the method's ``releases`` details: PMWM's private winsorizing
cut-offs (Durfee's upper answer and the lower cut-off below it), Huber's private m2 (its
histogram) and the scale tau from it. Those details and the method's ledger records (grid,
scale, sensitivity) are post-processing of the private estimates, so the release declares them
in ``post_processing`` (tests/test_neighbours.py)."""


def _check_center(correction: float, released: np.ndarray) -> None:
    """Warn when the private centre's noise dominates the released values (post-processing of
    released values only; :data:`~dppca_dask.pca.scree_methods.CENTER_NOISE_WARN`)."""
    top = max(float(np.max(released)), 0.0)
    if correction > CENTER_NOISE_WARN * top:
        share = "all" if top <= 0 else f"{100 * correction / top:.0f} %"
        warnings.warn(
            f"dp_scree's private centre: its noise variance ({correction:.3g}, subtracted from "
            f"every value) is {share} of the largest released value, so the values carry the "
            "centre's noise. Its radius grid starts at 0.1 in the scores' units and its noise "
            "grows with the scores' distance from 0: with scores far from 0 relative to their "
            "spread, or a spread far below 0.1, pass center=<public constants> near the data's "
            "mean, or shift and rescale X by public constants.", UtilityWarning, stacklevel=4)


def center_rounds(center: Any) -> int:
    """Data passes of the centre: private 2, empirical 1, public constants 0."""
    return {"private": 2, "empirical": 1}.get(center, 0) if isinstance(center, str) else 0


def method_rounds(method: str, huber_steps: int = 0) -> int:
    """Data passes of one method: clipped 1, pmwm 2 (cut-offs, then the mean), huber 1 + T."""
    return {"clipped": 1, "pmwm": 2}.get(method, 1 + huber_steps)


def scree_rounds(setup: Setup) -> int:
    """Data passes of the scree stage: the centre's, then the methods' side by side."""
    options = setup.options
    methods, controls = options.scree_methods, options.controls
    steps = {m: huber_defaults(setup.n, controls[m])[0] for m in methods if m == "huber"}
    return center_rounds(options.center) + max(method_rounds(m, steps.get(m, 0))
                                               for m in methods)


def scree_records(setup: Setup, budget: BudgetPlan) -> list[SpendRecord]:
    """The scree stage's planned records (centre once, then each method's), public inputs only."""
    options, k = setup.options, setup.k
    assert k is not None
    center_budget, method_budget = scree_split(budget.spend("scree"), setup)
    out = ([] if center_budget is None else
           center_records(center_budget, options.calibration, k=k))
    for m in options.scree_methods:
        out += method_records(m, setup.n, k, options.controls[m], method_budget,
                              options.calibration)
    return out


def scree_plan_of(setup: Setup, budget: BudgetPlan) -> Plan:
    """What ``dp_scree`` spends and how often it reads X, for bound options."""
    records = [*directions_records(setup, budget), *scree_records(setup, budget)]
    rounds = scree_rounds(setup)
    assert setup.k is not None
    keeps = keep_decision(setup.n, setup.p, setup.k, rounds)
    return Plan(tuple(records), passes=(setup.supplied is None) + keeps + rounds)


def plan_scree(n: int, p: int, budget: BudgetPlan, *, methods: Sequence[str],
               controls: dict[str, Any], k: int | None = None, center: Any = "private",
               supplied: tuple[np.ndarray, str] | None = None,
               calibration: str | None = None, sensitivity: str | None = None,
               preset: str = "recommended", pairs: Pairs = "all",
               pair_block: int = DEFAULT_PAIR_BLOCK) -> Plan:
    """What ``dp_scree`` spends and how often it reads X, from public quantities only.

    ``supplied``: the parsed ``V_dp`` (:func:`~dppca_dask.pca.directions.parse_v_dp`), whose
    loading allocation is then a prior record.
    """
    options = ScreeOptions.parse(_OWNER, scree_methods=tuple(methods), control=controls, k=k,
                                 center=center, calibration=calibration,
                                 sensitivity=sensitivity, preset=preset, pairs=pairs,
                                 pair_block=pair_block)
    return scree_plan_of(options.bind(n, p, supplied), budget)
