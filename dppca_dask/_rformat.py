"""R-compatible number formatting for the seed's print and summary formats.

R chooses, for a vector printed together, the fewest significant digits (at most ``digits``) that
show every value to ``digits`` significant digits, then fixed or scientific notation, whichever is
narrower (fixed wins ties; ``scipen = 0``). ``format_r`` reproduces that rule for one vector, so
``cat(0.001)`` gives ``0.001`` and ``cat(1e-4)`` gives ``1e-04``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["format_r", "format_r_matrix", "format_r_named", "format_r_scalar"]


def _sig_and_exp(x: float, digits: int) -> tuple[int, int]:
    """Significant digits needed and decimal exponent of ``x`` rounded to ``digits`` digits."""
    if x == 0.0:
        return 1, 0
    mantissa, exp = f"{abs(x):.{digits - 1}e}".split("e")
    mantissa = mantissa.replace(".", "").rstrip("0")
    return max(1, len(mantissa)), int(exp)


def format_r(values: Sequence[float], digits: int = 7) -> list[str]:
    """Format ``values`` jointly as R's ``format``/``print`` does (common notation and width)."""
    vals = [float(v) for v in values]
    finite = [v for v in vals if math.isfinite(v)]
    if not finite:
        return [_nonfinite(v) for v in vals]
    info = [_sig_and_exp(v, digits) for v in finite]
    neg = any(v < 0 for v in finite)
    rgt = max(max(0, sig - exp - 1) for sig, exp in info)
    left = max(max(1, exp + 1) for _, exp in info)
    fixed_width = int(neg) + left + (rgt + 1 if rgt > 0 else 0)
    mxsig = max(sig for sig, _ in info)
    exp_digits = 3 if any(abs(exp) >= 100 for _, exp in info) else 2
    sci_width = int(neg) + (mxsig + 1 if mxsig > 1 else 1) + 2 + exp_digits
    if fixed_width <= sci_width:
        out = [f"{v:.{rgt}f}" if math.isfinite(v) else _nonfinite(v) for v in vals]
    else:
        out = [_sci(v, mxsig - 1) if math.isfinite(v) else _nonfinite(v) for v in vals]
    width = max(len(s) for s in out)
    return [s.rjust(width) for s in out]


def _sci(v: float, decimals: int) -> str:
    mantissa, exp = f"{v:.{decimals}e}".split("e")
    e = int(exp)
    return f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"


def _nonfinite(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    return "Inf" if v > 0 else "-Inf"


def format_r_scalar(value: float, digits: int = 7) -> str:
    """Format one number as R's ``cat`` does (``0.5``, ``0.001``, ``1e-04``, ``3.333333e-05``)."""
    return format_r([value], digits)[0].strip()


def format_r_named(values: dict[str, float], digits: int = 7) -> str:
    """Print a named numeric vector as R does: a line of right-aligned names, then values."""
    cells = format_r(list(values.values()), digits)
    width = max([len(c) for c in cells] + [len(k) for k in values])
    head = "".join(f"{k:>{width}} " for k in values)
    body = "".join(f"{c:>{width}} " for c in cells)
    return f"{head}\n{body}"


def format_r_matrix(
    matrix: Sequence[Sequence[float]],
    row_names: Sequence[str],
    col_names: Sequence[str],
    digits: int = 3,
) -> str:
    """Print a numeric matrix as R's ``print(m, digits=)``: each column formatted on its own."""
    ncol = len(col_names)
    columns = [format_r([row[j] for row in matrix], digits) for j in range(ncol)]
    row_width = max((len(r) for r in row_names), default=0)
    widths = [max(len(col_names[j]), *(len(c) for c in columns[j])) for j in range(ncol)]
    lines = [" " * row_width + "".join(f" {col_names[j]:>{widths[j]}}" for j in range(ncol))]
    for i, name in enumerate(row_names):
        cells = "".join(f" {columns[j][i]:>{widths[j]}}" for j in range(ncol))
        lines.append(f"{name:<{row_width}}{cells}")
    return "\n".join(lines)
