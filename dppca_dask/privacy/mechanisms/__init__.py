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
``from dppca_dask.privacy.mechanisms import X`` is the way to import a mechanism. Each mechanism
has one **record builder** (``<mechanism>_record``), a function of public quantities only that
returns the mechanism's :class:`~dppca_dask.privacy.accounting.SpendRecord`: the mechanism calls
it for the spend record and the estimators' plans call it for the planned record, so a plan
record and a spend record are built by the same code:

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
    gaussian_record,
    gaussian_release,
    gaussian_release_sigma,
    gaussian_symmetric_matrix,
    gaussian_symmetric_matrix_record,
    symmetric_noise_sigma,
)
from dppca_dask.privacy.mechanisms.histograms import (
    gaussian_histogram,
    gaussian_histogram_record,
    geometric_histogram,
    geometric_histogram_record,
    geometric_histogram_scale,
    histogram_noise_sigma,
    stability_histogram,
    stability_histogram_parameters,
    stability_histogram_record,
)
from dppca_dask.privacy.mechanisms.laplace import SMOOTH_GRID as SMOOTH_GRID
from dppca_dask.privacy.mechanisms.laplace import (
    laplace_record,
    laplace_release,
    smooth_laplace,
    smooth_laplace_record,
)
from dppca_dask.privacy.mechanisms.release import Release, note_label
from dppca_dask.privacy.mechanisms.search import (
    above_threshold,
    above_threshold_record,
    exponential_mechanism,
    exponential_mechanism_record,
)
from dppca_dask.privacy.mechanisms.vech import mat2vec, vec2mat
from dppca_dask.privacy.mechanisms.zcdp import (
    gaussian_zcdp,
    gaussian_zcdp_record,
    gaussian_zcdp_symmetric,
    gaussian_zcdp_symmetric_record,
)

__all__ = [
    "Release",
    "above_threshold",
    "above_threshold_record",
    "exponential_mechanism",
    "exponential_mechanism_record",
    "gaussian_calibration",
    "gaussian_histogram",
    "gaussian_histogram_record",
    "gaussian_record",
    "gaussian_release",
    "gaussian_release_sigma",
    "gaussian_symmetric_matrix",
    "gaussian_symmetric_matrix_record",
    "gaussian_zcdp",
    "gaussian_zcdp_record",
    "gaussian_zcdp_symmetric",
    "gaussian_zcdp_symmetric_record",
    "geometric_histogram",
    "geometric_histogram_record",
    "geometric_histogram_scale",
    "histogram_noise_sigma",
    "laplace_record",
    "laplace_release",
    "mat2vec",
    "note_label",
    "smooth_laplace",
    "smooth_laplace_record",
    "stability_histogram",
    "stability_histogram_parameters",
    "stability_histogram_record",
    "symmetric_noise_sigma",
    "vec2mat",
]
