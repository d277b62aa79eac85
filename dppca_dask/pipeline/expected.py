"""Expected interval widths of a planned release, before any data is read (issue 33, "what
should I pick?"): from a release's :class:`~dppca_dask.privacy.plan.Plan` (its records' noise
scales), n, p and the public bounds only -- what ``dppca-dask plan`` prints and
``plan --json`` gives as ``expected_widths``, so a custodian can choose ε from the accuracy
needed. The intervals themselves are post-processing of the release (docs/intervals.md); these
are their widths at the planned noise, which the data do not change (except where a width
depends on a released value: then the entry says so).

* directions: the loading noise's spectral-norm bound b, the guaranteed (Davis–Kahan) and the
  approximate (first order, one dominant neighbour: what the bootstrap gives) angle bound for
  a table of Kendall eigengaps (the Kendall eigenvalues sum to 1), the gap above which a
  direction is identifiable (bound below 45°), and the Kendall eigenvalue half-widths;
* scree (clipped): each value's half-width z·σ (Bonferroni over k), in input units² and as a
  share of C_clip; pmwm and huber: their noise scales with released cut-offs / τ;
* histograms: each released cell's half-width in counts and in probability (sparse: and the
  threshold below which a cell is released as 0);
* covariance (ssp, auto): the entries' and eigenvalues' half-widths, in units of R² (rows
  clipped to norm R) or B_j·B_k (box bounds);
* frame: its search resolution (docs/intervals.md, "Frame limits").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dppca_dask._rformat import format_r_scalar
from dppca_dask.privacy.plan import Plan

__all__ = ["GAPS", "ExpectedWidths", "expected_widths"]

GAPS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
"""Kendall eigengaps of the directions' table (the Kendall eigenvalues sum to 1)."""

LEVEL = 0.95


def _num(v: float) -> str:
    return format_r_scalar(float(f"{v:.3g}"))


def _z(alpha: float) -> float:
    from scipy.stats import norm

    return float(norm.isf(alpha))


@dataclass(frozen=True)
class ExpectedWidths:
    """The expected widths of one planned release: :meth:`as_dict` (JSON-ready) and
    :meth:`lines` (the plan's text)."""

    level: float
    parts: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, **self.parts}

    def lines(self) -> list[str]:
        out = [f"Expected interval widths ({100 * self.level:g}%, from the plan's noise scales "
               "before any data is read; they cover the noise, not the sampling variability; "
               "docs/intervals.md):"]
        d = self.parts.get("directions")
        if d is not None:
            out.append(f"  directions: noise sd {_num(d['noise_sd'])}, ||E|| <= "
                       f"{_num(d['noise_norm_bound'])}; identifiable (angle bound < 45 degrees) "
                       f"for a Kendall eigengap above about {_num(d['identifiable_gap'])} "
                       f"(guaranteed above {_num(d['identifiable_gap_guaranteed'])})")
            cells = []
            for row in d["angles"]:
                guaranteed = (f"{_num(row['guaranteed_degrees'])}"
                              if row["guaranteed_degrees"] < 90 else "none")
                cells.append(f"gap {_num(row['gap'])}: ~{_num(row['degrees'])} deg "
                             f"(guaranteed {guaranteed})")
            out.append("    angle bound by eigengap: " + "; ".join(cells))
            out.append(f"    Kendall eigenvalues: +- {_num(d['eigenvalue_half_width_separated'])}"
                       f" when separated, +- {_num(d['eigenvalue_half_width_bulk'])} in the noise")
        for name, s in self.parts.get("scree", {}).items():
            if "half_width" in s:
                out.append(f"  scree ({name}, {s['components']} components): each value +- "
                           f"{_num(s['half_width'])} input units^2 ({_num(100 * s['share_of_clip'])}"
                           f"% of C_clip = {_num(s['clip'])}); the PVE +- about "
                           f"{_num(s['half_width'])}/T (T the sum of the k values)")
            else:
                out.append(f"  scree ({name}): {s['note']}")
        for name, h in self.parts.get("histograms", {}).items():
            extra = (f"; cells below {_num(h['threshold_counts'])} counts are released as 0 "
                     f"and get [0, {_num(h['empty_upper_counts'])}]" if name == "sparse" else "")
            out.append(f"  histogram cells ({name}, {h['cells']} cells): +- "
                       f"{_num(h['half_width_counts'])} counts, +- "
                       f"{_num(h['half_width_probability'])} in probability{extra}")
        c = self.parts.get("covariance")
        if c is not None:
            unit = c["unit"]
            out.append(f"  covariance ({c['method']}): entries +- "
                       f"{_num(c['entry_half_width_diagonal'])} {unit} (diagonal), +- "
                       f"{_num(c['entry_half_width_off_diagonal'])} {unit} (off the diagonal); "
                       f"eigenvalues +- {_num(c['eigenvalue_half_width_separated'])} {unit} "
                       f"when separated, +- {_num(c['eigenvalue_half_width_bulk'])} {unit} in "
                       "the noise")
        f = self.parts.get("frame")
        if f is not None:
            out.append(f"  frame ({f['method']}): {f['text']}")
        return out if len(out) > 1 else []


