"""Private covariance: ``dp_covariance`` (PACE-GGM, SSP, diagonal) and the exact clipped Σ(X).

Follows docs/spec/SPEC_covariance.md. Stages, in order:

1. validate the budget (ρ, or (ε, δ) converted to ρ -- :mod:`dppca_dask.privacy.zcdp`), the public
   bounds and the method's control; the ρ allocation is fixed before any data is read;
2. one Dask computation: Σ(X) = XᵀX/n of the data clipped to [−B_j, B_j], a tree reduction over
   row blocks (:func:`~dppca_dask.kernels.gram.clipped_gram`); the d×d matrix stays on the driver
   and is never written;
3. on the driver, in the normalised space x̃_j = x_j/B_j (so |x̃_j| ≤ 1): the method's mechanisms
   (:mod:`dppca_dask.privacy.mechanisms`), then free post-processing, then Σ̂ = Σ̃̂ ∘ B Bᵀ.

Sensitivities (replace one row; n public; normalised units, multiply an entry by B_j·B_k for raw
units): one off-diagonal entry 2/n; one diagonal entry 1/n, the diagonal vector √d/n (L2); the
whole matrix √2·d/n (Frobenius; ‖xxᵀ − x'x'ᵀ‖_F² = ‖x‖⁴ + ‖x'‖⁴ − 2(xᵀx')² ≤ 2d²). With a scalar
bound B these are the spec's 2B²/n, B²/n and √2·d·B²/n; with per-variable bounds SSP adds noise
of sd B_j·B_k·σ̃ to entry (j, k). See docs/design/covariance_sensitivity.md.

Methods:

* ``"pace_ggm"`` -- :mod:`dppca_dask.covariance.pace_ggm` with maximum-entropy reconstruction
  (:mod:`dppca_dask.covariance.maxent`);
* ``"ssp"`` -- Gaussian noise on all d(d+1)/2 entries calibrated to the Frobenius sensitivity,
  then (default; ``control={"psd": False}`` turns it off) projection onto the PSD cone;
* ``"diagonal"`` -- all of ρ on the d diagonal entries, off-diagonal entries 0;
* ``"auto"`` -- the SSP release (the same one mechanism and record), post-processed by
  :func:`~dppca_dask.covariance.shrinkage.auto_estimate`: an entrywise estimate (universal
  hard threshold off the diagonal, Efron--Morris diagonal) and a capped rotationally invariant
  spectral estimate, mixed by the James--Stein weight of the off-diagonal entries, computed
  from the released matrix and its public noise sd only (docs/design/covariance_sensitivity.md, "method='auto'").

Noisy variances are clipped to the public range [0, B_j²] in every method (post-processing).

Clipping (``clip``): ``"box"`` clips each value to [−B_j, B_j] as above; ``"row"``
(Analyze-Gauss; Dwork, Talwar, Thakurta & Zhang 2014) scales each row to L2 norm at most a
radius R (:func:`~dppca_dask.kernels.gram.row_clipped_gram`), public or (``radius="private"``)
released first from a share of ρ by a private quantile search on the row norms
(:mod:`dppca_dask.covariance.radius`; one more data pass), and works in the normalised units
x̃ = x/R (‖x̃‖ ≤ 1): the whole matrix then has Frobenius sensitivity √2/n (raw √2·R²/n instead of
√2·d·B²/n), the diagonal vector √2/n, one off-diagonal entry 1/n, the mean vector 2/n
(docs/design/covariance_sensitivity.md, "Row clipping"). Every method accepts either clipping.

Presets (``preset``; ``method``, ``clip`` and ``radius`` default to None, "the preset's value";
explicit arguments always win): ``"recommended"`` (default) is ``method="auto", clip="row",
radius="private"``; ``"seed"`` is the R package's ``method="pace_ggm", clip="box"`` (needs
``bounds``). Giving ``bounds`` selects ``clip="box"``, giving a ``radius`` ``clip="row"``, and
``clip="row"`` without a radius means the private one (:func:`resolve_preset`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from dppca_dask._typing import BoundsLike, CovarianceClip, CovarianceMethod, DataLike, RngLike
from dppca_dask._validation import bad_param, parse_bool, parse_choice
from dppca_dask.covariance.maxent import psd_project
from dppca_dask.covariance.pace_ggm import PaceGGMControl, as_control, initial_shares, run_pace_ggm
from dppca_dask.covariance.radius import (
    PRIVATE,
    RadiusRelease,
    radius_graph,
    radius_records,
    release_radius,
    split_rho,
)
from dppca_dask.covariance.shrinkage import auto_estimate
from dppca_dask.errors import ParameterError, PrivacyWarning
from dppca_dask.graph.memory import check_matrix_memory
from dppca_dask.graph.passes import row_block_sum
from dppca_dask.graph.rounds import once, run
from dppca_dask.io.data import DataSource, as_data
from dppca_dask.kernels.gram import clipped_gram, row_clipped_gram
from dppca_dask.privacy.accountant import Accountant, account
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.mechanisms import (
    gaussian_zcdp,
    gaussian_zcdp_record,
    gaussian_zcdp_symmetric,
    gaussian_zcdp_symmetric_record,
)
from dppca_dask.privacy.plan import ADAPTIVE, Plan, planned
from dppca_dask.privacy.rng import RngState, as_rng
from dppca_dask.privacy.zcdp import ZCDPPlan, resolve_zcdp
from dppca_dask.results.covariance import CovarianceResult, build_covariance_result

__all__ = [
    "CLIPS",
    "METHODS",
    "PRESETS",
    "plan_covariance",
    "CovarianceEstimate",
    "CovarianceSensitivities",
    "clipped_second_moment",
    "covariance_sensitivities",
    "dp_covariance",
    "parse_bounds",
    "parse_clip",
    "release_covariance",
    "resolve_preset",
]

METHODS: tuple[str, ...] = ("pace_ggm", "ssp", "diagonal", "auto")
CLIPS: tuple[str, ...] = ("box", "row")
_OWNER = "dp_covariance"
PRESETS: dict[str, dict[str, str | None]] = {
    "recommended": {"method": "auto", "clip": "row", "radius": PRIVATE},
    "seed": {"method": "pace_ggm", "clip": "box", "radius": None},
}
"""The configurations ``preset`` names: the package's recommended one and the R package's."""


def resolve_preset(preset: Any, *, method: Any, clip: Any, bounds: Any, radius: Any,
                   owner: str = _OWNER) -> tuple[Any, Any, Any]:
    """``(method, clip, radius)`` with every ``None`` replaced by the preset's value.

    Explicit arguments win. ``clip=None`` becomes ``"box"`` when ``bounds`` are given,
    ``"row"`` when a ``radius`` is, else the preset's; ``radius=None`` with row clipping and
    no bounds becomes ``"private"``. The values are checked later (:func:`parse_clip`).

    Examples
    --------
    >>> resolve_preset("recommended", method=None, clip=None, bounds=None, radius=None)
    ('auto', 'row', 'private')
    >>> resolve_preset("seed", method=None, clip=None, bounds=3.0, radius=None)
    ('pace_ggm', 'box', None)
    >>> resolve_preset("recommended", method="ssp", clip=None, bounds=None, radius=4.0)
    ('ssp', 'row', 4.0)
    """
    rule = "one of " + ", ".join(repr(k) for k in PRESETS)
    if not isinstance(preset, str) or preset not in PRESETS:
        raise bad_param("preset", owner, rule, preset)
    values = PRESETS[preset]
    if method is None:
        method = values["method"]
    if clip is None:
        clip = "box" if bounds is not None else "row" if radius is not None else values["clip"]
    if radius is None and clip == "row" and bounds is None:
        radius = PRIVATE
    return method, clip, radius


MAX_BOUND = 1e100
"""Largest public bound B_j: B_j·B_k/n, its noise and the d×d sums stay finite float64."""


def parse_bounds(bounds: Any, variables: tuple[str, ...], owner: str = _OWNER) -> np.ndarray:
    """Public bounds B_j > 0 as a float array: a scalar, one per variable, or a name → B mapping.

    Examples
    --------
    >>> parse_bounds(2, ("a", "b")).tolist(), parse_bounds({"b": 1, "a": 3}, ("a", "b")).tolist()
    ([2.0, 2.0], [3.0, 1.0])
    """
    p = len(variables)
    rule = ("a positive finite number B, a sequence of one positive finite B_j per variable, or "
            "a mapping from every variable name to its B_j (public bounds are required; they "
            "are never taken from the data)")
    if bounds is None:
        raise bad_param("bounds", owner, rule, bounds)
    if isinstance(bounds, Mapping):
        missing = [v for v in variables if v not in bounds]
        extra = [k for k in bounds if k not in variables]
        if missing or extra:
            raise bad_param("bounds", owner, rule + f" (missing {missing}, unknown {extra})",
                            dict(bounds))
        raw: Any = [bounds[v] for v in variables]
    else:
        raw = bounds
    if isinstance(raw, bool | np.bool_ | str | bytes):
        raise bad_param("bounds", owner, rule, bounds)
    try:
        values = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise bad_param("bounds", owner, rule, bounds) from None
    if values.ndim == 0:
        values = np.full(p, float(values))
    if values.shape != (p,) or not np.isfinite(values).all() or (values <= 0).any():
        raise bad_param("bounds", owner, rule + f" ({p} variables)", bounds)
    if (values > MAX_BOUND).any():  # B_j·B_k and the noise on it must stay finite floats
        raise bad_param("bounds", owner, f"at most {MAX_BOUND:g} per variable (the released "
                        "second moments are of size B^2 and must be finite)", bounds)
    return values


@dataclass(frozen=True)
class CovarianceSensitivities:
    """Replace-one sensitivities for public bounds ``bounds`` and public ``n``.

    ``entry`` is the d×d matrix of single-entry sensitivities in raw units (2·B_j·B_k/n off the
    diagonal, B_j²/n on it); ``diagonal`` and ``frobenius`` are the L2 sensitivity of the
    normalised diagonal vector (√d/n) and the Frobenius sensitivity of the normalised matrix
    (√2·d/n); ``frobenius_raw`` is √2·Σ_j B_j²/n, the raw-units bound (√2·d·B²/n for scalar B);
    ``offdiagonal`` and ``mean``: one normalised off-diagonal entry (2/n) and the normalised
    mean vector (2√d/n). With ``clip="row"`` (radius R, normalised x̃ = x/R): entry R²/n
    everywhere, diagonal √2/n, frobenius √2/n, frobenius_raw √2·R²/n, offdiagonal 1/n, mean 2/n.
    """

    entry: np.ndarray
    diagonal: float
    frobenius: float
    frobenius_raw: float
    offdiagonal: float
    mean: float
    clip: str = "box"


def covariance_sensitivities(bounds: Any, n: int, clip: str = "box") -> CovarianceSensitivities:
    """Sensitivities of Σ(X) = XᵀX/n of clipped data (docs/spec/SPEC_covariance.md §2;
    row clipping: docs/design/covariance_sensitivity.md). With ``clip="row"``, ``bounds`` is
    the radius R (a scalar, or d copies of it).

    Examples
    --------
    >>> s = covariance_sensitivities(np.array([1.0, 2.0]), 100)
    >>> s.entry.tolist(), s.diagonal == math.sqrt(2) / 100, s.frobenius == 2 * math.sqrt(2) / 100
    ([[0.01, 0.04], [0.04, 0.04]], True, True)
    >>> r = covariance_sensitivities(2.0, 100, clip="row")
    >>> r.frobenius == math.sqrt(2) / 100, r.frobenius_raw == 4 * math.sqrt(2) / 100
    (True, True)
    """
    b = np.atleast_1d(np.asarray(bounds, dtype=np.float64))
    d = b.size
    if clip == "row":
        radius = float(b[0])
        return CovarianceSensitivities(
            np.full((d, d), radius * radius / n), math.sqrt(2.0) / n, math.sqrt(2.0) / n,
            math.sqrt(2.0) * radius * radius / n, 1.0 / n, 2.0 / n, "row")
    entry = 2.0 * np.outer(b, b) / n
    np.fill_diagonal(entry, b * b / n)
    return CovarianceSensitivities(entry, math.sqrt(d) / n, math.sqrt(2.0) * d / n,
                                   math.sqrt(2.0) * float(np.sum(b * b)) / n, 2.0 / n,
                                   2.0 * math.sqrt(d) / n)


def _moment_graph(source: DataSource, bounds: np.ndarray, count_clipped: bool,
                  clip: str = "box") -> Any:
    if clip == "row":
        return row_block_sum(source.array, row_clipped_gram, float(bounds[0]), count_clipped,
                             name="row-clipped-gram")
    return row_block_sum(source.array, clipped_gram, bounds, count_clipped, name="clipped-gram")


def parse_clip(clip: Any, bounds: Any, radius: Any, variables: tuple[str, ...],
               owner: str = _OWNER, *, private: bool = True) -> tuple[str, np.ndarray | None]:
    """``(clip, b)``: the clipping and the public per-variable scale b (the bounds B_j for
    ``"box"``; d copies of the radius R for ``"row"``, whose normalised units are x/R; ``None``
    for ``radius="private"``, allowed when ``private``)."""
    clip = parse_choice(clip, "clip", owner, CLIPS)
    if clip == "box":
        if radius is not None:
            raise bad_param("radius", owner, "None with clip='box' (give bounds)", radius)
        return clip, parse_bounds(bounds, variables, owner)
    if bounds is not None:
        raise bad_param("bounds", owner, "None with clip='row' (give radius)", bounds)
    rule = ("a positive finite float with clip='row' (the public row-norm bound R; never "
            "taken from the data)" + (", or 'private' (a private quantile of the row norms, "
                                      "from a share of rho)" if private else ""))
    if isinstance(radius, str) and radius == PRIVATE and private:
        return clip, None
    if isinstance(radius, bool | np.bool_) or not isinstance(radius, int | float | np.integer
                                                            | np.floating):
        raise bad_param("radius", owner, rule, radius)
    value = float(radius)
    if not (math.isfinite(value) and value > 0):
        raise bad_param("radius", owner, rule, radius)
    return clip, np.full(len(variables), value)


def clipped_second_moment(X: DataLike, *, bounds: Any = None, clip: str = "box",
                          radius: float | None = None) -> xr.DataArray:
    """The exact (non-private) Σ(X) = XᵀX/n of ``X`` clipped to [−B_j, B_j] (``clip="box"``)
    or with rows scaled to norm at most ``radius`` (``clip="row"``).

    The target of :func:`dp_covariance`, for checks and benchmarks. **This is not a private
    release.**

    Examples
    --------
    >>> clipped_second_moment(np.array([[2.0, 0.0], [0.0, 1.0]]), bounds=1).values.tolist()
    [[0.5, 0.0], [0.0, 0.5]]
    """
    source = as_data(X, owner="clipped_second_moment", min_rows=1)
    clip, b = parse_clip(clip, bounds, radius, source.variables, "clipped_second_moment",
                         private=False)
    assert b is not None  # private=False: a public scale
    (parts,) = run(once(_moment_graph(source, b, False, clip)))
    names = list(source.variables)
    return xr.DataArray(
        parts[0] / source.n, dims=("variable", "variable_"),
        coords={"variable": names, "variable_": names}, name="second_moment",
        attrs={"private": 0, "description": "NOT PRIVATE: exact second moment of clipped data"},
    )


@dataclass
class CovarianceEstimate:
    """A released covariance in raw units, before it is wrapped as a result."""

    covariance: np.ndarray
    measured: np.ndarray
    weights: np.ndarray
    measurements: np.ndarray
    ledger: list[SpendRecord]
    info: dict[str, Any] = field(default_factory=dict)
    mean: np.ndarray | None = None
    mean_weights: np.ndarray | None = None


def parse_control(method: str, control: Any) -> Any:
    if method == "pace_ggm":
        return as_control(control, _OWNER)
    if method == "ssp":
        if control is None:
            return {"psd": True}
        if isinstance(control, Mapping) and set(control) <= {"psd"}:
            return {"psd": parse_bool(control.get("psd", True), "control['psd']", _OWNER)}
        raise bad_param("control", _OWNER, "None or {'psd': bool} for method 'ssp'", control)
    if control is not None:
        raise bad_param("control", _OWNER, f"None for method '{method}'", control)
    return None


def release_covariance(
    sigma: np.ndarray,
    *,
    n: int,
    bounds: np.ndarray,
    rho: float,
    method: str,
    control: Any,
    rng: Any,
    mean: np.ndarray | None = None,
    clip: str = "box",
) -> CovarianceEstimate:
    """Run ``method`` on the exact statistic ``sigma`` = Σ(X) (raw units, clipped data).

    Driver-side core of :func:`dp_covariance` (validated inputs; ``rng`` a Generator). Exposed
    so that benchmarks can reuse one exact statistic across repetitions. ``mean`` holds the
    column means of the clipped data, needed only by PACE-GGM with ``mean="measure"``.
    ``clip="row"``: the rows were scaled to norm ≤ R and ``bounds`` holds d copies of R.
    """
    scale = np.outer(bounds, bounds)
    tilde = sigma / scale
    d = tilde.shape[0]
    sens = covariance_sensitivities(bounds, n, clip)
    info: dict[str, Any] = {"method": method, "clip": clip}
    if clip == "row":
        info["radius"] = float(bounds[0])
    if method == "pace_ggm":
        fit = run_pace_ggm(tilde, n=n, rho=rho, control=control, rng=rng,
                           mean=None if mean is None else mean / bounds, clip=clip)
        weights = fit.weights
        measured = weights > 0
        # no solver time: wall-clock is not a release (it would depend on the machine's load)
        info.update(rounds=fit.rounds, anneals=fit.anneals, solver=control.solver,
                    solver_iterations=fit.solver_iterations,
                    solver_converged=fit.solver_converged)
        estimate = CovarianceEstimate(
            fit.covariance * scale, measured, np.where(measured, weights / scale**2, 0.0),
            np.where(measured, fit.measurements * scale, np.nan), fit.ledger,
            _measured_info(info, measured),
        )
        if fit.mean_measurements is not None and fit.mean_weights is not None:
            estimate.mean = fit.mean_measurements * bounds
            estimate.mean_weights = fit.mean_weights / bounds**2
        return estimate
    if method in ("ssp", "auto"):
        rel = gaussian_zcdp_symmetric(tilde, sensitivity=sens.frobenius, rho=rho, rng=rng,
                                      component="ssp")
        noise_sd = rel.record.scale
        assert noise_sd is not None  # a Gaussian release always records its noise sd
        noisy = rel.value.copy()
        if method == "auto":  # post-processing of the release and its public noise sd
            released = auto_estimate(noisy, noise_sd)
        else:
            np.fill_diagonal(noisy, np.clip(np.diag(noisy), 0.0, 1.0))
            released = psd_project(noisy) if control["psd"] else noisy
        sd = np.full((d, d), noise_sd / math.sqrt(2.0))
        np.fill_diagonal(sd, noise_sd)
        measured = np.ones((d, d), dtype=bool)
        info["psd"] = True if method == "auto" else control["psd"]
        return CovarianceEstimate(released * scale, measured, 1.0 / (sd * scale) ** 2,
                                  rel.value * scale, [rel.record], _measured_info(info, measured))
    rel = gaussian_zcdp(np.diag(tilde), sensitivity=sens.diagonal, rho=rho, rng=rng,
                        component="diagonal", note="all d diagonal entries")
    released = np.diag(np.clip(rel.value, 0.0, 1.0))
    measured = np.eye(d, dtype=bool)
    y = np.full((d, d), np.nan)
    np.fill_diagonal(y, rel.value)
    noise_sd = rel.record.scale
    assert noise_sd is not None  # a Gaussian release always records its noise sd
    weights = np.where(measured, 1.0 / noise_sd**2, 0.0)
    return CovarianceEstimate(released * scale, measured, weights / scale**2, y * scale,
                              [rel.record], _measured_info(info, measured))


POST_PROCESSING_KEYS = ("measured_offdiagonal", "measured_fraction", "rounds", "anneals",
                        "solver_iterations", "solver_converged", "ledger")
"""Metadata keys of a covariance release that are post-processing of its private outputs. For
PACE-GGM this includes the ledger's per-round records: which entry each round measured and how
many rounds ran (annealing) follow the private selections; their total (``ledger_total``) is
the public plan's."""


