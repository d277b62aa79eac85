"""The package's error hierarchy and its one warning category.

Every error the package raises on purpose is a :class:`DPPCAError`, so callers (and the CLI) can
tell a refused input or a refused budget from a bug. ``DPPCAError`` subclasses ``ValueError`` so
code written against NumPy/scikit-learn conventions keeps working.
"""

from __future__ import annotations

__all__ = [
    "DUPLICATE_MESSAGE",
    "BudgetError",
    "ChunkingError",
    "ClusterError",
    "ConfigError",
    "DPPCAError",
    "DuplicateObservationError",
    "InputError",
    "OutputExistsError",
    "ParameterError",
    "PrivacyWarning",
    "UtilityWarning",
]

DUPLICATE_MESSAGE = (
    "Cannot normalize a vector with zero or non-finite norm. "
    "The spherical Kendall mechanism is undefined for duplicate observations."
)


class DPPCAError(ValueError):
    """Base class of every error raised on purpose by dppca_dask."""

    def __reduce__(self):  # keep the message when pickled across Dask workers
        return (type(self), self.args)


class InputError(DPPCAError):
    """The data (array, frame, path) cannot be used: wrong type, shape, values or location."""


class ParameterError(DPPCAError):
    """A function argument breaks its documented rule."""


class BudgetError(DPPCAError):
    """A privacy budget is malformed, does not match the estimator, or would be overspent."""


class DuplicateObservationError(InputError):
    """Two observations coincide, so the spherical Kendall pair term is undefined (SPEC §4.2)."""

    def __init__(self, message: str = DUPLICATE_MESSAGE) -> None:
        super().__init__(message)


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


class UtilityWarning(UserWarning):
    """A configuration known to give unreliable values (never a privacy issue): e.g. a scree
    method whose expected noise is large against what it estimates
    (:mod:`dppca_dask.pca.scree_utility`)."""

