"""Plots of dppca_dask results (matplotlib, imported lazily by each plotting function).

Modules: :mod:`dppca_dask.plots.score` (private score histograms and synthetic samples); shared
styling in :mod:`dppca_dask.plots._style`. Figures are built as :class:`matplotlib.figure.Figure`
objects without pyplot, so no GUI backend or global figure state is involved.

Each plotting module registers its function for its result kind
(:func:`dppca_dask.results.plotters.register_plot`); importing the package imports them all, so
every result's ``plot`` method finds its function without the results importing the plots.
"""

from dppca_dask.plots import covariance, loading, pca, score, scree  # noqa: F401 - registers
