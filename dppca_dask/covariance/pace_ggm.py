"""PACE-GGM: private adaptive covariance estimation via Gaussian graphical models.

Ferrando, Fuentes, Mullins, Musco & Sheldon, "Private Adaptive Covariance Estimation via Gaussian
Graphical Models" (arXiv 2605.24295, 2026), as summarised in ``docs/spec/seeds/pace_ggm_summary_fr.txt``
and specified in docs/spec/SPEC_covariance.md §3. The paper's algorithm box and constants are not public;
every choice we had to make is a documented field of :func:`pace_ggm_control`.

Everything here runs on the driver, on the exact d×d statistic of the *normalised* data
x̃_j = x_j / B_j ∈ [−1, 1] (so Σ̃ = Σ / (B Bᵀ)); one off-diagonal entry then has sensitivity
2/n, the diagonal vector √d/n, and scores normalised by their own sensitivity (SPEC §3) are
exactly the scores of Σ̃. The maximum-determinant completion is equivariant under this
diagonal scaling, so the caller maps the answer back with Σ̂ = Σ̃̂ ∘ B Bᵀ.

Rounds (select – measure – reconstruct, AIM-style; McKenna et al. 2022, Alg. 2):

1. measure all d diagonal entries with ρ_diag = β·ρ (Gaussian, L2 sensitivity √d/n);
2. per round, with per-round budget ρ_t = ε_t²/8 + Δ²/(2σ_t²) (initially (1 − β)·ρ/T, a
   fraction α to the measurement); if less than 2·ρ_t is left the round takes all that is left
   (the final round); select (j, k) with the exponential mechanism on
   q_jk = n·|Σ̃_jk − Σ̂_jk|/2 (minus √(2/π)·σ_t/Δ for entries already measured, by default);
   measure Σ̃_jk + N(0, σ_t²) and combine by inverse variance; reconstruct (``maxent``, only the
   component containing j and k); if the entry's estimate moved by at most √(2/π)·σ_t, halve σ
   and double ε for later rounds (the budget per round ×4).

Privacy: ρ_diag + Σ_t (ε_t²/8 + Δ²/(2σ_t²)) ≤ ρ by zCDP composition; every amount is taken from
an :class:`~dppca_dask.privacy.zcdp.Odometer` before its mechanism runs, so the ledger provably sums to
at most ρ. Selection scores use the exact statistic held on the driver; reconstruction,
clipping of measurements to the public bounds and annealing decisions are post-processing.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dppca_dask._validation import bad_param, parse_choice, parse_int, parse_real
from dppca_dask.covariance.maxent import MaxEntSolution, maxent
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.mechanisms import exponential_mechanism, gaussian_zcdp
from dppca_dask.privacy.zcdp import Odometer

__all__ = [
    "PaceGGMControl",
    "PaceGGMFit",
    "as_control",
    "initial_shares",
    "measurement_sensitivities",
    "pace_ggm_control",
    "run_pace_ggm",
]

_OWNER = "pace_ggm_control"
_NOISE_MEAN = math.sqrt(2.0 / math.pi)  # E|N(0, 1)|
_EXACT = 1e4
"""Precision of the public constant's entry (exactly 1), relative to the largest other one."""