def _measured_info(info: dict[str, Any], measured: np.ndarray) -> dict[str, Any]:
    d = measured.shape[0]
    pairs = d * (d - 1) // 2
    count = int(np.count_nonzero(np.triu(measured, 1)))
    info.update(measured_offdiagonal=count, offdiagonal_pairs=pairs,
                measured_fraction=count / pairs if pairs else 0.0)
    # the metadata keys whose values are post-processing of the release (PACE-GGM's private
    # selection and the solver's work on the noisy measurements): declared, so that a reader
    # (and tests/test_neighbours.py) knows they may differ between neighbouring datasets
    info["post_processing"] = [k for k in POST_PROCESSING_KEYS if k in info
                               or (k == "ledger" and info["method"] == "pace_ggm")]
    return info


def dp_covariance(
    X: DataLike,
    *,
    rho: float | None = None,
    eps: float | None = None,
    delta: float | None = None,
    bounds: BoundsLike | None = None,
    method: CovarianceMethod | None = None,
    control: PaceGGMControl | Mapping[str, Any] | None = None,
    rng: RngLike = None,
    report_clipping: bool = False,
    ledger: Accountant | None = None,
    clip: CovarianceClip | None = None,
    radius: float | str | None = None,
    preset: str = "recommended",
) -> CovarianceResult:
    """Differentially private second-moment (covariance) matrix Σ(X) = XᵀX/n under ρ-zCDP.

    Data are clipped inside the data pass -- each row to a radius (default: a private one), or
    each value to public bounds [−B_j, B_j] --; the release approximates Σ of the clipped data.
    Centre the data with public constants beforehand if a centred covariance is wanted. ``n``
    and the variable names are public.

    The default (``preset="recommended"``, no ``bounds``, no ``radius``) is ``method="auto",
    clip="row", radius="private"``: 10 % of ρ buys a private quantile of the row norms (a rule
    of n, d and ρ picks which, kept below far outliers by a gap test), the rest the SSP release
    clipped at it, post-processed by shrinkage. ``preset="seed"`` is the R package's ``method="pace_ggm", clip="box"`` (give
    ``bounds``). ``method``, ``clip`` and ``radius`` left at None take the preset's value;
    explicit arguments always win (:func:`resolve_preset`).

    Parameters
    ----------
    X
        Observations in rows: NumPy array, pandas DataFrame, dask array, xarray DataArray, or a
        path/URL to a Zarr array or group. Values must be finite.
    rho
        Total budget in ρ-zCDP (positive, finite).
    eps, delta
        Alternatively an (ε, δ)-DP budget, converted to the largest ρ whose conversion back
        to (ε, δ) (Canonne, Kamath & Steinke 2020; :func:`~dppca_dask.privacy.zcdp.zcdp_eps`)
        is within ε. Give either ``rho`` or both.
    bounds
        Required with ``clip="box"`` (and selecting it when ``clip`` is None): public bounds, a
        scalar B (``|x_j| ≤ B`` for all j), one B_j per variable, or a mapping from variable name
        to B_j. Never derived from the data.
    method
        ``"pace_ggm"`` (the seed preset's), ``"ssp"``, ``"diagonal"`` or ``"auto"`` (SSP plus
        shrinkage; the recommended preset's); None: the preset's. See the module docstring.
    control
        For ``"pace_ggm"``: a :func:`~dppca_dask.pace_ggm_control` object or a dict of its
        arguments. For ``"ssp"``: ``None`` or ``{"psd": bool}``. For ``"diagonal"`` and
        ``"auto"``: ``None``.
    rng
        ``None`` (fresh OS entropy), an int seed or a :class:`numpy.random.Generator`. A seeded
        release is marked as such; the seed is never stored.
    report_clipping
        Also store how many values per variable clipping changed. **Not private.**
    ledger
        An :class:`~dppca_dask.privacy.accountant.Accountant` (e.g.
        ``dppca_dask.ledger_accountant(dataset=...)``) that reserves this release in the
        persistent budget ledger before any data is read, with the CLI's cap check; default:
        the one set by ``with dppca_dask.accounting(...)``, else none.
    clip, radius
        ``"box"``: each value clipped to [−B_j, B_j]. ``"row"``: each row scaled to L2 norm at
        most ``radius`` R (Analyze-Gauss), which cuts the SSP noise from √2·d·B²/n to √2·R²/n
        in Frobenius norm; ``bounds`` must then be None. ``radius`` is a public positive
        float, or ``"private"`` (the default with row clipping): R is then released first,
        from :data:`~dppca_dask.covariance.radius.RADIUS_SHARE` of ρ, by AboveThreshold
        searches up a public geometric grid (equivariant to the data's units; one more data
        pass; docs/design/covariance_sensitivity.md, "The private radius"), and the method gets
        the rest of ρ. The stored ``bound`` is R for every variable (``|x_j| ≤ ‖x‖ ≤ R``), marked
        private when R is; ``metadata["radius"]`` is R, ``metadata["radius_quantile"]`` the
        public tail quantile it targets, ``metadata["radius_robust_quantile"]`` the public
        quantile of the robust radius ``metadata["radius_robust"]``, which R is when
        ``metadata["radius_gap"]`` (released) says the top rows lie beyond a gap.
    preset
        ``"recommended"`` (default) or ``"seed"``: what ``method``, ``clip`` and ``radius``
        left at None mean (above).

    Returns
    -------
    CovarianceResult
        ``.covariance`` (``variable × variable_``), ``.measured``, ``.weights``, ``.ledger``.

    Raises
    ------
    BudgetError
        For a missing, conflicting or out-of-range budget.
    ParameterError
        For bad bounds, method or control.

    Examples
    --------
    >>> X = np.random.default_rng(0).uniform(-1, 1, size=(500, 4))
    >>> fit = dp_covariance(X, rho=1.0, rng=1)  # auto, row clipping at a private radius
    >>> fit.method, round(fit.metadata["radius_quantile"], 3), 0.5 < fit.metadata["radius"] < 2.0
    ('auto', 0.964, True)
    >>> fit = dp_covariance(X, rho=1.0, bounds=1.0, preset="seed", rng=1)
    >>> fit.covariance.shape, bool(np.all(np.linalg.eigvalsh(fit.covariance.values) > 0))
    ((4, 4), True)
    >>> print(fit)  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    Differentially Private Covariance (PACE-GGM)
    Data: 500 observations x 4 variables
    Measured: ... of 6 off-diagonal entries (...%) in ... rounds
    Total privacy budget: rho = 1 (zCDP)
    Bounds: |x_j| <= 1 (public)
    """
    plan = resolve_zcdp(rho=rho, eps=eps, delta=delta, owner=_OWNER)
    chosen, clip, radius = resolve_preset(preset, method=method, clip=clip, bounds=bounds,
                                          radius=radius)
    method_name = parse_choice(chosen, "method", _OWNER, METHODS)
    parsed_control = parse_control(method_name, control)
    report_clipping = parse_bool(report_clipping, "report_clipping", _OWNER)
    state = as_rng(rng, owner=_OWNER)
    source = as_data(X, owner=_OWNER, min_rows=1)
    check_matrix_memory(source.p, "The covariance release (dp_covariance)")
    clipping, b = parse_clip(clip, bounds, radius, source.variables)
    release = plan_covariance(source.p, plan, method=method_name, control=parsed_control,
                              clip=clipping, radius=PRIVATE if b is None else float(b[0]),
                              bounds=bounds)

    def fit(tracked: RngState) -> CovarianceResult:
        return fit_covariance(
            source, plan, bounds=b, method=method_name, control=parsed_control,
            rng_state=tracked,
            report_clipping=report_clipping, clip=clipping,
        )

    return account(ledger, X, release, n=source.n, owner=_OWNER, rng_state=state, fit=fit)


