"""Empirical privacy audit of every mechanism in dppca_dask (issue 21).

For each mechanism (dppca_dask.privacy.audit.AUDITS): a worst-case neighbouring pair, the likelihood-ratio
statistic for it, and a 95 %-confidence Clopper-Pearson lower bound on epsilon, for the shipped
mechanism and for a copy with its noise scaled by 0.9. The bound must stay at or under the claimed
epsilon for the shipped one and exceed it for the x 0.9 one. Then dp_loading's Kendall release on
real neighbouring data, and the floating-point membership attack on the shipped Laplace/Gaussian
releases and on deliberately naive float baselines (which it must catch).

    python benchmarks/audit.py              # default sample counts, a few minutes
    python benchmarks/audit.py --quick      # a quarter of the samples (x 0.9 catches not assured)
    python benchmarks/audit.py --seed 1     # reproducible
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dppca_dask.privacy.audit import (
    AUDITS,
    FLOAT_AUDITS,
    audit_float_membership,
    audit_kendall_release,
    run_audit,
)


def _row(name, family, claim, delta, ok, bad, samples, seconds):
    """Print one table row; ``ok``/``bad``: bound of the shipped / weakened one (None: not run)."""
    caught = "-" if bad is None else ("yes" if bad > claim else "NO")
    violated = ok is not None and ok > claim
    verdict = "VIOLATION" if violated else ("no power" if caught == "NO" else "ok")
    bad_s = "-" if bad is None else f"{bad:.3f}"
    ok_s = "-" if ok is None else f"{ok:.3f}"
    print(f"{name:<33} {family:<15} {claim:>6.3g} {delta:>7.3g} {ok_s:>8} {bad_s:>8} "
          f"{caught:>7} {samples:>8} {seconds:>8.1f}  {verdict}", flush=True)
    return verdict == "ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--only", nargs="*", default=None, help="audit names (default: all)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    share = 4 if args.quick else 1
    print("Empirical epsilon lower bounds (Clopper-Pearson at alpha 1e-6, the float attack at 95 %), "
          "shipped vs noise x 0.9; "
          "samples = releases per neighbour")
    print(f"{'mechanism':<33} {'family':<15} {'claim':>6} {'delta':>7} {'shipped':>8} "
          f"{'x 0.9':>8} {'caught':>7} {'samples':>8} {'seconds':>8}  verdict")
    good = True
    for name, audit in AUDITS.items():
        if args.only is not None and name not in args.only:
            continue
        n = audit.samples // share
        start = time.perf_counter()
        ok = run_audit(name, samples=n, rng=rng).epsilon_lower
        bad = run_audit(name, noise_factor=0.9, samples=n, rng=rng).epsilon_lower
        good &= _row(name, audit.family, audit.claimed_eps, audit.delta, ok, bad, n,
                     time.perf_counter() - start)
    if args.only is None or "kendall" in args.only:
        n = 40000 // share
        start = time.perf_counter()
        ok = audit_kendall_release(reps=n, rng=rng).epsilon_lower
        bad = audit_kendall_release(reps=n, noise_factor=0.9, rng=rng).epsilon_lower
        good &= _row("kendall (dp_loading, tight)", "Gaussian", 1.0, 0.05, ok, bad, n,
                     time.perf_counter() - start)
    print("\nFloating-point membership attack (s = 0 vs s = 3; is the output fl(scale*x)?)")
    for name in FLOAT_AUDITS:
        if args.only is not None and name not in args.only and "float" not in args.only:
            continue
        n = 20000 // share
        start = time.perf_counter()
        res = audit_float_membership(name, samples=n, rng=rng).epsilon_lower
        naive = name.startswith("naive")
        label = f"{name} (BROKEN baseline)" if naive else name
        seconds = time.perf_counter() - start
        delta = 1e-5 if "gauss" in name else 0.0
        # a naive baseline must be caught (its bound goes in the weakened column)
        good &= _row(label, "float", 1.0, delta, None if naive else res, res if naive else None,
                     n, seconds)
    print("\nall shipped within their claim and every weakened copy caught" if good
          else "\nFAILED: see the verdict column")
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
