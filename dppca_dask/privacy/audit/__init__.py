"""Empirical privacy audits: statistical lower bounds on ε from a mechanism's outputs.

For neighbouring inputs D and D' (a statistic s and s + Δ along the worst direction), run a
mechanism many times on each, reduce every output to the Neyman–Pearson statistic for that
pair and bound ε from below with Clopper–Pearson bounds on a fixed event
(:mod:`~dppca_dask.privacy.audit.bounds`). :data:`AUDITS` defines one worst-case pair, event and
exact law per mechanism (:mod:`~dppca_dask.privacy.audit.scenarios`,
:mod:`~dppca_dask.privacy.audit.laws`; designs in docs/privacy.md, "Empirical audit");
``noise_factor`` (e.g. 0.9) runs a deliberately under-noised copy, which the audit catches with
probability ≥ 1 − 1e-3 at its default count (:meth:`MechanismAudit.power`).
:mod:`~dppca_dask.privacy.audit.floating` is the floating-point membership attack (Mironov 2012);
:mod:`~dppca_dask.privacy.audit.kendall` audits ``dp_loading``'s Kendall release.
"""

from __future__ import annotations

from dppca_dask.privacy.audit.bounds import (
    AUDIT_ALPHA,
    AUDIT_POWER,
    AuditResult,
    clopper_pearson,
    detection_power,
    epsilon_lower_bound,
    event_bound,
    samples_for_power,
)
from dppca_dask.privacy.audit.floating import (
    FLOAT_AUDITS,
    audit_float_membership,
    float_product_hits,
    naive_gaussian,
    naive_laplace,
)
from dppca_dask.privacy.audit.kendall import audit_kendall_release, kendall_neighbours
from dppca_dask.privacy.audit.scenarios import (
    AUDIT_DELTA,
    AUDIT_EPS,
    AUDITS,
    MechanismAudit,
    run_audit,
    weakest_caught_factor,
)

__all__ = [
    "AUDITS",
    "AUDIT_ALPHA",
    "AUDIT_POWER",
    "AUDIT_DELTA",
    "AUDIT_EPS",
    "FLOAT_AUDITS",
    "AuditResult",
    "MechanismAudit",
    "audit_float_membership",
    "audit_kendall_release",
    "clopper_pearson",
    "detection_power",
    "epsilon_lower_bound",
    "event_bound",
    "float_product_hits",
    "kendall_neighbours",
    "naive_gaussian",
    "naive_laplace",
    "run_audit",
    "samples_for_power",
    "weakest_caught_factor",
]