def rho_allocations(method: str, rho: float, control: Any, d: int,
                    private_radius: bool = False) -> tuple[tuple[str, float], ...]:
    """The named parts of ρ (``radius`` first when the radius is private; the method's parts
    then share what is left)."""
    if private_radius:
        robust, gap, tail, rest = split_rho(rho)
        return (("radius", robust + gap + tail), *rho_allocations(method, rest, control, d))
    if method == "pace_ggm":
        shares = initial_shares(control, d)
        rounds = 1.0 - shares["diagonal"] - shares["mean"]
        parts = {"diagonal": shares["diagonal"], "mean": shares["mean"], "rounds": rounds}
        return tuple((name, share * rho) for name, share in parts.items() if share > 0)
    if method == "auto":  # one SSP release; the shrinkage is post-processing
        return (("ssp", rho),)
    return ((method, rho),)


def fit_covariance(
    source: DataSource,
    plan: ZCDPPlan,
    *,
    bounds: np.ndarray | None,
    method: str,
    control: Any,
    rng_state: Any,
    report_clipping: bool,
    clip: str = "box",
) -> CovarianceResult:
    """Run the covariance release on a validated source (shared with the CLI runner).

    ``clip="row"``: ``bounds`` holds d copies of the radius R (:func:`parse_clip`), or is None
    for the private radius: a count pass and the radius searches run first (RNG order: the
    robust search, the gap test, the tail search, then the method's draws)."""
    if source.n < 1:
        raise ParameterError("dp_covariance needs at least one row.")
    if source.n == 1:  # public n: the warning says nothing about the data
        warnings.warn("dp_covariance on a single row: the release is valid but the noise (of "
                      "the size of the bounds squared) swamps it; it says nothing useful.",
                      PrivacyWarning, stacklevel=3)
    private = bounds is None
    if private and clip != "row":
        raise ParameterError("dp_covariance: a private radius needs clip='row'.")
    plan = plan.with_allocations(rho_allocations(method, plan.rho, control, source.p, private))
    rho_method = plan.rho
    found: RadiusRelease | None = None
    if bounds is None:
        (counts,) = run(once(radius_graph(source)))
        found = release_radius(counts, n=source.n, d=source.p, rho=plan.rho,
                               rng=rng_state.generator)
        bounds = np.full(source.p, found.radius)
        rho_method = split_rho(plan.rho)[3]
    (parts,) = run(once(_moment_graph(source, bounds, report_clipping, clip)))
    gram, sums, clipped = parts
    estimate = release_covariance(gram / source.n, n=source.n, bounds=bounds, rho=rho_method,
                                  method=method, control=control, rng=rng_state.generator,
                                  mean=sums / source.n, clip=clip)
    if found is not None:
        with_radius(estimate, found)
    control_dict = control.to_dict() if isinstance(control, PaceGGMControl) else control
    return build_covariance_result(
        estimate, variables=source.variables, n=source.n, bounds=bounds, plan=plan,
        control=control_dict, seeded=rng_state.seeded,
        clipped=clipped if report_clipping else None, private_bound=found is not None,
    )