@dataclass(frozen=True)
class PaceGGMControl:
    """Settings of PACE-GGM; build it with :func:`pace_ggm_control` (fields documented there)."""

    diag_fraction: float = 0.2
    measure_fraction: float = 0.7
    rounds_per_variable: int = 4
    anneal_factor: float = 2.0
    anneal_threshold: float = 1.0
    measured_penalty: str = "sigma"
    diag_floor: float = 1e-3
    gamma: float = 1e-6
    solver: str = "newton"
    max_rounds: int | None = None
    mean: str = "none"
    mean_fraction: float = 0.1

    def __post_init__(self) -> None:
        """Every field checked (and normalised) here, so a hand-built control is as safe as
        :func:`pace_ggm_control`'s."""
        o = _OWNER
        values: dict[str, Any] = {
            "diag_fraction": parse_real(self.diag_fraction, "diag_fraction", o, low=0.0,
                                        high=1.0),
            "measure_fraction": parse_real(self.measure_fraction, "measure_fraction", o,
                                           low=0.0, high=1.0),
            "rounds_per_variable": parse_int(self.rounds_per_variable, "rounds_per_variable", o,
                                             low=1),
            "anneal_factor": parse_real(self.anneal_factor, "anneal_factor", o, low=1.0,
                                        low_open=False),
            "anneal_threshold": parse_real(self.anneal_threshold, "anneal_threshold", o,
                                           low=0.0, low_open=False),
            "measured_penalty": parse_choice(self.measured_penalty, "measured_penalty", o,
                                             ("sigma", "none")),
            "diag_floor": parse_real(self.diag_floor, "diag_floor", o, low=0.0, high=1.0),
            "gamma": parse_real(self.gamma, "gamma", o, low=0.0),
            "solver": parse_choice(self.solver, "solver", o, ("newton", "pgd")),
            "max_rounds": None if self.max_rounds is None else parse_int(
                self.max_rounds, "max_rounds", o, low=1),
            "mean": parse_choice(self.mean, "mean", o, ("none", "measure")),
            "mean_fraction": parse_real(self.mean_fraction, "mean_fraction", o, low=0.0,
                                        high=1.0),
        }
        if values["mean"] == "measure" and \
                values["diag_fraction"] + values["mean_fraction"] >= 1.0:
            raise bad_param("mean_fraction", o, "less than 1 - diag_fraction (budget must be "
                            "left for the rounds)", self.mean_fraction)
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PaceGGMControl:
        return pace_ggm_control(**data)


def pace_ggm_control(
    *,
    diag_fraction: float = 0.2,
    measure_fraction: float = 0.7,
    rounds_per_variable: int = 4,
    anneal_factor: float = 2.0,
    anneal_threshold: float = 1.0,
    measured_penalty: str = "sigma",
    diag_floor: float = 1e-3,
    gamma: float = 1e-6,
    solver: str = "newton",
    max_rounds: int | None = None,
    mean: str = "none",
    mean_fraction: float = 0.1,
) -> PaceGGMControl:
    """Settings of PACE-GGM that the paper does not publish, with our defaults.

    Parameters
    ----------
    diag_fraction
        β: share of ρ spent on the d diagonal entries first. Default 0.2 (SPEC §3 suggests the
        AIM-like 0.1; 0.2 measured slightly better at ρ ≤ 0.1 and no worse above, see
        ``benchmarks/covariance.py``).
    measure_fraction
        α: share of each round's budget for the Gaussian measurement; the rest (1 − α) pays
        for the exponential-mechanism selection. Default 0.7 (AIM uses 0.9; with the
        d(d−1)/2 candidates of a covariance matrix and small n·ρ, a larger selection share
        measured better on every benchmark dataset).
    rounds_per_variable
        T/d: the initial per-round budget is (1 − β − mean share)·ρ/T with
        T = rounds_per_variable·d planned rounds. Default 4 (AIM uses 16 per attribute; 4
        measured as good or better, and fewer rounds are faster). Rounds never exceed T,
        because each spends at least the initial amount.
    anneal_factor
        When the measured entry's estimate moved by at most the expected noise, σ is divided
        and ε multiplied by this factor for later rounds (AIM: 2, so ×4 budget per round).
    anneal_threshold
        Multiplier of the annealing test's expected noise magnitude √(2/π)·σ_t (AIM: 1).
    measured_penalty
        ``"sigma"`` (default; SPEC's reading of AIM): an already-measured entry's score is
        lowered by √(2/π)·σ_t, the error a new measurement would itself carry; ``"none"``.
    diag_floor
        Noisy variances are clipped to [diag_floor·B_j², B_j²] before reconstruction (the upper
        end is the public bound; off-diagonal values are clipped to ±B_j·B_k). Default 1e-3.
    gamma
        γ_min of the reconstruction's barrier path (:func:`~dppca_dask.covariance.maxent.maxent`),
        dimensionless. Default 1e-6 (≈ the spec's bilevel problem; larger regularises more).
    solver
        ``"newton"`` (the barrier / interior-point maximum-entropy solver) or ``"pgd"`` (the
        projected-gradient baseline the spec asks to compare; not maximum entropy).
    max_rounds
        Optional cap on the number of rounds (compute time only); when reached, the last round
        spends all that is left. ``None``: the budget alone decides (at most T rounds).
    mean
        ``"none"`` (default): the spec's algorithm on Σ(X). ``"measure"`` [our choice, the
        spec's optional private mean]: work on the second moment of (1, x) -- a public constant
        variable whose entry is exactly 1 -- so row 0 holds the column means; all d means are
        measured first (Gaussian, L2 sensitivity 2·√d/n in normalised units) with
        ``mean_fraction``·ρ, and mean entries stay selection candidates. The max-entropy
        completion then carries the rank-one mean term x̄x̄ᵀ of an uncentred Σ(X) exactly, and
        the graph describes the centred covariance.
    mean_fraction
        Share of ρ for the mean vector when ``mean="measure"``. Default 0.1.

    Returns
    -------
    PaceGGMControl

    Examples
    --------
    >>> ctl = pace_ggm_control(diag_fraction=0.1)
    >>> ctl.diag_fraction, ctl.measure_fraction, ctl.rounds_per_variable
    (0.1, 0.7, 4)
    """
    return PaceGGMControl(  # validated by the type itself
        diag_fraction=diag_fraction, measure_fraction=measure_fraction,
        rounds_per_variable=rounds_per_variable, anneal_factor=anneal_factor,
        anneal_threshold=anneal_threshold, measured_penalty=measured_penalty,
        diag_floor=diag_floor, gamma=gamma, solver=solver, max_rounds=max_rounds, mean=mean,
        mean_fraction=mean_fraction,
    )


