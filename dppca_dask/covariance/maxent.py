"""Maximum-entropy (maximum-determinant) completion of noisy, partially measured covariances.

Problem (docs/spec/SPEC_covariance.md §3). Measured entries S (every diagonal entry and the off-diagonal
pairs with weight λ_jk > 0) carry precision-weighted values y_jk. The reconstruction is

    Σ̂ = argmax log det Σ  subject to  Σ ∈ argmin_{W ⪰ 0} f(W),  f(W) = Σ_{(j,k)∈S} λ_jk (W_jk − y_jk)²

(each unordered pair counted once). We solve it along the log-barrier path

    W_γ = argmin_W  f(W) − γ·log det W,    γ ↓ γ_min,

whose every point is a Gaussian graphical model: stationarity gives (W_γ⁻¹)_jk = 0 for every
unmeasured pair, because f does not depend on those entries (Dempster 1972, covariance
selection). For consistent input W_γ → the max-det completion as γ → 0; for noisy input that no
positive-definite matrix fits, W_γ stays positive definite for every γ > 0, so a finite γ_min
(dimensionless: f is in χ² units and log det is scale-free) always gives a finite SPD answer.

Method ("IPM-Cholesky"). The Lagrange dual of the barrier problem is a problem over precision
matrices K supported on S:

    minimise ψ(K) = −log det K + Σ_e c_e K_e y_e + γ Σ_e c_e² K_e² / (4 λ_e),   c_e = 1 (diag), 2,

with W = K⁻¹ and W_e = y_e + γ c_e K_e / (2 λ_e) at the optimum. ψ is self-concordant, so damped
Newton steps with a backtracking line search converge from any positive-definite start; every
trial point is checked by a Cholesky factorisation (failure = outside the domain, halve the step).
The Hessian is H_ef = ½ c_e c_f (W_ab' W_ba' + W_aa' W_bb') + δ_ef γ c_e²/(2λ_e) for e = (a, b),
f = (a', b'); above ``dense_limit`` unknowns Newton-CG uses H·v = c ∘ (W V W)_S + q ∘ v instead.
A cold start follows γ from 1 down by ``path_factor`` to γ_min; a warm start (``start``) goes
straight to γ_min.

The problem separates over the **connected components** of the graph of measured off-diagonal
pairs: the solution is block diagonal across components, and an isolated variable has the closed
form W_jj = (y_jj + √(y_jj² + 2γ/λ_jj))/2.

``method="pgd"`` is the simple baseline the spec asks to compare against: projected gradient
descent on f over the PSD cone from the diagonal start (unmeasured entries stay where the start
and the projections put them; its eigenvalues are floored to keep the result definite). It has no
precision-sparsity guarantee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.sparse import csgraph, csr_matrix
from scipy.sparse.linalg import LinearOperator, cg

from dppca_dask._validation import parse_choice, parse_int, parse_real
from dppca_dask.errors import ParameterError

__all__ = ["MaxEntSolution", "components", "maxent", "psd_project"]

_OWNER = "maxent"
_ARMIJO = 0.25
_QUADRATIC = 0.0625
"""Below this squared Newton decrement (λ < 1/4) a self-concordant function's full Newton step
stays in the domain and converges quadratically (Nesterov & Nemirovski), so no line search."""
_STALL = 1e-10
_KKT_SD = 1e-5
_KKT_REL = 1e-6
_WARM_ITER = 50
_EIG_FLOOR = 1e-13
_COND_MAX = 1e10
"""Largest condition number of a component's answer; the barrier path stops before it."""


@dataclass(frozen=True)
class MaxEntSolution:
    """The completed covariance, its precision matrix and how the solver did.

    ``precision`` is exactly zero at every unmeasured pair (structurally, for ``method="newton"``);
    ``components`` lists the variable indices of each connected component (isolated variables
    are components of size one).
    """

    covariance: np.ndarray
    precision: np.ndarray
    components: tuple[tuple[int, ...], ...]
    iterations: int
    converged: bool
    gamma: float
    method: str


