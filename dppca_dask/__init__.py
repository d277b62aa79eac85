"""dppca_dask: differentially private PCA summaries and covariance matrices with Dask.

Public API
----------
Budgets
    :func:`privacy_control`; the persistent ledger for Python-API releases:
    :func:`accounting` (a context manager), :func:`ledger_accountant` (for ``ledger=``);
    releases outside them: :func:`session_ledger` (in memory, not persistent); what a planned
    release's intervals will be, before any data is read: :func:`expected_widths`
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

import importlib
from typing import TYPE_CHECKING, Any

from dppca_dask._version import package_version as _package_version

# The public names are imported on first use (PEP 562), so that ``import dppca_dask.cli`` --
# ``dppca-dask --help``, ``--version``, shell completion -- does not import dask, xarray and
# scipy. ``from dppca_dask import dp_pca`` and ``dppca_dask.dp_pca`` work as before.
_WHERE: dict[str, str] = {
    "clipped_second_moment": "dppca_dask.covariance.estimator",
    "dp_covariance": "dppca_dask.covariance.estimator",
    "PaceGGMControl": "dppca_dask.covariance.pace_ggm",
    "pace_ggm_control": "dppca_dask.covariance.pace_ggm",
    "BudgetError": "dppca_dask.errors",
    "ChunkingError": "dppca_dask.errors",
    "ClusterError": "dppca_dask.errors",
    "ConfigError": "dppca_dask.errors",
    "DPPCAError": "dppca_dask.errors",
    "DuplicateObservationError": "dppca_dask.errors",
    "InputError": "dppca_dask.errors",
    "OutputExistsError": "dppca_dask.errors",
    "ParameterError": "dppca_dask.errors",
    "PrivacyWarning": "dppca_dask.errors",
    "SessionLedgerWarning": "dppca_dask.errors",
    "dp_loading": "dppca_dask.pca.loading",
    "spherical_kendall": "dppca_dask.pca.loading",
    "dp_pca": "dppca_dask.pca.pca",
    "dp_score": "dppca_dask.pca.score",
    "dp_scree": "dppca_dask.pca.scree",
    "clipped_control": "dppca_dask.pca.scree_controls",
    "huber_control": "dppca_dask.pca.scree_controls",
    "pmwm_control": "dppca_dask.pca.scree_controls",
    "accounting": "dppca_dask.pipeline.notebook",
    "ledger_accountant": "dppca_dask.pipeline.notebook",
    "session_ledger": "dppca_dask.pipeline.notebook",
    "expected_widths": "dppca_dask.pipeline.expected",
    "score_plot_control": "dppca_dask.plots.score",
    "scree_plot_control": "dppca_dask.plots.scree",
    "PrivacyControl": "dppca_dask.privacy.budget",
    "privacy_control": "dppca_dask.privacy.budget",
    "LoadingResult": "dppca_dask.results.base",
    "LoadingSummary": "dppca_dask.results.base",
    "load_result": "dppca_dask.results.base",
    "CovarianceResult": "dppca_dask.results.covariance",
    "CovarianceSummary": "dppca_dask.results.covariance",
    "PCAResult": "dppca_dask.results.pca",
    "PCASummary": "dppca_dask.results.pca",
    "SamplingControl": "dppca_dask.results.sampling",
    "sample_histogram": "dppca_dask.results.sampling",
    "sampling_control": "dppca_dask.results.sampling",
    "ScoreResult": "dppca_dask.results.score",
    "ScoreSummary": "dppca_dask.results.score",
    "ScreeResult": "dppca_dask.results.scree",
    "ScreeSummary": "dppca_dask.results.scree",
}

if TYPE_CHECKING:  # the same names, for type checkers and IDEs
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
        SessionLedgerWarning,
    )
    from dppca_dask.pca.loading import dp_loading, spherical_kendall
    from dppca_dask.pca.pca import dp_pca
    from dppca_dask.pca.score import dp_score
    from dppca_dask.pca.scree import dp_scree
    from dppca_dask.pca.scree_controls import clipped_control, huber_control, pmwm_control
    from dppca_dask.pipeline.expected import expected_widths
    from dppca_dask.pipeline.notebook import accounting, ledger_accountant, session_ledger
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


def __getattr__(name: str) -> Any:
    """Import the public API on first use of any of its names: all of it at once, with the
    plots (which register themselves for the results' ``plot``), as an eager import would."""
    if name not in _WHERE:
        raise AttributeError(f"module 'dppca_dask' has no attribute {name!r}")
    for module in [*sorted(set(_WHERE.values())), "dppca_dask.plots"]:
        importlib.import_module(module)
    for public, module in _WHERE.items():
        globals()[public] = getattr(importlib.import_module(module), public)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "__version__",
    # budgets
    "PrivacyControl",
    "accounting",
    "expected_widths",
    "ledger_accountant",
    "privacy_control",
    "session_ledger",
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
    "SessionLedgerWarning",
]