def as_control(control: Any, owner: str) -> PaceGGMControl:
    """``None`` → defaults; a :class:`PaceGGMControl`; or a dict of :func:`pace_ggm_control` args."""
    if control is None:
        return PaceGGMControl()
    if isinstance(control, PaceGGMControl):
        return control
    if isinstance(control, dict):
        try:
            return pace_ggm_control(**control)
        except TypeError:
            pass
    raise bad_param("control", owner, "None, a pace_ggm_control() object or a dict of its "
                    "arguments", control)


@dataclass
class PaceGGMFit:
    """What :func:`run_pace_ggm` returns, in normalised units (divide-by-B space)."""

    covariance: np.ndarray
    precision: np.ndarray
    measurements: np.ndarray
    weights: np.ndarray
    ledger: list[SpendRecord]
    rounds: int = 0
    anneals: int = 0
    solver_seconds: float = 0.0
    solver_iterations: int = 0
    solver_converged: bool = True
    selected: list[tuple[int, int]] = field(default_factory=list)
    mean_measurements: np.ndarray | None = None
    mean_weights: np.ndarray | None = None


def _clip(y: np.ndarray, floor: float) -> np.ndarray:
    """Measurements clipped to what the public bounds allow (post-processing)."""
    out = np.clip(y, -1.0, 1.0)
    np.fill_diagonal(out, np.clip(np.diag(y), floor, 1.0))
    return out


