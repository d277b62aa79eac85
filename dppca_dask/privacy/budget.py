"""Privacy budgets: the ``privacy_control()`` object and its resolution by each fitting function.

Follows ``docs/spec/seeds/privacy_control.txt`` and docs/spec/SPEC_dppca.md §2. Two modes:

* **total** -- ``eps`` and ``delta`` for the whole fit, optionally with an explicit ``split`` of
  proportions. Without a split the constructor shows equal thirds and sets ``implicit_split``; the
  fitting function then divides the total equally over the components it needs.
* **absolute** -- component budgets ``loading`` (required), ``scree`` and/or ``score``, each an
  (eps, delta) pair; the total is their sum.

Invariants: objects are immutable; an explicit split or absolute budget is used exactly as given
and must name exactly the components the fitting function needs; a resolved plan's allocations sum
to the control's total (implicit and explicit splits) or equal the given components (absolute).
Nothing here touches data or draws noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from dppca_dask._rformat import format_r_named
from dppca_dask._validation import bad_param, parse_real
from dppca_dask.errors import BudgetError

__all__ = [
    "COMPONENTS",
    "FIT_COMPONENTS",
    "BudgetPlan",
    "PrivacyBudget",
    "PrivacyControl",
    "privacy_control",
    "resolve_budget",
]

COMPONENTS: tuple[str, ...] = ("loading", "scree", "score")
FIT_COMPONENTS: dict[str, tuple[str, ...]] = {
    "dp_loading": ("loading",),
    "dp_scree": ("loading", "scree"),
    "dp_score": ("loading", "score"),
    "dp_pca": ("loading", "scree", "score"),
    "dp_covariance": ("covariance",),  # eps/delta of the runner's privacy section, as rho-zCDP
}
SPLIT_TOLERANCE = 1e-8
_OWNER = "privacy_control"


@dataclass(frozen=True)
class PrivacyBudget:
    """An (eps, delta) pair with eps > 0 finite and delta in [0, 1)."""

    eps: float
    delta: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise BudgetError(f"A privacy budget needs a positive finite eps. Got {self.eps!r}.")
        if not (0.0 <= self.delta < 1.0):
            raise BudgetError(f"A privacy budget needs delta in [0, 1). Got {self.delta!r}.")

    def as_dict(self) -> dict[str, float]:
        return {"eps": self.eps, "delta": self.delta}

    def scaled(self, fraction: float) -> PrivacyBudget:
        """This budget times ``fraction`` (for eps and delta alike)."""
        return PrivacyBudget(self.eps * fraction, self.delta * fraction)


@dataclass(frozen=True)
class PrivacyControl:
    """A privacy allocation made by :func:`privacy_control`; read it through its properties."""

    mode: Literal["total", "absolute"]
    total_budget: PrivacyBudget
    component_budgets: tuple[tuple[str, PrivacyBudget], ...]
    implicit_split: bool = False
    split: tuple[tuple[str, float], ...] | None = field(default=None)

    def __post_init__(self) -> None:
        """The allocation is consistent however it was built (by hand as by the factory)."""
        def bad(rule: str, got: Any) -> BudgetError:
            return bad_param("PrivacyControl", "PrivacyControl", rule, got, cls=BudgetError)

        if self.mode not in ("total", "absolute"):
            raise bad("a mode of 'total' or 'absolute'", self.mode)
        if not isinstance(self.total_budget, PrivacyBudget):
            raise bad("a PrivacyBudget as total_budget", self.total_budget)
        names = [name for name, _ in self.component_budgets]
        if (not names or names != [c for c in COMPONENTS if c in names]
                or "loading" not in names
                or any(not isinstance(b, PrivacyBudget) for _, b in self.component_budgets)):
            raise bad(f"component budgets named from {COMPONENTS} in that order (loading "
                      "required), each a PrivacyBudget", self.component_budgets)
        if self.mode == "absolute":
            parts = {"eps": math.fsum(b.eps for _, b in self.component_budgets),
                     "delta": math.fsum(b.delta for _, b in self.component_budgets)}
        else:
            if self.implicit_split:
                shares = dict.fromkeys(COMPONENTS, 1.0 / 3.0)
            elif self.split is not None:
                shares = dict(self.split)
                if (set(shares) != set(names)
                        or abs(math.fsum(shares.values()) - 1.0) > SPLIT_TOLERANCE):
                    raise bad("a split over the component names summing to 1", self.split)
            else:
                raise bad("a split, or implicit_split=True, in mode 'total'", None)
            for name, b in self.component_budgets:
                want = self.total_budget.scaled(shares[name])
                if not (_close(b.eps, want.eps) and _close(b.delta, want.delta)):
                    raise bad(f"component {name!r} equal to its share of the total "
                              f"({want.as_dict()})", b.as_dict())
            return
        total = self.total_budget
        if not (_close(total.eps, parts["eps"]) and _close(total.delta, parts["delta"])):
            raise bad(f"a total equal to the sum of its components ({parts})", total.as_dict())

    @property
    def total(self) -> dict[str, float]:
        """Total privacy parameters, ``{"eps": ..., "delta": ...}``."""
        return self.total_budget.as_dict()

    @property
    def budgets(self) -> dict[str, dict[str, float]]:
        """Component budgets in loading, scree, score order (thirds when the split is implicit)."""
        return {name: b.as_dict() for name, b in self.component_budgets}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description from which :meth:`from_dict` rebuilds an equal object."""
        if self.mode == "absolute":
            return {name: b.as_dict() for name, b in self.component_budgets}
        out: dict[str, Any] = dict(self.total)
        if not self.implicit_split and self.split is not None:
            out["split"] = dict(self.split)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrivacyControl:
        return privacy_control(**dict(data))

    def __repr__(self) -> str:
        lines = ["$total", format_r_named(self.total), "", "$budgets"]
        for name, budget in self.component_budgets:
            lines += [f"$budgets${name}", format_r_named(budget.as_dict()), ""]
        lines += ["", 'attr(,"class")', '[1] "dppca_privacy_control"']
        if self.implicit_split:
            lines += ['attr(,"implicit_split")', "[1] TRUE"]
        return "\n".join(lines)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def _parse_component(value: Any, name: str) -> PrivacyBudget:
    rule = "a dict {'eps': ..., 'delta': ...} or an (eps, delta) pair"
    if isinstance(value, PrivacyBudget):
        eps, delta = value.eps, value.delta
    elif isinstance(value, Mapping):
        if set(value) != {"eps", "delta"}:
            raise bad_param(name, _OWNER, rule, value, cls=BudgetError)
        eps, delta = value["eps"], value["delta"]
    elif isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        eps, delta = value
    else:
        raise bad_param(name, _OWNER, rule, value, cls=BudgetError)
    eps = parse_real(eps, f"{name}.eps", _OWNER, low=0.0, cls=BudgetError)
    delta = parse_real(delta, f"{name}.delta", _OWNER, low=0.0, high=1.0, cls=BudgetError)
    return PrivacyBudget(eps, delta)


