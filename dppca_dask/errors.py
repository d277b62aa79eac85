"""The package's error hierarchy and its one warning category.

Every error the package raises on purpose is a :class:`DPPCAError`, so callers (and the CLI) can
tell a refused input or a refused budget from a bug. ``DPPCAError`` subclasses ``ValueError`` so
code written against NumPy/scikit-learn conventions keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class _NoValue:
    def __repr__(self) -> str:
        return "<no value>"

    def __reduce__(self) -> str:  # unpickles as the one NO_VALUE
        return "NO_VALUE"


NO_VALUE: Any = _NoValue()
"""The ``value`` of an error that names no offending value."""

__all__ = [
    "API_WORDING",
    "DUPLICATE_MESSAGE",
    "NO_VALUE",
    "BudgetError",
    "ChunkingError",
    "ClusterError",
    "ConfigError",
    "DPPCAError",
    "DuplicateObservationError",
    "Fix",
    "InputError",
    "OutputExistsError",
    "ParameterError",
    "PrivacyWarning",
    "SessionLedgerWarning",
    "UtilityWarning",
    "Wording",
]

DUPLICATE_MESSAGE = (
    "Cannot normalize a vector with zero or non-finite norm. "
    "The spherical Kendall mechanism is undefined for duplicate observations."
)


class Wording(Protocol):
    """How one surface (the Python API, the command line, the app) names a parameter and says
    how to set it: what :meth:`DPPCAError.render` fills the error's fields in with."""

    def subject(self, owner: str, parameter: str) -> str:
        """``The 'eps' parameter of dp_loading`` / ``The 'privacy.eps' config key``."""
        ...

    def setting(self, owner: str, paths: tuple[tuple[str, ...], ...], value: str) -> str:
        """How to set each of ``paths`` (``("overwrite",)``, ``("control", "clipped",
        "C_clip")``: a parameter, or a field of a control constructor) to ``value`` (a Python
        literal or ``...``): ``pass overwrite=True`` / ``use --overwrite``."""
        ...


class ApiWording:
    """The Python API's wording: keyword arguments and control constructors."""

    def subject(self, owner: str, parameter: str) -> str:
        return f"The {parameter!r} parameter of {owner}"

    def setting(self, owner: str, paths: tuple[tuple[str, ...], ...], value: str) -> str:
        if all(len(path) == 3 for path in paths):  # (parameter, method, field): a control's
            parameter, method = paths[0][:2]
            call = ", ".join(f"{path[2]}={value}" for path in paths)
            return f"provide {parameter}={method}_control({call})"
        return " and ".join(f"pass {'.'.join(path)}={value}" for path in paths)


API_WORDING: Wording = ApiWording()


@dataclass(frozen=True)
class Fix:
    """A structured hint: set each of ``paths`` (parameter paths) to ``value`` ``to`` do what."""

    paths: tuple[tuple[str, ...], ...]
    value: str = "..."
    to: str = ""

    def render(self, owner: str, wording: Wording) -> str:
        text = wording.setting(owner, self.paths, self.value)
        return f"{text[0].upper()}{text[1:]}{' ' + self.to if self.to else ''}."


class DPPCAError(ValueError):
    """Base class of every error raised on purpose by dppca_dask.

    An error about one parameter carries fields -- ``owner`` (the function or estimator),
    ``parameter``, ``rule`` (what the value must satisfy, a predicate such as ``"must be a float
    in the range (0, inf)"``), ``value`` (the offending value, as given), ``got`` (its
    description when not ``repr(value)``), ``hint`` (surface-neutral advice) and ``fix`` (a
    :class:`Fix`: which parameter to set, worded per surface) -- so the CLI and the app word it
    in their own terms (:meth:`render`) without parsing the message. ``str(error)`` is the
    Python API's wording. An error built from a plain message has no fields.
    """

    def __init__(self, message: str | None = None, *, owner: str | None = None,
                 parameter: str | None = None, rule: str | None = None,
                 value: Any = NO_VALUE, got: str | None = None, hint: str | None = None,
                 fix: Fix | None = None) -> None:
        self.owner, self.parameter, self.rule = owner, parameter, rule
        self.value, self.got, self.hint, self.fix = value, got, hint, fix
        self.text = message
        super().__init__(self.render(API_WORDING))

    def render(self, wording: Wording) -> str:
        """The message in ``wording``'s terms (the fields filled in; plain text as it is)."""
        if self.parameter is not None and self.owner is not None and self.rule is not None:
            head = f"{wording.subject(self.owner, self.parameter)} {self.rule}."
            if self.got is not None:
                head += f" Got {self.got} instead."
            elif self.value is not NO_VALUE:
                head += f" Got {self.value!r} instead."
        else:
            head = self.text or ""
        tail = [t for t in (self.hint, self.fix.render(self.owner or "", wording)
                            if self.fix else None) if t]
        return " ".join([head, *tail]) if head else " ".join(tail)

    def fields(self) -> dict[str, Any]:
        """The structured fields (JSON-ready; ``value`` as its repr)."""
        return {"owner": self.owner, "parameter": self.parameter, "rule": self.rule,
                "value": None if self.value is NO_VALUE else repr(self.value),
                "got": self.got, "hint": self.hint,
                "fix": None if self.fix is None else {"paths": [list(p) for p in self.fix.paths],
                                                      "value": self.fix.value,
                                                      "to": self.fix.to}}

    def __reduce__(self):  # keep the message and the fields when pickled across Dask workers
        return (_rebuild, (type(self), self.args, self.__dict__.copy()))


def _rebuild(cls: type[DPPCAError], args: tuple[Any, ...], state: dict[str, Any]) -> DPPCAError:
    error = cls.__new__(cls)
    ValueError.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InputError(DPPCAError):
    """The data (array, frame, path) cannot be used: wrong type, shape, values or location."""


class ParameterError(DPPCAError):
    """A function argument breaks its documented rule."""


class BudgetError(DPPCAError):
    """A privacy budget is malformed, does not match the estimator, or would be overspent."""


class DuplicateObservationError(InputError):
    """Two observations coincide, so the spherical Kendall pair term is undefined (SPEC §4.2)."""

    def __init__(self, message: str = DUPLICATE_MESSAGE, **fields: Any) -> None:
        super().__init__(message, **fields)


class ConfigError(DPPCAError):
    """A run configuration is invalid; the message names the offending key."""


class ClusterError(DPPCAError):
    """The Dask cluster could not be started or reached, or was lost during a run."""


class ChunkingError(DPPCAError):
    """The requested block layout cannot be used for a data pass."""


class OutputExistsError(DPPCAError):
    """An output path exists and overwriting was not requested."""


class PrivacyWarning(UserWarning):
    """A documented, rare warning about privacy-relevant behaviour."""


class SessionLedgerWarning(UserWarning):
    """Informational, once per process: a Python-API release made outside ``ledger=`` and
    :func:`dppca_dask.accounting` was recorded only in the in-memory session ledger
    (:func:`dppca_dask.session_ledger`), nothing persistent (:mod:`dppca_dask.privacy.session`)."""


class UtilityWarning(UserWarning):
    """A configuration known to give unreliable values (never a privacy issue): e.g. a scree
    method whose expected noise is large against what it estimates
    (:mod:`dppca_dask.pca.scree_utility`)."""

