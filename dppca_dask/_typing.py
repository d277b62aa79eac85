"""Type aliases of the public API (for annotations; every value is still validated at run time).

``DataLike`` is what the estimators accept as X, ``RngLike`` what they accept as ``rng``, and the
``Literal`` aliases name the methods and options by their accepted strings.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, TypeAlias, Union

import numpy as np

if TYPE_CHECKING:  # the heavy libraries are only needed to name the types
    import dask.array as da
    import pandas as pd
    import xarray as xr

__all__ = [
    "Calibration",
    "CovarianceMethod",
    "DataLike",
    "FrameMethod",
    "Pairs",
    "RngLike",
    "ScoreMethod",
    "ScreeMethod",
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
ScoreMethod: TypeAlias = Literal["add", "sparse"]
FrameMethod: TypeAlias = Literal["durfee", "smooth"]
Calibration: TypeAlias = Literal["classical", "analytic"]
Sensitivity: TypeAlias = Literal["seed", "tight"]
Pairs: TypeAlias = Literal["all", "blocks"]
CovarianceMethod: TypeAlias = Literal["pace_ggm", "ssp", "diagonal"]