def _parse_split(split: Any) -> tuple[tuple[str, float], ...]:
    rule = (
        "a dict of positive proportions keyed by 'loading' and optionally 'scree' and/or "
        "'score', summing to 1"
    )
    if not isinstance(split, Mapping) or not split:
        raise bad_param("split", _OWNER, rule, split, cls=BudgetError)
    names = list(split)
    if any(not isinstance(k, str) or k not in COMPONENTS for k in names):
        raise bad_param("split", _OWNER, rule + " (unknown component name)", split, cls=BudgetError)
    if "loading" not in split:
        raise bad_param("split", _OWNER, rule + " (loading is required)", split, cls=BudgetError)
    props = {
        k: parse_real(split[k], f"split[{k!r}]", _OWNER, low=0.0, cls=BudgetError) for k in names
    }
    total = math.fsum(props.values())
    if abs(total - 1.0) > SPLIT_TOLERANCE:
        raise bad_param("split", _OWNER, rule + f" (the proportions sum to {total!r})", split,
                        cls=BudgetError)
    return tuple((k, props[k]) for k in COMPONENTS if k in props)


def privacy_control(
    eps: float | None = None,
    delta: float | None = None,
    split: Mapping[str, float] | None = None,
    *,
    loading: Mapping[str, float] | Sequence[float] | None = None,
    scree: Mapping[str, float] | Sequence[float] | None = None,
    score: Mapping[str, float] | Sequence[float] | None = None,
) -> PrivacyControl:
    """Allocate privacy budgets for shared PCA estimation.

    Parameters
    ----------
    eps, delta
        Total privacy parameters: ``eps`` positive and finite, ``delta`` in (0, 1). Leave both
        ``None`` when giving absolute component budgets.
    split
        Positive proportions summing to one, keyed by ``"loading"`` and optionally ``"scree"``
        and/or ``"score"``; the same proportions apply to eps and delta. When omitted the fitting
        function divides the total equally among the components it needs.
    loading, scree, score
        Absolute component budgets, each ``{"eps": ..., "delta": ...}`` or an ``(eps, delta)``
        pair. ``loading`` is required in this mode; component deltas must sum to less than one.

    Returns
    -------
    PrivacyControl
        With ``.total``, ``.budgets`` (loading, scree, score order) and ``.implicit_split``.

    Raises
    ------
    BudgetError
        For any breach of the rules above.

    Examples
    --------
    >>> pc = privacy_control(eps=6, delta=1e-4, split={"loading": 0.5, "score": 0.5})
    >>> pc.budgets["score"]
    {'eps': 3.0, 'delta': 5e-05}
    >>> privacy_control(loading=(2, 2e-5), scree=(4, 8e-5)).total
    {'eps': 6.0, 'delta': 0.0001}
    """
    absolute = {k: v for k, v in (("loading", loading), ("scree", scree), ("score", score))
                if v is not None}
    if absolute:
        if eps is not None or delta is not None:
            raise BudgetError(
                "privacy_control takes either total eps/delta or absolute component budgets, "
                "not both."
            )
        if split is not None:
            raise BudgetError(
                "privacy_control does not take a split together with absolute component budgets."
            )
        if "loading" not in absolute:
            raise BudgetError(
                "privacy_control needs an absolute 'loading' budget when component budgets are "
                f"given. Got only {sorted(absolute)}."
            )
        parsed = tuple((k, _parse_component(absolute[k], k)) for k in COMPONENTS if k in absolute)
        total_delta = math.fsum(b.delta for _, b in parsed)
        if total_delta >= 1.0:
            raise BudgetError(
                "The component deltas of privacy_control must sum to less than 1. "
                f"Got {total_delta!r} instead."
            )
        total = PrivacyBudget(math.fsum(b.eps for _, b in parsed), total_delta)
        return PrivacyControl("absolute", total, parsed)

    if eps is None and delta is None:
        raise BudgetError(
            "privacy_control needs total eps and delta, or absolute component budgets "
            "(loading=..., optionally scree=... and/or score=...)."
        )
    if eps is None or delta is None:
        missing = "eps" if eps is None else "delta"
        raise BudgetError(
            f"privacy_control needs both total eps and delta; {missing!r} is missing."
        )
    total = PrivacyBudget(
        parse_real(eps, "eps", _OWNER, low=0.0, cls=BudgetError),
        parse_real(delta, "delta", _OWNER, low=0.0, high=1.0, cls=BudgetError),
    )
    if split is None:
        thirds = tuple((k, total.scaled(1.0 / 3.0)) for k in COMPONENTS)
        return PrivacyControl("total", total, thirds, implicit_split=True)
    proportions = _parse_split(split)
    budgets = tuple((k, total.scaled(frac)) for k, frac in proportions)
    return PrivacyControl("total", total, budgets, split=proportions)


