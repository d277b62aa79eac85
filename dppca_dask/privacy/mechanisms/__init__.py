"""Noise mechanisms: the only package that draws privacy noise.

Each mechanism is a pure function of a small exact statistic (already computed by a data pass and
held on the driver), a budget and a generator. It returns the noisy value together with a frozen
:class:`~dppca_dask.privacy.accounting.SpendRecord`. No mechanism touches a Dask array.

Floating-point safety (docs/privacy.md): every Gaussian and Laplace mechanism rounds the statistic
to a public grid γ = 2^k (:func:`~dppca_dask.privacy.accounting.public_grid`; γ = 1 for counts), adds
*integer* noise from the exact samplers of :mod:`dppca_dask.privacy.exact_noise` and outputs γ·(integer).
The output is a deterministic function of the noisy integer (post-processing), so no bit of it
depends on the statistic beyond that integer. The rounding is accounted for by calibrating to the
inflated sensitivity Δ + γ√d (L2) or Δ + γ·d (L1).

One module per family; every public name is re-exported here, so
``from dppca_dask.privacy.mechanisms import X`` is the way to import a mechanism:

* :mod:`~dppca_dask.privacy.mechanisms.release` -- :class:`Release` (value + record), note joining;
* :mod:`~dppca_dask.privacy.mechanisms.vech` -- the isometric vech of symmetric matrices;
* :mod:`~dppca_dask.privacy.mechanisms.gaussian` -- (ε, δ) lattice Gaussian: values, vectors and
  symmetric matrices, and their public calibration;
* :mod:`~dppca_dask.privacy.mechanisms.zcdp` -- ρ-zCDP lattice Gaussian (dp_covariance);
* :mod:`~dppca_dask.privacy.mechanisms.laplace` -- discrete Laplace and smooth-sensitivity Laplace;
* :mod:`~dppca_dask.privacy.mechanisms.histograms` -- Gaussian, stability and geometric histograms;
* :mod:`~dppca_dask.privacy.mechanisms.search` -- AboveThreshold and the exponential mechanism.
"""

from __future__ import annotations

from dppca_dask.privacy.mechanisms.gaussian import (
    gaussian_calibration,
    gaussian_release,
    gaussian_release_sigma,
    gaussian_symmetric_matrix,
    symmetric_noise_sigma,
)
from dppca_dask.privacy.mechanisms.histograms import (
    gaussian_histogram,
    geometric_histogram,
    geometric_histogram_scale,
    histogram_noise_sigma,
    stability_histogram,
    stability_histogram_parameters,
)
from dppca_dask.privacy.mechanisms.laplace import SMOOTH_GRID as SMOOTH_GRID
from dppca_dask.privacy.mechanisms.laplace import laplace_release, smooth_laplace
from dppca_dask.privacy.mechanisms.release import Release
from dppca_dask.privacy.mechanisms.search import above_threshold, exponential_mechanism
from dppca_dask.privacy.mechanisms.vech import mat2vec, vec2mat
from dppca_dask.privacy.mechanisms.zcdp import gaussian_zcdp, gaussian_zcdp_symmetric

__all__ = [
    "Release",
    "above_threshold",
    "exponential_mechanism",
    "gaussian_calibration",
    "geometric_histogram",
    "geometric_histogram_scale",
    "gaussian_histogram",
    "gaussian_release",
    "gaussian_release_sigma",
    "gaussian_symmetric_matrix",
    "gaussian_zcdp",
    "gaussian_zcdp_symmetric",
    "histogram_noise_sigma",
    "laplace_release",
    "mat2vec",
    "smooth_laplace",
    "stability_histogram",
    "stability_histogram_parameters",
    "symmetric_noise_sigma",
    "vec2mat",
]
