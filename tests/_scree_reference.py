"""Plain NumPy reference of the scree mechanisms, written from SPEC_dppca.md §5 step by step.

One component at a time, draws in the R package's order (per component: the method's draws in
the order the spec lists them). Used as the oracle for the Dask passes (``lockstep=False``).
Deviations from the spec made on purpose by the package are marked "package:".
"""

from __future__ import annotations

import math

import numpy as np

from dppca_dask.privacy.budget import PrivacyBudget
from dppca_dask.privacy.mechanisms import gaussian_release, laplace_release
from tests.helpers import literal_quantile


def gauss_sd(sens: float, eps: float, delta: float) -> float:
    return sens * math.sqrt(2 * math.log(1.25 / delta)) / eps


def noisy(base: float, sens: float, eps: float, delta: float, rng) -> float:
    """base + the package's exact Gaussian noise (the noise itself is checked statistically in
    tests/test_mechanisms.py; here only the deterministic statistic and the draw order are
    compared)."""
    return float(gaussian_release(float(base), sensitivity=sens, budget=PrivacyBudget(eps, delta),
                                  calibration="classical", rng=rng, component="ref").value)


def clipped(w: np.ndarray, n: int, clip: float, eps: float, delta: float, rng) -> float:
    base = n / (n - 1) * np.mean(np.minimum(w, clip))
    return max(noisy(base, clip / (n - 1), eps, delta, rng), 0.0)


def _below(value: float, beta: float) -> float:
    """package: the lower cut-off is the grid candidate below the search's answer."""
    if value > 0:
        j = round(math.log1p(value) / math.log(beta))
        return beta ** (j - 1) - 1 if j > 1 else 0.0
    j = round(math.log1p(-value) / math.log(beta))
    return -(beta ** (j + 1) - 1)


def pmwm(w: np.ndarray, n: int, a: float, b: float, trim_const: float, eta: float, beta: float,
         split_mode: bool, eps: float, delta: float, rng) -> float:
    half = n // 2
    wq, wm = (w[:half], w[half:]) if split_mode else (w, w)
    p = min(max(trim_const / len(wq), eta), 0.49)
    lo = literal_quantile(wq, p, eps / 4, rng, beta=beta)
    hi = literal_quantile(wq, 1 - p, eps / 4, rng, beta=beta)
    lo, hi = min(max(_below(lo, beta), a), b), min(max(hi, a), b)
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi < lo:
        lo, hi = a, b
    base = n / (n - 1) * np.mean(np.clip(wm, lo, hi))
    sens = n / (n - 1) * (hi - lo) / len(wm)
    return max(noisy(base, sens, eps / 2, delta, rng) if sens > 0 else base, 0.0)


def huber(w: np.ndarray, n: int, k_min: int, k_max: int, m2_frac: float, mu0: float,
          eta0: float, steps: int, blocks: int, eps: float, delta: float, rng) -> float:
    m = n // 2
    s = (w[0:2 * m:2] - w[1:2 * m:2]) ** 2 / 2
    blocks = min(blocks, len(s))
    size = len(s) // blocks
    u = [np.median(s[j * size:(m if j == blocks - 1 else (j + 1) * size)])
         for j in range(blocks)]
    bins = np.arange(k_min, k_max + 1)
    counts = np.zeros(len(bins))
    for val in u:
        if not np.isfinite(val) or val < 0:
            continue
        kk = k_min if val == 0 else int(min(max(math.floor(math.log2(val)), k_min), k_max))
        counts[kk - k_min] += 1
    eps_m2 = m2_frac * eps
    released = np.maximum(laplace_release(counts, sensitivity=2.0, eps=eps_m2, rng=rng,
                                          component="ref").value, 0)
    m2 = 2.0 ** int(bins[np.argmax(released)])
    eps_gd, delta_gd = (1 - m2_frac) * eps, (1 - m2_frac) * delta
    ln = math.log(n)
    denom = math.sqrt((1 + ln) * ln)
    tau = math.sqrt(m2) * math.sqrt(eps_gd * n / denom)
    mu = mu0
    for _ in range(steps):
        g = np.mean(np.clip(w - mu, -tau, tau))
        mu = noisy(mu + eta0 * g, 2 * eta0 * tau / n, eps_gd / steps, delta_gd / steps, rng)
    return n / (n - 1) * max(mu, 0.0)