@dataclass(frozen=True)
class BudgetPlan:
    """The complete spending plan of one fit, fixed before any data is read.

    ``allocations`` holds every component the fitting function needs; components in ``prior`` are
    recorded as earlier releases (a supplied ``V_dp``) and are not spent by this fit.
    """

    owner: str
    allocations: tuple[tuple[str, PrivacyBudget], ...]
    total: PrivacyBudget
    implicit_split: bool
    prior: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        """A hand-built plan is as safe as :func:`resolve_budget`'s: its allocations are
        budgets, name distinct components, and add up to at most its total."""
        names = [name for name, _ in self.allocations]
        if len(set(names)) != len(names) or not all(
                isinstance(b, PrivacyBudget) for _, b in self.allocations):
            raise BudgetError("The 'allocations' field of BudgetPlan must pair distinct "
                              f"component names with PrivacyBudget values. Got "
                              f"{self.allocations!r} instead.")
        if not isinstance(self.total, PrivacyBudget):
            raise BudgetError(f"The 'total' field of BudgetPlan must be a PrivacyBudget. Got "
                              f"{self.total!r} instead.")
        eps = math.fsum(b.eps for _, b in self.allocations)
        delta = math.fsum(b.delta for _, b in self.allocations)
        slack = 1.0 + 1e-9
        if eps > self.total.eps * slack or delta > self.total.delta * slack + 1e-300:
            raise BudgetError(f"The allocations of BudgetPlan add up to eps = {eps!r}, delta = "
                              f"{delta!r}, more than its total (eps = {self.total.eps!r}, "
                              f"delta = {self.total.delta!r}).")
        unknown = set(self.prior) - set(names)
        if unknown:
            raise BudgetError(f"The 'prior' field of BudgetPlan names {sorted(unknown)}, which "
                              "are not among its allocations.")

    def __getitem__(self, component: str) -> PrivacyBudget:
        for name, budget in self.allocations:
            if name == component:
                return budget
        raise KeyError(component)

    @property
    def components(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.allocations)

    def spend(self, component: str) -> PrivacyBudget:
        """The budget this fit may spend on ``component`` (never a prior release)."""
        if component in self.prior:
            raise BudgetError(
                f"{self.owner} records the {component!r} allocation as a prior release "
                "(supplied V_dp); it cannot be spent again."
            )
        return self[component]

    def as_dict(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "total": self.total.as_dict(),
            "implicit_split": self.implicit_split,
            "allocations": {
                name: {**b.as_dict(), "status": "prior" if name in self.prior else "spent"}
                for name, b in self.allocations
            },
        }


