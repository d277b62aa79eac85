"""Why the fused Kendall kernel keeps BLAS for its two GEMMs: numba micro-kernels against it.

Plain Python; prints one table (``python benchmarks/kendall_microkernel.py``, about a minute;
``--quick`` for seconds). One thread; every figure is a ratio measured in the same run, the
candidates interleaved pass by pass (best and median over ``--passes`` passes), the load
average printed with the table. docs/performance.md §1 ("What was tried") explains it.

Per p, on one 256 × 1024 chunk of a panel (the production chunk) of Gaussian rows:

* ``steps``: the production chunk's three steps alone -- the Gram GEMM (BLAS), the numba
  weight pass (``_weights_panel``: distance, near test, one division per pair) and the second
  GEMM ``[Sb|1]ᵀ Wᵀ`` (BLAS) -- each as the share of the roofline's time per pair it costs
  (roofline: 4p flops per pair at the 1-thread dgemm rate measured in the same pass; the sum of
  the shares is the panel's time over the roofline's, so 1/sum is its % of roofline);
* ``prototype``: step 1 + 2 fused in numba (the Gram values never leave the kernel before
  their weight is formed), two ways, against BLAS Gram + weight pass on the same panel:
  ``rows`` -- 4 rows of A at a time, a 512-column chunk of G kept in L1, the loops over
  columns vectorised by LLVM; ``registers`` -- a 2 × 8 block of G in scalar accumulators
  (the register-blocked micro-kernel shape; relies on LLVM's SLP vectoriser); both with
  ``fastmath={"contract"}`` (FMA) only. Their results equal the production weights bit for
  bit (checked); the ``asm`` row counts the vector registers LLVM used (ymm: 4 doubles, zmm: 8);
* ``reciprocal``: the weight pass alone with the division replaced by a single-precision
  reciprocal refined by two Newton steps in double (``vdivps`` is ~3× the throughput of
  ``vdivpd``; out-of-range d excluded), against the production weight pass on the same Gram
  chunk; its weights differ from 1/d by a few ulps (max relative difference printed).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from dppca_dask.kernels import kendall_fused as kf
from dppca_dask.kernels.kendall import NEAR_RATIO

FLOOR = 2.0**-900
JIT: dict[str, Any] = {"cache": False, "nogil": True, "error_model": "numpy", "boundscheck": False,
       "fastmath": {"contract"}}
CHUNK = 512


def _rows_source() -> str:
    """The ``rows`` prototype: 4 rows, one column chunk; G in the output rows, then weights."""
    return '''
def rows4(g, i, sa, bt, j0, m, nb, c, na, floor):
    p = sa.shape[1]
    g0 = g[i, j0:j0 + m]; g1 = g[i + 1, j0:j0 + m]; g2 = g[i + 2, j0:j0 + m]; g3 = g[i + 3, j0:j0 + m]
    nb = nb[j0:j0 + m]; c = c[j0:j0 + m]
    a0 = sa[i, 0]; a1 = sa[i + 1, 0]; a2 = sa[i + 2, 0]; a3 = sa[i + 3, 0]
    b = bt[0, j0:j0 + m]
    for j in range(m):
        bj = b[j]
        g0[j] = a0 * bj; g1[j] = a1 * bj; g2[j] = a2 * bj; g3[j] = a3 * bj
    for t in range(1, p):
        a0 = sa[i, t]; a1 = sa[i + 1, t]; a2 = sa[i + 2, t]; a3 = sa[i + 3, t]
        b = bt[t, j0:j0 + m]
        for j in range(m):
            bj = b[j]
            g0[j] += a0 * bj; g1[j] += a1 * bj; g2[j] += a2 * bj; g3[j] += a3 * bj
    far = 0
    for r in range(4):
        gr = g[i + r, j0:j0 + m]
        nr = na[i + r]
        for j in range(m):
            s = nr + nb[j]
            d = s - 2.0 * gr[j]
            ok = (d > NEAR_RATIO * s + floor) & (d < np.inf)
            w = 1.0 / d if ok else 0.0
            gr[j] = w
            c[j] += w
            far += ok
    return far
'''


def _registers_source(rows: int = 2, lanes: int = 8) -> str:
    """The ``registers`` prototype: a rows × lanes block of G in scalar accumulators."""
    out = ["def registers(sa, bt, na, nb, floor, g, c):",
           "    nrows, cols = g.shape; p = sa.shape[1]; far = 0",
           f"    for i in range(0, nrows, {rows}):"]
    out += [f"        n{r} = na[i + {r}]; g{r} = g[i + {r}]" for r in range(rows)]
    out.append(f"        for j in range(0, cols, {lanes}):")
    out += [f"            s{r}_{k} = 0.0" for r in range(rows) for k in range(lanes)]
    out += ["            for t in range(p):", "                b = bt[t]"]
    out += [f"                b{k} = b[j + {k}]" for k in range(lanes)]
    for r in range(rows):
        out.append(f"                a{r} = sa[i + {r}, t]")
        out += [f"                s{r}_{k} += a{r} * b{k}" for k in range(lanes)]
    for r in range(rows):
        for k in range(lanes):
            out.append(f"            s = n{r} + nb[j + {k}]; d = s - 2.0 * s{r}_{k}; "
                       "ok = (d > NEAR_RATIO * s + floor) & (d < np.inf); "
                       f"w = 1.0 / d if ok else 0.0; far += ok; g{r}[j + {k}] = w; c[j + {k}] += w")
    out.append("    return far")
    return "\n".join(out)


def compile_prototypes() -> tuple[Any, Any, Any, dict[str, Any]]:
    import numba

    ns: dict = {"np": np, "NEAR_RATIO": NEAR_RATIO}
    exec(_rows_source(), ns)  # noqa: S102 - generated benchmark code, no input
    exec(_registers_source(), ns)  # noqa: S102
    rows4 = numba.njit(**JIT)(ns["rows4"])
    registers = numba.njit(**JIT)(ns["registers"])

    @numba.njit(**JIT)
    def rows_panel(sa, sbt, na, nb, floor, g, c):  # pragma: no cover - compiled
        nrows, cols = g.shape
        far = 0
        for i in range(0, nrows, 4):
            for j0 in range(0, cols, CHUNK):
                far += rows4(g, i, sa, sbt, j0, min(CHUNK, cols - j0), nb, c, na, floor)
        return far

    @numba.njit(**JIT)
    def newton_row(g, ni, nb, c, floor):  # pragma: no cover - compiled
        far = 0
        for j in range(g.shape[0]):
            s = ni + nb[j]
            d = s - 2.0 * g[j]
            ok = (d > NEAR_RATIO * s + floor) & (d < np.inf) & (d > 2.0**-120) & (d < 2.0**120)
            dd = d if ok else 1.0
            y = np.float64(np.float32(1.0) / np.float32(dd))
            y = y + y * (1.0 - dd * y)
            y = y + y * (1.0 - dd * y)
            w = y if ok else 0.0
            g[j] = w
            c[j] += w
            far += ok
        return far

    @numba.njit(**JIT)
    def newton_panel(g, na, nb, c, floor):  # pragma: no cover - compiled
        far = 0
        for i in range(g.shape[0]):
            far += newton_row(g[i], na[i], nb, c, floor)
        return far

    return rows_panel, registers, newton_panel, {"rows": rows4, "registers": registers,
                                                 "reciprocal": newton_row}


def _width(fn: Any) -> str:
    asm = "".join(fn.inspect_asm().values())
    ymm, zmm = len(re.findall("ymm", asm)), len(re.findall("zmm", asm))
    packed, scalar = len(re.findall(r"vfmadd\w*pd", asm)), len(re.findall(r"vfmadd\w*sd", asm))
    divpd, divsd = len(re.findall("vdivpd", asm)), len(re.findall("vdivsd", asm))
    return (f"{ymm} ymm / {zmm} zmm operands; FMA packed {packed} / scalar {scalar}; "
            f"vdivpd {divpd} / vdivsd {divsd}")


def timeit(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(p: int, size: int, panel: int, cols: int, passes: int, rows_panel: Callable,
            registers: Callable, newton: Callable) -> list[tuple]:
    """The ``steps`` and ``prototype`` rows of one p (see the module docstring)."""
    rng = np.random.default_rng(p)
    big = np.random.default_rng(0).normal(size=(size, size))
    sa, sb = rng.normal(size=(panel, p)) / 8, rng.normal(size=(cols, p)) / 8
    sbt = np.empty((p + 1, cols))
    sbt[:p], sbt[p] = sb.T, 1.0
    gram_t = np.ascontiguousarray(sbt[:p])
    na, nb = np.einsum("ij,ij->i", sa, sa), np.einsum("ij,ij->i", sb, sb)
    start = np.zeros(panel, dtype=np.int64)
    skip = np.full(panel, cols, dtype=np.int64)
    g, c = np.empty((panel, cols)), np.zeros(cols)
    gr, cr = np.empty((panel, cols)), np.zeros(cols)
    gg, cg = np.empty((panel, cols)), np.zeros(cols)

    def blas() -> None:
        np.matmul(sa, gram_t, out=g)
        kf._weights_panel(g, na, nb, c, FLOOR, start, skip, skip)

    steps = {
        "Gram GEMM": lambda: np.matmul(sa, gram_t, out=g),
        "weight pass": lambda: kf._weights_panel(g, na, nb, c, FLOOR, start, skip, skip),
        "second GEMM": lambda: sbt @ g.T,
    }
    protos = {"rows": lambda: rows_panel(sa, gram_t, na, nb, FLOOR, gr, cr),
              "registers": lambda: registers(sa, gram_t, na, nb, FLOOR, gg, cg)}
    blas()
    for fn in protos.values():
        fn()
    same = np.array_equal(g, gr) and np.array_equal(g, gg)
    gram = sa @ gram_t
    gn, cn = gram.copy(), np.zeros(cols)
    newton(gn, na, nb, cn, FLOOR)
    g1 = gram.copy()
    kf._weights_panel(g1, na, nb, np.zeros(cols), FLOOR, start, skip, skip)
    differ = float(np.max(np.abs(gn - g1) / np.where(g1 > 0, g1, 1.0)))
    recip: list[float] = []
    share: dict[str, list[float]] = {k: [] for k in steps}
    speed: dict[str, list[float]] = {k: [] for k in protos}
    for _ in range(passes):
        budget = 4 * p / (2.0 * size**3 / timeit(lambda: big @ big))  # roofline s per pair
        np.matmul(sa, gram_t, out=g)
        for name, fn in steps.items():
            share[name].append(timeit(fn) / (panel * cols) / budget)
        for name, fn in protos.items():
            before = timeit(blas)
            took = timeit(fn)
            after = timeit(blas)
            speed[name].append(min(before, after) / took)
        np.copyto(g1, gram)
        np.copyto(gn, gram)
        plain = timeit(lambda: kf._weights_panel(g1, na, nb, c, FLOOR, start, skip, skip))
        recip.append(plain / timeit(lambda: newton(gn, na, nb, cn, FLOOR)))
    total = [sum(v[k] for v in share.values()) for k in range(passes)]
    out = [("steps", f"p={p} panel {panel}x{cols}",
            " | ".join(f"{k} {min(v):.2f}" for k, v in share.items()),
            f"sum {min(total):.2f} (median {np.median(total):.2f}) of the roofline's time per "
            f"pair = {1 / min(total):.0%} of roofline")]
    for name, v in speed.items():
        out.append(("prototype", f"p={p} {name}",
                    f"{max(v):.2f}x BLAS Gram + weight pass (median {np.median(v):.2f}x)",
                    f"weights identical: {same}"))
    out.append(("prototype", f"p={p} reciprocal",
                f"{max(recip):.2f}x the weight pass (median {np.median(recip):.2f}x)",
                f"max relative difference of the weights {differ:.1e}"))
    return out


def main(argv: list[str] | None = None) -> list[tuple]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--passes", type=int, default=None, help="interleaved passes (default 9)")
    args = parser.parse_args(argv)
    passes = args.passes or (1 if args.quick else 9)
    size, panel, cols, ps = (400, 64, 512, (10,)) if args.quick else (1500, 256, 1024, (10, 50))
    kf.numba_available()
    rows_panel, registers, newton, fns = compile_prototypes()
    load = os.getloadavg()[0]
    out: list[tuple] = []
    with threadpool_limits(1):
        for p in ps:
            out += measure(p, size, panel, cols, passes, rows_panel, registers, newton)
    for name, fn in fns.items():
        out.append(("asm", name, _width(fn), ""))
    out.append(("load", f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}",
                f"{os.cpu_count()} cores", f"{passes} passes"))
    widths = [max(len(str(r[k])) for r in out) for k in range(4)]
    for r in out:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)).rstrip())
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
