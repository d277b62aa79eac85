"""Empirical privacy audit of every mechanism in dppca_dask (issue 9).

For each mechanism: worst-case neighbouring inputs at its stated sensitivity, many releases on
each, and a 95 %-confidence lower bound on epsilon (dppca_dask.audit). The bound must stay under
the claimed epsilon for the shipped mechanism and exceed it for a deliberately broken one.

    python benchmarks/audit.py            # about two minutes
    python benchmarks/audit.py --quick    # about 15 seconds
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dppca_dask.audit import (
    MECHANISMS,
    audit_histogram_release,
    audit_kendall_release,
    audit_mechanism,
)

WHERE = {
    "kendall": "dp_loading (Kendall matrix, Gaussian)",
    "add": "dp_score add histogram (Gaussian)",
    "sparse": "dp_score sparse histogram (Laplace + threshold)",
    "gaussian_release": "dp_scree clipped/PMWM/Huber GD, centre",
    "laplace_release": "dp_scree Huber m2 histogram",
    "gaussian_zcdp": "dp_covariance measurements (zCDP)",
    "exponential_mechanism": "dp_covariance PACE-GGM selection",
    "above_threshold": "Durfee quantiles (frame, PMWM, centre)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--eps", type=float, default=1.0)
    args = parser.parse_args()
    reps = args.reps or (3000 if args.quick else 30000)
    eps, delta = args.eps, 1e-5
    rng = np.random.default_rng()
    runs = [
        ("kendall", lambda broken: audit_kendall_release(
            eps=eps, delta=delta, calibration="classical", reps=reps,
            sensitivity_factor=0.1 if broken else 1.0, rng=rng)),
        ("add", lambda broken: audit_histogram_release(
            method="add", eps=eps, delta=delta, reps=reps, misstate=10.0 if broken else 1.0,
            rng=rng)),
        ("sparse", lambda broken: audit_histogram_release(
            method="sparse", eps=eps, delta=delta, reps=reps, misstate=1e4 if broken else 1.0,
            rng=rng)),
        *[(name, lambda broken, name=name: audit_mechanism(
            name, eps=eps, delta=delta, reps=reps, broken=broken, rng=rng))
          for name in MECHANISMS],
    ]
    print(f"Empirical epsilon lower bounds (95 % confidence), claimed eps = {eps:g}, "
          f"delta = {delta:g}, {reps} releases per dataset")
    print(f"{'mechanism':<24} {'used by':<48} {'shipped':>8} {'broken':>8}  verdict")
    failures = 0
    for name, audit in runs:
        start = time.perf_counter()
        ok = audit(False).epsilon_lower
        bad = audit(True).epsilon_lower
        good = ok <= eps < bad
        failures += not good
        verdict = "ok (broken one caught)" if good else (
            "VIOLATION" if ok > eps else "broken one NOT caught")
        print(f"{name:<24} {WHERE[name]:<48} {ok:>8.3f} {bad:>8.3f}  {verdict}"
              f"  [{time.perf_counter() - start:.1f} s]")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
