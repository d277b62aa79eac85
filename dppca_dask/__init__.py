"""dppca_dask: differentially private PCA summaries and covariance matrices with Dask.

Public API
----------
Budgets
    :func:`privacy_control`; the persistent ledger for Python-API releases:
    :func:`accounting` (a context manager), :func:`ledger_accountant` (for ``ledger=``)
Estimators
    :func:`dp_loading`, :func:`dp_scree` (with :func:`clipped_control`, :func:`pmwm_control`,
    :func:`huber_control`), :func:`dp_score`, :func:`dp_pca` (all three on shared directions),
    :func:`dp_covariance` (with :func:`pace_ggm_control`; reconstruction:
    :func:`dppca_dask.covariance.maxent.maxent`)
Synthetic samples and plots (post-processing)
    :func:`sampling_control`, :func:`sample_histogram`, :func:`score_plot_control`,
    :func:`scree_plot_control`
Exact (non-private) statistics
    :func:`spherical_kendall`, :func:`clipped_second_moment`
Results
    :func:`load_result`, :class:`LoadingResult`, :class:`ScreeResult`, :class:`ScoreResult`,
    :class:`PCAResult`, :class:`CovarianceResult`
Errors
    :class:`DPPCAError` and its subclasses
"""

from __future__ import annotations

from dppca_dask._version import package_version as _package_version
from dppca_dask.covariance.estimator import clipped_second_moment, dp_covariance
from dppca_dask.covariance.pace_ggm import PaceGGMControl, pace_ggm_control
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
from dppca_dask.pca.loading import dp_loading, spherical_kendall
from dppca_dask.pca.pca import dp_pca
from dppca_dask.pca.score import dp_score
from dppca_dask.pca.scree import dp_scree
from dppca_dask.pca.scree_controls import clipped_control, huber_control, pmwm_control
from dppca_dask.pipeline.notebook import accounting, ledger_accountant
from dppca_dask.plots.score import score_plot_control
from dppca_dask.plots.scree import scree_plot_control
from dppca_dask.privacy.budget import PrivacyControl, privacy_control
from dppca_dask.results.base import LoadingResult, LoadingSummary, load_result
from dppca_dask.results.covariance import CovarianceResult, CovarianceSummary
from dppca_dask.results.pca import PCAResult, PCASummary
from dppca_dask.results.sampling import SamplingControl, sample_histogram, sampling_control
from dppca_dask.results.score import ScoreResult, ScoreSummary
from dppca_dask.results.scree import ScreeResult, ScreeSummary

__version__ = _package_version()
"""The installed version (package metadata; ``"0+unknown"`` when not installed)."""

__all__ = [
    "__version__",
    # budgets
    "PrivacyControl",
    "accounting",
    "ledger_accountant",
    "privacy_control",
    # estimators
    "dp_loading",
    "dp_pca",
    "dp_score",
    "dp_scree",
    "clipped_control",
    "huber_control",
    "pmwm_control",
    "dp_covariance",
    "PaceGGMControl",
    "pace_ggm_control",
    # synthetic samples and plots
    "SamplingControl",
    "sample_histogram",
    "sampling_control",
    "score_plot_control",
    "scree_plot_control",
    # exact statistics
    "spherical_kendall",
    "clipped_second_moment",
    # results
    "CovarianceResult",
    "CovarianceSummary",
    "LoadingResult",
    "LoadingSummary",
    "PCAResult",
    "PCASummary",
    "ScoreResult",
    "ScoreSummary",
    "ScreeResult",
    "ScreeSummary",
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