def measurement_sensitivities(n: int, d: int, clip: str = "box") -> dict[str, float]:
    """Replace-one sensitivities of PACE-GGM's measurements in normalised units.

    ``clip="box"`` (|x̃_j| ≤ 1): diagonal vector √d/n, one off-diagonal entry (and its
    selection score) 2/n, the mean vector 2√d/n. ``clip="row"`` (‖x̃‖ ≤ 1, x̃ = x/R): √2/n,
    1/n and 2/n (docs/design/covariance_sensitivity.md, "Row clipping").

    Examples
    --------
    >>> measurement_sensitivities(100, 4), measurement_sensitivities(100, 4, "row")["entry"]
    ({'diagonal': 0.02, 'entry': 0.02, 'mean': 0.04}, 0.01)
    """
    if clip == "row":
        return {"diagonal": math.sqrt(2.0) / n, "entry": 1.0 / n, "mean": 2.0 / n}
    return {"diagonal": math.sqrt(d) / n, "entry": 2.0 / n, "mean": 2.0 * math.sqrt(d) / n}


def run_pace_ggm(
    sigma: np.ndarray,
    *,
    n: int,
    rho: float,
    control: PaceGGMControl,
    rng: Any,
    mean: np.ndarray | None = None,
    clip: str = "box",
) -> PaceGGMFit:
    """PACE-GGM on the exact normalised statistic ``sigma`` = Σ(X̃) (driver only).

    ``rng`` is a Generator (or :class:`~dppca_dask.privacy.rng.Rng`); ``n`` is public. ``mean`` (the
    column means of X̃) is needed only with ``control.mean == "measure"``, where the algorithm
    works on the second moment of (1, x̃): index 0 is the public constant (its entry is exactly 1,
    known without noise), row 0 holds the means. ``clip``: how the data were clipped (``"box"``:
    |x̃_j| ≤ 1; ``"row"``: ‖x̃‖ ≤ 1), which sets the measurements' sensitivities
    (:func:`measurement_sensitivities`).
    """
    d = sigma.shape[0]
    augment = control.mean == "measure"
    if augment and mean is None:
        raise ValueError("run_pace_ggm with mean='measure' needs the column means.")
    off = int(augment)
    size = d + off
    exact = np.empty((size, size))
    exact[off:, off:] = sigma
    if augment:
        exact[0, 0] = 1.0
        exact[0, 1:] = exact[1:, 0] = mean
    odo = Odometer(rho)
    ledger: list[SpendRecord] = []
    y = np.zeros((size, size))
    lam = np.zeros((size, size))
    shares = initial_shares(control, d)
    sens = measurement_sensitivities(n, d, clip)
    diag = gaussian_zcdp(np.diag(sigma), sensitivity=sens["diagonal"],
                         rho=odo.take(shares["diagonal"] * rho), rng=rng, component="diagonal",
                         note="all d diagonal entries")
    ledger.append(diag.record)
    y[off:, off:][np.diag_indices(d)] = diag.value
    assert diag.record.scale is not None  # a Gaussian release always records its noise sd
    lam[off:, off:][np.diag_indices(d)] = 1.0 / diag.record.scale**2
    if augment:
        rel = gaussian_zcdp(mean, sensitivity=sens["mean"],
                            rho=odo.take(shares["mean"] * rho), rng=rng, component="mean",
                            note="all d column means (entries (0, j) of the augmented matrix)")
        ledger.append(rel.record)
        y[0, 1:] = y[1:, 0] = rel.value
        assert rel.record.scale is not None
        lam[0, 1:] = lam[1:, 0] = 1.0 / rel.record.scale**2
        y[0, 0] = 1.0  # public: the constant's second moment, no noise and no budget
        lam[0, 0] = _EXACT * float(np.max(lam))
    fit = PaceGGMFit(np.zeros((d, d)), np.zeros((d, d)), y, lam, ledger)
    sol = _reconstruct(y, lam, control, fit)
    if size == 1 or odo.remaining <= 0:
        return _finish(fit, sol, off)

    alpha = control.measure_fraction
    entry_sens = sens["entry"]
    upper = np.triu_indices(size, 1)
    per_round = odo.remaining / (control.rounds_per_variable * d)
    sigma_t = entry_sens / math.sqrt(2.0 * alpha * per_round)
    eps_t = math.sqrt(8.0 * (1.0 - alpha) * per_round)
    factor = control.anneal_factor
    while odo.remaining > 0:
        planned = eps_t**2 / 8.0 + entry_sens**2 / (2.0 * sigma_t**2)
        last = (odo.remaining < 2.0 * planned
                or (control.max_rounds is not None and fit.rounds + 1 >= control.max_rounds))
        if last:  # the final round spends everything left (AIM)
            left = odo.remaining
            eps_t = math.sqrt(8.0 * (1.0 - alpha) * left)
            sigma_t = entry_sens / math.sqrt(2.0 * alpha * left)
        fit.rounds += 1
        scores = np.abs(exact[upper] - sol.covariance[upper])
        if control.measured_penalty == "sigma":
            scores = scores - _NOISE_MEAN * sigma_t * (lam[upper] > 0)
        choice = exponential_mechanism(
            scores, epsilon=math.sqrt(8.0 * odo.take(eps_t**2 / 8.0)), sensitivity=entry_sens,
            rng=rng, component="select", note=f"round {fit.rounds}",
        )
        j, k = int(upper[0][choice.value]), int(upper[1][choice.value])
        rho_measure = odo.remaining if last else entry_sens**2 / (2.0 * sigma_t**2)
        shot = gaussian_zcdp(exact[j, k], sensitivity=entry_sens, rho=odo.take(rho_measure),
                             rng=rng, component="measure",
                             note=f"round {fit.rounds}, entry ({j - off}, {k - off})")
        ledger += [choice.record, shot.record]
        fit.selected.append((j - off, k - off))
        assert shot.record.scale is not None
        precision = 1.0 / shot.record.scale**2
        total = lam[j, k] + precision
        y[j, k] = y[k, j] = (lam[j, k] * y[j, k] + precision * shot.value) / total
        lam[j, k] = lam[k, j] = total
        before = sol.covariance[j, k]
        sol = _reconstruct(y, lam, control, fit, previous=sol, touched=(j, k))
        if last:
            break
        if abs(sol.covariance[j, k] - before) <= control.anneal_threshold * _NOISE_MEAN * sigma_t:
            sigma_t /= factor
            eps_t *= factor
            fit.anneals += 1
    return _finish(fit, sol, off)


