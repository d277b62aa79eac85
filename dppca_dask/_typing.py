"""Type aliases of the public API (for annotations; every value is still validated at run time).

``DataLike`` is what the estimators accept as X, ``RngLike`` what they accept as ``rng``, and the
``Literal`` aliases name the methods and options by their accepted strings. Aliases that name a
package type live next to it: ``ScreeControlLike`` (pca/scree_controls.py), ``SamplingLike``
(results/sampling.py), ``DirectionsLike`` (pca/directions.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

import numpy as np

if TYPE_CHECKING:  # only needed to name the types
    import dask.array as da
    import pandas as pd
    import xarray as xr

__all__ = [
    "BoundsLike",
    "Calibration",
    "CenterLike",
    "GroupLike",
    "CovarianceMethod",
    "DataLike",
    "FrameMethod",
    "Pairs",
    "PairsOption",
    "RngLike",
    "ScoreMethod",
    "ScreeMethod",
    "Preset",
    "Sensitivity",
]

DataLike: TypeAlias = Union[
    np.ndarray, "pd.DataFrame", "da.Array", "xr.DataArray", str, "os.PathLike[str]",
    Sequence[Sequence[float]],
]
"""Observations in rows: NumPy, pandas, dask, xarray, nested sequences, or a Zarr path/URL."""

RngLike: TypeAlias = int | np.random.Generator | None
"""``None`` (fresh OS entropy), an int seed (never stored) or a NumPy Generator."""

ScreeMethod: TypeAlias = Literal["clipped", "pmwm", "huber"]
ScoreMethod: TypeAlias = Literal["add", "sparse", "geometric"]
FrameMethod: TypeAlias = Literal["auto", "ranged", "durfee", "capped", "smooth"]
Calibration: TypeAlias = Literal["classical", "analytic"]
Sensitivity: TypeAlias = Literal["seed", "tight"]
Preset: TypeAlias = Literal["recommended", "seed"]
"""Where the options left at ``None`` come from (:data:`dppca_dask.pca.options.PRESETS`)."""
Pairs: TypeAlias = Literal["all", "blocks"]
PairsOption: TypeAlias = Literal["all", "blocks", "auto"]
"""``"auto"``: all pairs while the all-pairs work is small, blocks above (from n and p only)."""
CovarianceMethod: TypeAlias = Literal["pace_ggm", "ssp", "diagonal", "auto"]
CovarianceClip: TypeAlias = Literal["box", "row"]


GroupLike: TypeAlias = Union[str, np.ndarray, "pd.Series", Sequence[Any]]
"""Group labels: one per row, or the name of a column / Zarr variable that holds them."""

CenterLike: TypeAlias = Union[  # noqa: UP007
    Literal["private", "empirical"], float, Sequence[float], np.ndarray,
]
"""Centring of the scree scores: private, empirical (outside the guarantee) or public constants."""

BoundsLike: TypeAlias = Union[float, Sequence[float], Mapping[str, float]]  # noqa: UP007
"""Public bounds |x_j| <= B_j: one B, one per variable, or a mapping variable -> B_j."""