def _loading(plan: Plan, p: int, level: float, gaps: Sequence[float]) -> dict[str, Any] | None:
    from dppca_dask.results.direction_intervals import (
        angle_bounds,
        eigenvalue_half_widths,
        noise_norm_bound,
    )

    record = next((r for r in plan.records if r.component == "loading"
                   and r.mechanism == "gaussian_symmetric_matrix"), None)
    if record is None or record.scale is None:
        return None
    sd = float(record.scale)
    alpha = 1.0 - level
    b = noise_norm_bound(sd, p, level)
    z = _z(alpha / (2.0 * p))  # the bootstrap's Bonferroni quantile, first order
    rows = []
    for gap in gaps:
        guaranteed = float(angle_bounds([gap, 0.0], b)[0][0])
        approximate = math.degrees(math.atan(sd / math.sqrt(2.0) * z / gap))
        rows.append({"gap": gap, "degrees": approximate, "guaranteed_degrees": guaranteed})
    wide = eigenvalue_half_widths([1.0, 0.0], sd, p, level)[0]  # a gap of 1: separated
    return {"noise_sd": sd, "noise_norm_bound": b,
            "identifiable_gap": sd / math.sqrt(2.0) * z,  # atan(.) = 45 degrees
            "identifiable_gap_guaranteed": b * (1.0 + math.sqrt(2.0)),
            "angles": rows, "eigenvalue_half_width_separated": float(wide),
            "eigenvalue_half_width_bulk": noise_norm_bound(sd, p, 1.0 - alpha / 2.0),
            "units": "Kendall eigenvalues (they sum to 1); angles in degrees"}