def components(weights: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """Connected components of the graph whose edges are the off-diagonal pairs with weight > 0.

    Examples
    --------
    >>> w = np.eye(4); w[0, 2] = w[2, 0] = 1.0
    >>> components(w)
    ((0, 2), (1,), (3,))
    """
    adj = np.asarray(weights) > 0
    np.fill_diagonal(adj, False)
    _, labels = csgraph.connected_components(csr_matrix(adj), directed=False)
    groups: dict[int, list[int]] = {}
    for j, lab in enumerate(labels.tolist()):
        groups.setdefault(lab, []).append(j)
    return tuple(tuple(g) for g in sorted(groups.values()))


def _validate(y: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y, dtype=np.float64)
    lam = np.asarray(weights, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] != y.shape[1] or lam.shape != y.shape:
        raise ParameterError(f"The 'y' and 'weights' parameters of {_OWNER} must be square "
                             f"matrices of one shape. Got {y.shape} and {lam.shape} instead.")
    if not np.isfinite(lam).all() or (lam < 0).any() or not np.array_equal(lam, lam.T):
        raise ParameterError(f"The 'weights' parameter of {_OWNER} must be a symmetric matrix of "
                             "finite non-negative precisions. Got other values instead.")
    if (np.diag(lam) <= 0).any():
        raise ParameterError(f"The 'weights' parameter of {_OWNER} must be positive on the "
                             "diagonal (every variance measured). Got a zero instead.")
    measured = lam > 0
    if not np.isfinite(y[measured]).all():
        raise ParameterError(f"The 'y' parameter of {_OWNER} must be finite at measured entries.")
    y = np.where(measured, y, 0.0)
    return (y + y.T) / 2.0, lam


class _Component:
    """The dual problem of one component with more than one variable."""

    def __init__(self, y: np.ndarray, lam: np.ndarray, gamma: float) -> None:
        p = y.shape[0]
        self.p = p
        self.rows, self.cols = np.nonzero(np.triu(lam > 0))
        self.c = np.where(self.rows == self.cols, 1.0, 2.0)
        self.y = y[self.rows, self.cols]
        self.lam = lam[self.rows, self.cols]
        self.gamma = gamma
        self.q = gamma * self.c**2 / (2.0 * self.lam)

    def matrix(self, theta: np.ndarray) -> np.ndarray:
        k = np.zeros((self.p, self.p))
        k[self.rows, self.cols] = theta
        k[self.cols, self.rows] = theta
        return k

    def evaluate(self, theta: np.ndarray) -> tuple[float, np.ndarray] | None:
        """(ψ, Cholesky factor) at θ, or None outside the domain (K not positive definite)."""
        try:
            chol = linalg.cholesky(self.matrix(theta), lower=True, check_finite=False)
        except linalg.LinAlgError:
            return None
        diag = np.diag(chol)
        if not np.all(diag > 0) or not np.isfinite(diag).all():
            return None
        value = (-2.0 * float(np.sum(np.log(diag))) + float(self.c @ (theta * self.y))
                 + 0.5 * float(self.q @ (theta * theta)))
        return value, chol

    def newton_step(self, theta: np.ndarray, w: np.ndarray, dense_limit: int) -> np.ndarray:
        r, c = self.rows, self.cols
        grad = self.c * (self.y - w[r, c]) + self.q * theta
        m = theta.size
        if m <= dense_limit:
            hess = 0.5 * np.outer(self.c, self.c) * (
                w[np.ix_(r, c)] * w[np.ix_(c, r)] + w[np.ix_(r, r)] * w[np.ix_(c, c)]
            )
            hess[np.diag_indices(m)] += self.q
            try:
                return -linalg.cho_solve(linalg.cho_factor(hess, check_finite=False), grad,
                                         check_finite=False)
            except linalg.LinAlgError:  # numerically singular near the PSD boundary
                vals, vecs = np.linalg.eigh(hess)
                vals = np.maximum(vals, _EIG_FLOOR * max(float(vals[-1]), 0.0) + 1e-300)
                return -(vecs @ ((vecs.T @ grad) / vals))

        def hess_vec(v: np.ndarray) -> np.ndarray:
            mat = self.matrix(v)
            return self.c * (w @ mat @ w)[r, c] + self.q * v

        precond = 1.0 / (0.5 * self.c**2 * (w[r, c] ** 2 + w[r, r] * w[c, c]) + self.q)
        op = LinearOperator((m, m), matvec=hess_vec, dtype=np.float64)
        pre = LinearOperator((m, m), matvec=lambda v: precond * v, dtype=np.float64)
        step, _ = cg(op, -grad, M=pre, rtol=1e-8, maxiter=max(50, 2 * m))
        return step

    def solve(self, theta: np.ndarray, tol: float, max_iter: int,
              dense_limit: int) -> tuple[np.ndarray, np.ndarray, int, bool]:
        state = self.evaluate(theta)
        if state is None:  # the warm start is not definite: fall back to the diagonal start
            theta = np.where(self.rows == self.cols, 1.0 / np.maximum(np.abs(self.y), 1e-12), 0.0)
            state = self.evaluate(theta)
            if state is None:
                raise RuntimeError("maxent: the diagonal start is not positive definite.")
        value, chol = state
        previous = math.inf
        for it in range(1, max_iter + 1):
            w = linalg.cho_solve((chol, True), np.eye(self.p), check_finite=False)
            step = self.newton_step(theta, w, dense_limit)
            grad = self.c * (self.y - w[self.rows, self.cols]) + self.q * theta
            slope = float(grad @ step)
            # Newton decrement λ²/2 (affine-invariant optimality gap); inside the quadratic region
            # a decrement that stops shrinking has reached rounding level.
            gap = -slope / 2.0
            if gap <= tol or (gap < _STALL and gap > 0.25 * previous):
                return theta, w, it, True
            previous = gap
            t = 1.0
            quadratic = -slope < _QUADRATIC  # Newton decrement < 1/4: full steps stay feasible
            while True:
                trial = self.evaluate(theta + t * step)
                if trial is not None and (quadratic or trial[0] <= value + _ARMIJO * t * slope):
                    break
                t *= 0.5
                if t < 1e-12:
                    return theta, w, it, False
            theta = theta + t * step
            value, chol = trial
        w = linalg.cho_solve((chol, True), np.eye(self.p), check_finite=False)
        return theta, w, max_iter, False

    def satisfied(self, theta: np.ndarray, w: np.ndarray) -> bool:
        """Do W = K⁻¹ and θ meet the optimality condition W_e = y_e + γ c_e θ_e/(2λ_e)?

        Each residual must be within ``_KKT_SD`` measurement standard deviations or within
        ``_KKT_REL`` of the largest variance (the floating-point floor when λ is huge). This
        catches iterates that wandered where K⁻¹ is computed inaccurately.
        """
        fitted = w[self.rows, self.cols]
        if not np.isfinite(fitted).all():
            return False
        resid = np.abs(fitted - self.y - self.gamma * self.c * theta / (2.0 * self.lam))
        scale = float(np.max(np.abs(np.diag(w))))
        return bool(np.all((resid * np.sqrt(self.lam) <= _KKT_SD) | (resid <= _KKT_REL * scale)))


def _conditioned(k: np.ndarray, scale: float) -> bool:
    """K positive definite with λ_min(K⁻¹) = 1/λ_max(K) at least ``scale``/``_COND_MAX``."""
    vals = np.linalg.eigvalsh(k)
    return bool(vals[0] > 0 and vals[-1] * scale <= _COND_MAX)


def _barrier_path(
    y: np.ndarray, lam: np.ndarray, gamma: float, tol: float, max_iter: int,
    path_factor: float, dense_limit: int, scale: float,
) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Cold start: diagonal K, γ from the data's χ² scale down to γ_min by ``path_factor``.

    The path stops early (keeping the last good stage, so the effective γ is larger than asked)
    when a stage fails its optimality check or its smallest eigenvalue would fall below
    ``scale``/``_COND_MAX`` (``scale``: the largest measured magnitude of the whole problem): the
    answer then stays a finite, well-conditioned positive-definite matrix.
    """
    measured = lam > 0
    g = max(gamma, 1.0, float(np.max(lam[measured] * y[measured] ** 2)))
    theta: np.ndarray | None = None
    best: tuple[np.ndarray, np.ndarray] | None = None
    iterations, ok = 0, False
    while True:
        stage = _Component(y, lam, g)
        if theta is None:
            theta = np.where(stage.rows == stage.cols,
                             1.0 / np.maximum(np.abs(stage.y), 1e-12), 0.0)
        theta, w, its, ok = stage.solve(theta, tol, max_iter, dense_limit)
        iterations += its
        ok = ok and stage.satisfied(theta, w) and _conditioned(stage.matrix(theta), scale)
        if not ok and best is not None:
            return best[0], best[1], iterations, False
        best = (theta, w)
        if g <= gamma:
            return theta, w, iterations, ok
        g = max(gamma, g * path_factor)


def _isolated(y: float, lam: float, gamma: float) -> float:
    """W_jj of an isolated variable: the positive root of W² − yW − γ/(2λ) = 0 (stable form)."""
    root = math.sqrt(y * y + 2.0 * gamma / lam)
    return (y + root) / 2.0 if y >= 0 else (gamma / lam) / (root - y)


def maxent(
    y: np.ndarray,
    weights: np.ndarray,
    *,
    gamma: float = 1e-6,
    method: str = "newton",
    start: np.ndarray | None = None,
    only: tuple[int, ...] | None = None,
    previous: MaxEntSolution | None = None,
    tol: float = 1e-20,
    max_iter: int = 200,
    path_factor: float = 0.1,
    dense_limit: int = 1200,
) -> MaxEntSolution:
    """Maximum-entropy completion of measured entries ``y`` with precisions ``weights``.

    Parameters
    ----------
    y
        Symmetric ``d × d`` values; read only where ``weights > 0``.
    weights
        Symmetric ``d × d`` precisions λ_jk ≥ 0 (0 = not measured); the diagonal must be positive.
    gamma
        Final barrier weight γ_min > 0 (dimensionless). Smaller follows the spec's bilevel
        problem more closely; larger regularises inconsistent input more.
    method
        ``"newton"`` (the barrier / interior-point method above) or ``"pgd"`` (baseline).
    start
        A positive-definite precision matrix supported on the measured pattern to warm-start
        from (for example the previous solution's ``precision``); components where it is not
        definite restart from the diagonal.
    only, previous
        Re-solve only the component containing these variable indices and copy every other
        block from ``previous`` (whose pattern must be unchanged outside that component).
    tol, max_iter
        Stop when the Newton decrement λ²/2 ≤ ``tol``; at most ``max_iter`` steps per γ.
    path_factor
        Factor by which γ decreases along the path of a cold start.
    dense_limit
        Largest number of unknowns per component for a dense Newton system (else Newton-CG).

    Returns
    -------
    MaxEntSolution
        ``covariance`` is finite, symmetric and positive definite.

    Examples
    --------
    >>> y = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    >>> lam = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    >>> sol = maxent(y, lam, gamma=1e-12)
    >>> round(float(sol.covariance[0, 2]), 6)  # the chain completion y01 * y12 / y11
    0.5
    >>> abs(float(sol.precision[0, 2])) < 1e-12
    True
    """
    y, lam = _validate(y, weights)
    gamma = parse_real(gamma, "gamma", _OWNER, low=0.0)
    method = parse_choice(method, "method", _OWNER, ("newton", "pgd"))
    tol = parse_real(tol, "tol", _OWNER, low=0.0)
    max_iter = parse_int(max_iter, "max_iter", _OWNER, low=1)
    path_factor = parse_real(path_factor, "path_factor", _OWNER, low=0.0, high=1.0)
    if method == "pgd":
        return _pgd(y, lam, max_iter=max(max_iter, 2000), tol=tol)
    d = y.shape[0]
    parts = components(lam)
    cov = np.zeros((d, d))
    prec = np.zeros((d, d))
    targets = parts
    if only is not None:
        if previous is None:
            raise ParameterError(f"The 'only' parameter of {_OWNER} needs 'previous'.")
        # Patterns only grow, so every other component is unchanged and its blocks are copied;
        # the cross-blocks of a component that merged earlier ones were zero and are refilled.
        cov[:] = previous.covariance
        prec[:] = previous.precision
        wanted = set(only)
        targets = tuple(comp for comp in parts if wanted & set(comp))
        start = previous.precision if start is None else start
    # One scale for the whole matrix keeps its condition number below about _COND_MAX·d.
    scale = max(float(np.max(np.abs(y[lam > 0]))), np.finfo(np.float64).tiny)
    iterations, converged = 0, True
    for comp in targets:
        idx = np.array(comp)
        if idx.size == 1:
            j = int(idx[0])
            cov[j, j] = max(_isolated(y[j, j], lam[j, j], gamma), scale / _COND_MAX)
            prec[j, j] = 1.0 / cov[j, j]
            continue
        ix = np.ix_(idx, idx)
        sub_y, sub_lam = y[ix], lam[ix]
        problem = _Component(sub_y, sub_lam, gamma)
        ok = False
        if start is not None:
            k0 = np.where(sub_lam > 0, np.asarray(start, dtype=np.float64)[ix], 0.0)
            theta, w, its, ok = problem.solve(k0[problem.rows, problem.cols], tol,
                                              min(max_iter, _WARM_ITER), dense_limit)
            iterations += its
            ok = ok and problem.satisfied(theta, w) and _conditioned(problem.matrix(theta), scale)
        if not ok:
            theta, w, its, ok = _barrier_path(sub_y, sub_lam, gamma, tol, max_iter, path_factor,
                                              dense_limit, scale)
            iterations += its
        converged = converged and ok
        cov[ix] = (w + w.T) / 2.0
        prec[ix] = problem.matrix(theta)
    return MaxEntSolution(cov, prec, parts, iterations, converged, gamma, method)


def psd_project(w: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """Nearest symmetric matrix (Frobenius) with eigenvalues at least ``floor``.

    Examples
    --------
    >>> psd_project(np.array([[1.0, 2.0], [2.0, 1.0]])).round(12).tolist()
    [[1.5, 1.5], [1.5, 1.5]]
    """
    vals, vecs = np.linalg.eigh((w + w.T) / 2.0)
    out = (vecs * np.maximum(vals, floor)) @ vecs.T
    return (out + out.T) / 2.0


def _pgd(y: np.ndarray, lam: np.ndarray, *, max_iter: int, tol: float) -> MaxEntSolution:
    """Projected gradient descent on f over the PSD cone, from the diagonal start."""
    w = np.diag(np.maximum(np.diag(y), 0.0))
    step = 1.0 / (2.0 * float(lam.max()))
    its, converged = max_iter, False
    for it in range(1, max_iter + 1):
        new = psd_project(w - step * 2.0 * lam * (w - y))
        change = float(np.linalg.norm(new - w))
        w = new
        if change <= max(tol, 1e-12) * max(1.0, float(np.linalg.norm(w))):
            its, converged = it, True
            break
    scale = max(float(np.trace(w)) / w.shape[0], np.finfo(np.float64).tiny)
    w = psd_project(w, floor=1e-10 * scale)
    return MaxEntSolution(w, np.linalg.inv(w), components(lam), its, converged, 0.0, "pgd")