RADIUS_KEYS = ("radius", "radius_robust", "radius_gap", "bounds")
"""The metadata keys that hold the released radius (post-processing when it is private)."""


def with_radius(estimate: CovarianceEstimate, found: RadiusRelease) -> CovarianceEstimate:
    """Put the private radius's records first in ``estimate``'s ledger and its released values
    (private: declared post-processing) and public rule into the info."""
    estimate.ledger = [*found.records, *estimate.ledger]
    info = estimate.info
    info.update(radius=found.radius, radius_private=True, radius_robust=found.robust,
                radius_gap=found.gap, radius_quantile=found.rule.q,
                radius_robust_quantile=found.rule.q_robust, radius_rule=found.rule.binding)
    info["post_processing"] = [*info.get("post_processing", []), *RADIUS_KEYS]
    return estimate


_PLAN_NOTES = {"ssp": "the whole second-moment matrix", "diagonal": "all d diagonal entries",
               "mean": "all d column means",
               "rounds": "select (exponential mechanism) + measure (Gaussian) per round; how "
                         "many rounds and their split adapt to the data"}


def plan_covariance(p: int, plan: ZCDPPlan, *, method: str | None = None,
                    control: Any = None, clip: str | None = None,
                    radius: float | str | None = None, bounds: Any = None,
                    preset: str = "recommended") -> Plan:
    """What ``dp_covariance`` spends (ρ-zCDP) and its passes, from public quantities only.

    ``method``, ``clip``, ``radius``, ``bounds`` and ``preset`` resolve as in
    :func:`dp_covariance` (default: auto, row clipping at a private radius); only whether the
    radius is private changes the records (its two searches come first, and a second pass).
    PACE-GGM's rounds adapt to the data (how many, and how ρ is split among them), so they are
    planned as one record with their whole allocation (:data:`~dppca_dask.privacy.plan.ADAPTIVE`).

    Examples
    --------
    >>> from dppca_dask.privacy.zcdp import resolve_zcdp
    >>> plan = plan_covariance(4, resolve_zcdp(rho=1.0, owner="dp_covariance"))
    >>> [(r.component, round(r.rho, 4)) for r in plan.records], plan.passes
    ([('radius', 0.04), ('radius', 0.02), ('radius', 0.04), ('ssp', 0.9)], 2)
    """
    method, clip, radius = resolve_preset(preset, method=method, clip=clip, bounds=bounds,
                                          radius=radius)
    method = parse_choice(method, "method", _OWNER, METHODS)
    if clip not in CLIPS:  # checked once: the fit's parse_clip checked it already
        clip = parse_choice(clip, "clip", _OWNER, CLIPS)
    private = clip == "row" and isinstance(radius, str) and radius == PRIVATE
    control = control if isinstance(control, PaceGGMControl) else parse_control(method, control)
    records: list[SpendRecord] = list(radius_records(plan.rho)) if private else []
    for name, rho in rho_allocations(method, plan.rho, control, p, private):
        note = _PLAN_NOTES.get(name, "")
        if name == "radius":  # its two searches, above
            continue
        if name == "rounds":  # a data-dependent number of calls: one record for them all
            records.append(planned(name, ADAPTIVE, 0.0, 0.0, rho=rho, calibration="zcdp",
                                   note=note))
        elif name == "ssp":  # the sensitivities need n, which a plan does not take
            records.append(gaussian_zcdp_symmetric_record(component=name, rho=rho, p=p,
                                                          sensitivity=None, note=note))
        else:
            records.append(gaussian_zcdp_record(component=name, rho=rho, draws=p,
                                                sensitivity=None, note=note))
    eps_delta = None if plan.eps is None else (plan.eps, plan.delta or 0.0)
    return Plan(tuple(records), passes=2 if private else 1, accounting="zcdp",
                eps_delta=eps_delta,
                adaptive=frozenset({"select", "measure"}) if method == "pace_ggm"
                else frozenset())
