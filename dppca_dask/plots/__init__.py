"""Plots of dppca_dask results (matplotlib, imported lazily by each plotting function).

Modules: :mod:`dppca_dask.plots.score` (private score histograms and synthetic samples); shared
styling in :mod:`dppca_dask.plots._style`. Figures are built as :class:`matplotlib.figure.Figure`
objects without pyplot, so no GUI backend or global figure state is involved.
"""
