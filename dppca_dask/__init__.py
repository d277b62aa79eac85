"""dppca_dask: differentially private PCA summaries and covariance matrices with Dask.

Public API
----------
Budgets
    :func:`privacy_control`
Estimators
    :func:`dp_loading`
Exact (non-private) statistics
    :func:`spherical_kendall`
Results
    :func:`load_result`, :class:`LoadingResult`
Errors
    :class:`DPPCAError` and its subclasses
"""

from __future__ import annotations

from dppca_dask.budget import PrivacyControl, privacy_control
from dppca_dask.errors import (
    BudgetError,
    ChunkingError,
    ClusterError,
    ConfigError,
    DPPCAError,
    DuplicateObservationError,
    InputError,
    OutputExistsError,
    ParameterError,
    PrivacyWarning,
)
from dppca_dask.loading import dp_loading, spherical_kendall
from dppca_dask.results import LoadingResult, LoadingSummary, load_result

__all__ = [
    # budgets
    "PrivacyControl",
    "privacy_control",
    # estimators
    "dp_loading",
    # exact statistics
    "spherical_kendall",
    # results
    "LoadingResult",
    "LoadingSummary",
    "load_result",
    # errors
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
]