def _scree(plan: Plan, n: int, level: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    clipped = [r for r in plan.records if r.component == "scree"
               and r.note.startswith("clipped PC")]
    if clipped:
        k = len(clipped)
        r = clipped[0]
        assert r.scale is not None
        assert r.sensitivity is not None
        half = _z((1.0 - level) / (2.0 * k)) * float(r.scale)
        clip = float(r.sensitivity) * (n - 1.0)
        out["clipped"] = {"components": k, "noise_sd": float(r.scale), "half_width": half,
                          "clip": clip, "share_of_clip": half / clip}
    for name in ("pmwm", "huber"):
        if any(r.component == "scree" and r.note.startswith(f"{name} PC") for r in plan.records):
            out[name] = {"note": "its noise scales with the released "
                         + ("cut-offs (U - L)" if name == "pmwm" else "tau")
                         + ", known only after the release (the summary states it)"}
    return out


def _histograms(plan: Plan, n: int, bins: tuple[int, int] | None, level: float
                ) -> dict[str, Any]:
    from dppca_dask.privacy.budget import PrivacyBudget
    from dppca_dask.privacy.mechanisms import stability_histogram_parameters
    from dppca_dask.results.histogram_intervals import (
        histogram_noise_half_width,
        noise_quantile,
    )

    if bins is None:
        return {}
    cells = int(bins[0]) * int(bins[1])
    out: dict[str, Any] = {}
    for name, mechanism in (("add", "gaussian_histogram"), ("sparse", "stability_histogram"),
                            ("geometric", "geometric_histogram")):
        record = next((r for r in plan.records if r.component == "score"
                       and r.mechanism == mechanism), None)
        if record is None or record.scale is None:
            continue
        as_dict = {"scale": record.scale, "eps": record.eps, "delta": record.delta}
        half = histogram_noise_half_width(name, as_dict, cells, level)
        entry = {"cells": cells, "half_width_counts": half, "half_width_probability": half / n}
        if name == "sparse":
            budget = PrivacyBudget(record.eps, record.delta)
            threshold = round(stability_histogram_parameters(n, budget)[1] * n)
            entry["threshold_counts"] = threshold
            entry["empty_upper_counts"] = threshold - 1 + noise_quantile(name, as_dict, cells, level)
        out[name] = entry
    return out


def _covariance(plan: Plan, n: int, p: int, clip: str | None, bounds: Any,
                level: float) -> dict[str, Any] | None:
    from dppca_dask.covariance.estimator import covariance_sensitivities
    from dppca_dask.results.direction_intervals import angle_bounds

    record = next((r for r in plan.records if r.component == "ssp"
                   and r.mechanism == "gaussian_zcdp_symmetric"), None)
    if record is None or not record.rho or clip is None:
        return None
    # the noise is added to the normalised matrix (x/R, or x_j/B_j): sd in those units
    sens = covariance_sensitivities(1.0 if clip == "row" else np.ones(p), n, clip)
    sd = sens.frobenius / math.sqrt(2.0 * float(record.rho))  # diagonal; off-diagonal / sqrt 2
    if clip == "row" and bounds is not None:  # a public radius R: input units^2
        scale, unit = float(np.max(np.asarray(bounds, dtype=np.float64))) ** 2, "input units^2"
    else:
        scale, unit = 1.0, "R^2" if clip == "row" else "B_j*B_k"
    alpha = 1.0 - level
    m = p * (p + 1) // 2
    z = _z(alpha / (2.0 * m))
    s = sd / math.sqrt(2.0)  # max(off-diagonal sd, diagonal sd / sqrt 2), normalised units
    b = math.sqrt(2.0) * s * (math.sqrt(2.0 * p) + math.sqrt(2.0 * math.log(4.0 / alpha)))
    first = _z(alpha / (4.0 * p)) * math.sqrt(2.0) * s
    angle = float(angle_bounds([1.0, 0.0], b)[0][0])  # a gap of 1 R^2: well separated
    separated = min(b, first + b * math.tan(math.radians(angle)))
    return {"method": "ssp release", "unit": unit,
            "entry_half_width_diagonal": z * sd * scale,
            "entry_half_width_off_diagonal": z * sd / math.sqrt(2.0) * scale,
            "eigenvalue_half_width_separated": separated * scale,
            "eigenvalue_half_width_bulk": b * scale}


def _frame(plan: Plan) -> dict[str, Any] | None:
    from dppca_dask.pca.frame_ranged import (
        LOCATE_STEPS,
        RADIUS_FACTOR,
        REFINE_PARTS,
        SCALE_STEPS,
    )
    from dppca_dask.privacy.quantiles import DEFAULT_BETA
    from dppca_dask.results.frame import INFLATE

    notes = [(r.mechanism, r.note) for r in plan.records if r.component == "score"
             and r.note.startswith("frame")]
    if not notes:
        return None
    if any(m == "exponential_mechanism" for m, _ in notes):
        centre = 3.0 * (2.0 ** (1.0 / LOCATE_STEPS) - 1.0) / REFINE_PARTS / 2.0
        radius = 1.0 - 2.0 ** (-1.0 / SCALE_STEPS)
        limits = (1.0 + INFLATE) * radius
        return {"method": "ranged", "centre_relative": centre, "radius_relative": radius,
                "limits_relative_to_radius": limits,
                "text": f"centre resolved to +- {_num(centre)} x |c|, radius to "
                        f"{_num(100 * radius)}% (a cell of its {RADIUS_FACTOR:g} x Q_90 grid): "
                        f"limits resolved to about {_num(100 * limits)}% of the radius"}
    if any(m == "smooth_laplace" for m, _ in notes):
        return {"method": "smooth", "text": "no search grid (continuous smooth-sensitivity "
                                            "noise)"}
    step = DEFAULT_BETA - 1.0
    method = "capped" if any(n.startswith("frame scale") for _, n in notes) else "durfee"
    return {"method": method, "centre_relative": step, "radius_relative": step,
            "text": f"centre resolved to {_num(100 * step)}% of (1 + |c|), radius to "
                    f"{_num(100 * step)}% of (1 + R): limits to about "
                    f"{_num(100 * step)}% (1 + |c|) + {_num(100 * (1 + INFLATE) * step)}% "
                    "(1 + R)"}


def expected_widths(plan: Plan, *, n: int, p: int, bins: tuple[int, int] | None = None,
                    clip: str | None = None, bounds: Any = None, level: float = LEVEL,
                    gaps: Sequence[float] = GAPS) -> ExpectedWidths:
    """The expected interval widths of the release planned as ``plan`` (a ``plan_*``
    function's result: :func:`~dppca_dask.plan_pca`, :func:`~dppca_dask.plan_scree`, ...)
    on n rows of p variables: public quantities only, no data (module docstring).

    ``bins``: the score histograms' (x, y) bins; ``clip``/``bounds``: the covariance's clipping
    (``"row"`` with the public radius, or None for a private one: widths in units of R²;
    ``"box"``: in units of B_j·B_k); ``gaps``: the Kendall eigengaps of the directions' table.

    Examples
    --------
    >>> from dppca_dask import clipped_control, privacy_control
    >>> from dppca_dask.pca.pca import plan_pca
    >>> from dppca_dask.privacy.budget import resolve_budget
    >>> budget = resolve_budget(privacy_control(eps=1, delta=1e-5), owner="dp_pca")
    >>> plan = plan_pca(5000, 20, budget, k=5, controls={"clipped": clipped_control(C_clip=10)})
    >>> w = expected_widths(plan, n=5000, p=20, bins=(12, 12))
    >>> round(w.parts["scree"]["clipped"]["half_width"], 3)
    0.35
    >>> sorted(w.as_dict())
    ['directions', 'frame', 'histograms', 'level', 'scree']
    """
    parts: dict[str, Any] = {}
    loading = _loading(plan, p, level, gaps)
    if loading is not None:
        parts["directions"] = loading
    scree = _scree(plan, n, level)
    if scree:
        parts["scree"] = scree
    histograms = _histograms(plan, n, bins, level)
    if histograms:
        parts["histograms"] = histograms
    covariance = _covariance(plan, n, p, clip, bounds, level)
    if covariance is not None:
        parts["covariance"] = covariance
    frame = _frame(plan)
    if frame is not None:
        parts["frame"] = frame
    return ExpectedWidths(level, parts)