def resolve_budget(
    control: Any, *, owner: str, prior: Iterable[str] = ()
) -> BudgetPlan:
    """Resolve ``control`` into the spending plan of fitting function ``owner``.

    An implicit split divides the total equally over the components ``owner`` needs; an explicit
    split or absolute budget must name exactly those components.

    Examples
    --------
    >>> plan = resolve_budget(privacy_control(eps=6, delta=1e-4), owner="dp_scree")
    >>> plan["scree"]
    PrivacyBudget(eps=3.0, delta=5e-05)
    """
    if not isinstance(control, PrivacyControl):
        raise bad_param(
            "privacy", owner, "a PrivacyControl made by privacy_control()", control,
            cls=BudgetError,
        )
    needs = FIT_COMPONENTS[owner]
    prior_set = frozenset(prior)
    if control.implicit_split:
        share = 1.0 / len(needs)
        allocations = tuple((k, control.total_budget.scaled(share)) for k in needs)
    else:
        given = tuple(name for name, _ in control.component_budgets)
        if set(given) != set(needs):
            kind = "absolute budgets" if control.mode == "absolute" else "an explicit split"
            raise BudgetError(
                f"{owner} needs privacy budgets for exactly {{{', '.join(needs)}}}, but the "
                f"privacy_control object has {kind} for {{{', '.join(given)}}}. An explicit split "
                "or absolute budget must match the required components."
            )
        allocations = control.component_budgets
    return BudgetPlan(owner, allocations, control.total_budget, control.implicit_split, prior_set)
