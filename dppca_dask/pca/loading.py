"""Private PC directions: ``dp_loading`` and the exact spherical Kendall matrix.

Follows ``docs/spec/seeds/dp_loading.txt`` and docs/spec/SPEC_dppca.md §4. Stages, in order:

1. resolve the budget and calibrate the noise from public quantities (n, p, ε, δ) -- before any
   data pass, so a refused budget never touches data;
2. one Dask computation: the Kendall pair sum (and, when ``non_private``, the covariance moments);
3. on the driver: the Gaussian mechanism with Frobenius sensitivity 4/n on K̂
   (:func:`~dppca_dask.privacy.mechanisms.gaussian_symmetric_matrix`), then eigenvectors ordered by the
   noisy eigenvalues (post-processing).

``pairs="blocks"`` replaces the O(n²) U-statistic by the incomplete U-statistic over the pairs
within consecutive groups of at most ``pair_block`` rows
(:func:`~dppca_dask.graph.kendall_layout.pair_groups`; the rule looks at n only): O(n·b·p) work,
sensitivity 2·max_g(b_g − 1)/P with P the number of within-group pairs (= 4/n for equal groups);
derivation in docs/design/kendall_blocks_sensitivity.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import xarray as xr

from dppca_dask._typing import (
    Calibration,
    DataLike,
    Pairs,
    PairsOption,
    Preset,
    RngLike,
    Sensitivity,
)
from dppca_dask.errors import InputError
from dppca_dask.graph.kendall_layout import DEFAULT_PAIR_BLOCK, pair_groups
from dppca_dask.graph.kendall_units import kendall_sum
from dppca_dask.graph.memory import check_matrix_memory
from dppca_dask.graph.moments import moments
from dppca_dask.graph.rounds import once, run
from dppca_dask.io.data import DataSource, as_data
from dppca_dask.pca.options import (
    AUTO_MAX_WORK,
    PAIRS,
    SENSITIVITIES,
    LoadingOptions,
    Setup,
    resolve_pairs,
)
from dppca_dask.pca.postprocess import align_signs, ordered_eigh
from dppca_dask.privacy.accountant import Accountant, account
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import BudgetPlan, PrivacyControl, resolve_budget
from dppca_dask.privacy.mechanisms import (
    gaussian_symmetric_matrix,
    gaussian_symmetric_matrix_record,
)
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import as_rng
from dppca_dask.results.base import LoadingResult, Part, build_loading_result

__all__ = [
    "AUTO_MAX_WORK",
    "PAIRS",
    "SENSITIVITIES",
    "dp_loading",
    "kendall_sensitivity",
    "loading_plan_of",
    "loading_records",
    "plan_loading",
    "resolve_pairs",
    "spherical_kendall",
]

def kendall_sensitivity(
    n: int,
    *,
    pairs: Pairs = "all",
    pair_block: int = DEFAULT_PAIR_BLOCK,
    bound: str = "seed",
) -> float:
    """Frobenius sensitivity of K̂ under replace-one adjacency.

    Replacing one row changes only the pair terms u uᵀ that involve it; each changes by at most
    2 in Frobenius norm (``bound="seed"``, the R package's bound) or, since
    ‖uuᵀ − vvᵀ‖²_F = 2 − 2(uᵀv)² ≤ 2 for unit vectors, by at most √2 (``bound="tight"``;
    docs/design/kendall_sensitivity.md). The figures below are for the seed bound; the tight
    bound multiplies them by 1/√2.

    ``pairs="all"``: 4/n (seed; SPEC §4.3). ``pairs="blocks"``: 2·max_g(b_g − 1)/P over the
    groups of :func:`~dppca_dask.graph.kendall_layout.pair_groups`, P = Σ_g b_g(b_g − 1)/2; one row
    moves only the b_g − 1 pair terms of its group, each by at most 2 in Frobenius norm. Equals
    4/n when the groups are equal and is never below it (docs/design/
    docs/design/kendall_blocks_sensitivity.md).

    Examples
    --------
    >>> kendall_sensitivity(100), kendall_sensitivity(100, pairs="blocks", pair_block=25)
    (0.04, 0.04)
    >>> round(kendall_sensitivity(10, pairs="blocks", pair_block=4), 6)  # groups 4, 3, 3
    0.5
    """
    term = 2.0 if bound == "seed" else math.sqrt(2.0)
    if pairs == "all":
        return 2.0 * term / n
    sizes = pair_groups(n, pair_block)
    total = sum(s * (s - 1) // 2 for s in sizes)
    return term * (max(sizes) - 1) / total


def _kendall_from_parts(parts: tuple[np.ndarray, int], expected: int) -> np.ndarray:
    total, count = parts
    if count != expected:  # an internal invariant of the tiling, not a user error
        raise RuntimeError(f"Kendall pass counted {count} pairs, expected {expected}.")
    k = total / count
    return (k + k.T) / 2.0


def spherical_kendall(
    X: DataLike,
    *,
    cpp_option: bool = True,
    block_rows: int | None = None,
    pairs: PairsOption = "all",
    pair_block: int = DEFAULT_PAIR_BLOCK,
) -> xr.DataArray:
    """The exact (non-private) spherical Kendall matrix K̂ = 2/(n(n−1)) Σ_{i<j} u_ij u_ijᵀ.

    ``u_ij = (x_j − x_i)/‖x_j − x_i‖``. K̂ is symmetric positive semi-definite with trace 1 and is
    invariant to translating, positively scaling or reordering the rows. Its eigenvectors are
    robust (non-private) PC directions. **This is not a private release.**

    Parameters
    ----------
    X
        Data with observations in rows: NumPy array, pandas DataFrame, dask array, xarray
        DataArray, or a path/URL to a Zarr array or group.
    cpp_option
        ``True`` (default): the tiled BLAS-3 kernel; ``False``: the plain reference kernel.
    block_rows
        Rows per block of the tiling (default
        :data:`~dppca_dask.graph.kendall_layout.DEFAULT_BLOCK_ROWS`).
    pairs
        ``"all"`` (default): every pair. ``"blocks"``: only the pairs within consecutive groups of
        at most ``pair_block`` rows (an incomplete U-statistic, linear in n; it also has trace 1).
    pair_block
        Maximum group size for ``pairs="blocks"``.

    Returns
    -------
    xarray.DataArray
        Dims ``(variable, variable_)`` with the variable names as coordinates.

    Raises
    ------
    DuplicateObservationError
        If two observations coincide (docs/spec/SPEC_dppca.md §4.2).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> k = spherical_kendall(rng.normal(size=(100, 3)))
    >>> round(float(np.trace(k)), 12)
    1.0
    """
    options = LoadingOptions.parse("spherical_kendall", cpp_option=cpp_option, pairs=pairs,
                                   pair_block=pair_block)
    source = as_data(X, owner="spherical_kendall")
    setup = options.bind(source.n, source.p)
    graph, layout = kendall_sum(
        source.array, fast=options.cpp_option, block_rows=block_rows, pairs=setup.pairs,
        pair_block=options.pair_block,
        reread="auto" if source.origin in ("zarr", "parquet") else False,
    )
    (parts,) = run(once(graph))
    k = _kendall_from_parts(parts, layout.n_pairs)
    names = list(source.variables)
    return xr.DataArray(
        k,
        dims=("variable", "variable_"),
        coords={"variable": names, "variable_": names},
        name="spherical_kendall",
        attrs={"private": 0, "description": "exact spherical Kendall matrix (not private)"},
    )


def dp_loading(
    X: DataLike,
    *,
    privacy: PrivacyControl,
    cpp_option: bool = True,
    non_private: bool = False,
    calibration: Calibration | None = None,
    rng: RngLike = None,
    block_rows: int | None = None,
    pairs: PairsOption = "all",
    pair_block: int = DEFAULT_PAIR_BLOCK,
    sensitivity: Sensitivity | None = None,
    preset: Preset = "recommended",
    ledger: Accountant | None = None,
) -> LoadingResult:
    """Estimate differentially private PC directions from a noisy spherical Kendall matrix.

    The private directions are the eigenvectors of K̂ + E, ordered by decreasing noisy eigenvalue,
    where E is symmetric Gaussian noise with standard deviation σ on the diagonal and σ/√2 off it,
    σ = 4·sqrt(2 ln(1.25/δ))/(nε) under the classical calibration (Frobenius sensitivity 4/n under
    fixed-size replace-one adjacency). The classical calibration has a standard sufficient
    guarantee for 0 < ε < 1; larger ε needs an additional calibration check, which is not
    performed -- ``calibration="analytic"`` (Balle & Wang 2018) is valid for every ε and adds less
    noise. Data schema and n are public; duplicate observations are rejected (this check is not
    privatised).

    Parameters
    ----------
    X
        Observations in rows: NumPy array, pandas DataFrame (non-numeric columns dropped with a
        warning), dask array, xarray DataArray, or a path/URL to a Zarr array or group. Values must
        be finite; at least two rows and one column.
    privacy
        A :func:`~dppca_dask.privacy_control` object allocating budget to loading alone: total
        eps/delta (all of it goes to loading) or an absolute loading budget.
    cpp_option
        ``True`` (default): the tiled BLAS-3 Kendall kernel; ``False``: the reference kernel.
    non_private
        Also store ordinary covariance PC directions, sign-aligned to the private ones. This
        reference is **not** private.
    calibration
        ``"analytic"`` (Balle & Wang 2018; valid for every ε) or ``"classical"`` (the seed's
        formula); ``None`` (default): the preset's (``"analytic"``, see ``preset``).
    rng
        ``None`` (fresh OS entropy), an int seed, or a :class:`numpy.random.Generator`. A seeded
        release is marked as such; the seed is never stored.
    block_rows
        Rows per block of the distributed Kendall pass.
    pairs
        ``"all"`` (default): the full U-statistic over all n(n−1)/2 pairs, O(n²·p) work.
        ``"blocks"``: for data too large for O(n²): the rows are split by position (never by
        value) into consecutive groups of at most ``pair_block`` rows and only within-group pairs
        are averaged -- an incomplete U-statistic with O(n·pair_block·p) work. The noise is
        calibrated to its sensitivity 2·max_g(b_g − 1)/P (P within-group pairs; 4/n for equal
        groups), derived in docs/design/kendall_blocks_sensitivity.md. ``"auto"``: all pairs
        while n(n−1)/2·p ≤ :data:`AUTO_MAX_WORK`, blocks above (from n and p only, so the
        choice is public; :func:`resolve_pairs`). Row order should not
        carry structure the groups could pick up (shuffle once with public randomness if it
        does); the release is private either way.
    pair_block
        Maximum rows per group for ``pairs="blocks"`` (at least 2; default 4096).
    sensitivity
        ``"tight"``: Frobenius sensitivity 2√2/n, from ‖uuᵀ − vvᵀ‖_F ≤ √2 for unit vectors --
        the same guarantee with 1/√2 of the noise (proof: docs/design/kendall_sensitivity.md).
        ``"seed"`` (for fidelity with the R package): 4/n. ``None`` (default): the preset's
        (``"tight"``).
    preset
        Where the options left at ``None`` come from (an option given explicitly wins):
        ``"recommended"`` (default) -- ``calibration="analytic"``, ``sensitivity="tight"``;
        ``"seed"`` -- the R package's configuration, ``calibration="classical"``,
        ``sensitivity="seed"``, which the R comparisons use
        (:data:`~dppca_dask.pca.options.PRESETS`).
    ledger
        An :class:`~dppca_dask.privacy.accountant.Accountant` (e.g.
        ``dppca_dask.ledger_accountant(dataset=...)``) that reserves this release in the
        persistent budget ledger before any data is read, with the CLI's cap check; default:
        the one set by ``with dppca_dask.accounting(...)``, else none.

    Returns
    -------
    LoadingResult
        ``.directions`` (variable × component, PC1..PCp), ``.nonprivate``, ``.metadata``.

    Examples
    --------
    >>> from dppca_dask import privacy_control
    >>> X = np.random.default_rng(1).normal(size=(50, 3))
    >>> fit = dp_loading(X, privacy=privacy_control(eps=0.5, delta=1e-3), rng=2)
    >>> fit.directions.shape
    (3, 3)
    >>> print(fit)  # doctest: +NORMALIZE_WHITESPACE
    Differentially Private PC Directions
    Data: 50 observations x 3 variables
    Components: 3 PC directions
    Total privacy budget: eps = 0.5 ; delta = 0.001
    Non-private reference: not stored
    """
    owner = "dp_loading"
    options = LoadingOptions.parse(
        owner, cpp_option=cpp_option, non_private=non_private, calibration=calibration,
        pairs=pairs, pair_block=pair_block, sensitivity=sensitivity, preset=preset,
        block_rows=block_rows)
    plan = resolve_budget(privacy, owner=owner)
    state = as_rng(rng, owner=owner)
    source = as_data(X, owner=owner)
    setup = options.bind(source.n, source.p)
    return account(ledger, X, loading_plan_of(setup, plan), n=source.n, owner=owner,
                   rng_state=state,
                   fit=lambda tracked: fit_loading(source, plan, setup, tracked))


def fit_loading(source: DataSource, plan: BudgetPlan, setup: Setup, rng_state: Any
                ) -> LoadingResult:
    """Run the loading stage on a validated source and bound options (dp_loading, the CLI)."""
    return release_loading(source, plan, setup, rng_state).result


def release_loading(source: DataSource, plan: BudgetPlan, setup: Setup, rng_state: Any
                    ) -> Part[LoadingResult]:
    """The loading stage: its result and its spend record (handed over as objects)."""
    options = setup.options
    pairs, pair_block, bound = setup.pairs, options.pair_block, options.sensitivity
    check_matrix_memory(source.p, "The loading release (dp_loading / dp_pca)")
    budget = plan.spend("loading")
    sensitivity_value = kendall_sensitivity(source.n, pairs=pairs, pair_block=pair_block,
                                            bound=bound)
    graph, layout = kendall_sum(
        source.array, fast=options.cpp_option, block_rows=options.block_rows, pairs=pairs,
        pair_block=pair_block, reread="auto" if source.origin in ("zarr", "parquet") else False,
    )
    derivation: list[str] = []  # public: how the sensitivity was derived (recorded)
    if bound == "tight":
        derivation.append("sensitivity='tight': sqrt(2) per pair term "
                          "(docs/design/kendall_sensitivity.md)")
    if pairs == "blocks":
        sizes = layout.block_sizes
        derivation.append(f"pairs='blocks': {len(sizes)} groups of consecutive rows "
                          f"({min(sizes)} to {max(sizes)} rows, pair_block={pair_block}), "
                          f"{layout.n_pairs} within-group pairs P, sensitivity 2*(max group "
                          "size - 1)/P (docs/design/kendall_blocks_sensitivity.md)")
    non_private = options.non_private
    lazy = [graph, moments(source.array)] if non_private else [graph]
    computed = run(once(*lazy))
    k = _kendall_from_parts(computed[0], layout.n_pairs)
    release = gaussian_symmetric_matrix(
        k, sensitivity=sensitivity_value, budget=budget, calibration=options.calibration,
        rng=rng_state.generator, component="loading", basis="; ".join(derivation),
    )
    eigenvalues, directions = ordered_eigh(release.value)
    reference = None
    if non_private:
        n, _, m2 = computed[1]
        if n < 2:
            raise InputError("The non-private covariance reference needs at least two rows.")
        _, basis = ordered_eigh(m2 / (n - 1))
        reference = align_signs(basis, directions)
    return Part(build_loading_result(
        directions=directions,
        nonprivate=reference,
        variables=source.variables,
        n=source.n,
        plan=plan,
        ledger=(release.record,),
        calibration=options.calibration,
        seeded=rng_state.seeded,
        extra={
            "cpp_option": options.cpp_option, "pairs": pairs, "pair_block": pair_block,
            "sensitivity": bound,
            "kendall_layout": layout.as_dict(),
        },
        eigenvalues=eigenvalues,
    ), (release.record,))


def loading_records(setup: Setup, budget: BudgetPlan) -> tuple[SpendRecord, ...]:
    """The loading stage's planned ledger: one symmetric-matrix Gaussian with the allocation,
    its grid-inflated Frobenius sensitivity and its diagonal noise sd (all public)."""
    spend = budget.spend("loading")
    options, p = setup.options, setup.p
    calibration = options.calibration
    sensitivity = kendall_sensitivity(setup.n, pairs=setup.pairs, pair_block=options.pair_block,
                                      bound=options.sensitivity)
    return (gaussian_symmetric_matrix_record(component="loading", budget=spend,
                                             calibration=calibration, p=p,
                                             sensitivity=sensitivity,
                                             basis="noisy spherical Kendall matrix"),)


def loading_plan_of(setup: Setup, budget: BudgetPlan) -> Plan:
    """What ``dp_loading`` spends and its one Kendall pass, for bound options."""
    return Plan(loading_records(setup, budget), passes=1)


def plan_loading(n: int, p: int, budget: BudgetPlan, *, calibration: str | None = None,
                 pairs: Pairs = "all", pair_block: int = DEFAULT_PAIR_BLOCK,
                 sensitivity: str | None = None, preset: str = "recommended") -> Plan:
    """What ``dp_loading`` spends and its one Kendall pass, from public quantities only."""
    options = LoadingOptions.parse("dp_loading", calibration=calibration, pairs=pairs,
                                   pair_block=pair_block, sensitivity=sensitivity,
                                   preset=preset)
    return loading_plan_of(options.bind(n, p), budget)
