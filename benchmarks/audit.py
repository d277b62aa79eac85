"""Empirical privacy audit of the package's mechanisms (issue 9).

For each mechanism: worst-case neighbouring datasets, many releases, and a Clopper-Pearson lower
bound on epsilon (dppca_dask.audit). The bound must stay under the claimed epsilon for the real
mechanism and exceed it for a deliberately broken one (noise too small).

    python benchmarks/audit.py            # about a minute
    python benchmarks/audit.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dppca_dask.audit import audit_kendall_release


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    args = parser.parse_args()
    reps = args.reps or (4000 if args.quick else 50000)
    delta = 1e-5
    rows = []
    rng = np.random.default_rng()
    for eps in (0.5, 1.0, 2.0):
        for calibration in ("classical", "analytic"):
            for label, factor in (("as shipped", 1.0), ("BROKEN: sensitivity/10", 0.1)):
                start = time.perf_counter()
                res = audit_kendall_release(eps=eps, delta=delta, calibration=calibration,
                                            reps=reps, sensitivity_factor=factor, rng=rng)
                verdict = "ok" if res.epsilon_lower <= eps else "VIOLATION FOUND"
                rows.append((f"Kendall Gaussian ({calibration})", label, eps,
                             res.epsilon_lower, verdict, time.perf_counter() - start))
    print(f"Empirical epsilon lower bounds (95 % confidence), delta = {delta:g}, {reps} releases "
          "per dataset")
    print(f"{'mechanism':<30} {'variant':<24} {'claimed eps':>11} {'eps lower':>10}  verdict")
    for mech, variant, eps, low, verdict, _ in rows:
        print(f"{mech:<30} {variant:<24} {eps:>11.2f} {low:>10.3f}  {verdict}")


if __name__ == "__main__":
    main()