def initial_shares(control: PaceGGMControl, d: int) -> dict[str, float]:
    """Fractions of ρ for the initial measurements; the rest goes to the rounds."""
    mean = control.mean_fraction if control.mean == "measure" else 0.0
    if d == 1 and mean == 0.0:
        return {"diagonal": 1.0, "mean": 0.0}
    return {"diagonal": control.diag_fraction, "mean": mean}


def _reconstruct(
    y: np.ndarray,
    lam: np.ndarray,
    control: PaceGGMControl,
    fit: PaceGGMFit,
    previous: MaxEntSolution | None = None,
    touched: tuple[int, int] | None = None,
) -> MaxEntSolution:
    clipped = _clip(y, control.diag_floor)
    began = time.perf_counter()
    if control.solver == "pgd":
        sol = maxent(clipped, lam, method="pgd")
    else:
        sol = maxent(clipped, lam, gamma=control.gamma, only=touched, previous=previous)
    fit.solver_seconds += time.perf_counter() - began
    fit.solver_iterations += sol.iterations
    fit.solver_converged = fit.solver_converged and sol.converged
    return sol


def _finish(fit: PaceGGMFit, sol: MaxEntSolution, off: int) -> PaceGGMFit:
    """Split the augmented state (``off`` = 1) into the data block and the mean entries."""
    if off:
        fit.mean_measurements = fit.measurements[0, 1:].copy()
        fit.mean_weights = fit.weights[0, 1:].copy()
    fit.measurements = fit.measurements[off:, off:]
    fit.weights = fit.weights[off:, off:]
    fit.covariance = sol.covariance[off:, off:]
    fit.precision = sol.precision
    return fit
