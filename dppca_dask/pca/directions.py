"""The PC directions a scree or score stage works on, handed over as one small frozen value.

Either this fit releases them (the loading stage, its spend record) or the user supplies an
earlier release ``V_dp``: :func:`parse_v_dp` is the one parser of ``V_dp`` for every estimator,
and :func:`prior_record` the one record of its loading allocation (recorded, not spent again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import xarray as xr

from dppca_dask._validation import bad_param, count_check
from dppca_dask.errors import InputError
from dppca_dask.io.data import DataSource
from dppca_dask.pca.loading import loading_records, release_loading
from dppca_dask.pca.options import Setup
from dppca_dask.privacy.accounting import SpendRecord
from dppca_dask.privacy.budget import BudgetPlan
from dppca_dask.privacy.rng import RngState
from dppca_dask.results.base import LoadingResult

__all__ = ["SHARED", "Directions", "DirectionsLike", "directions_records", "parse_v_dp", "prior_record", "release_directions"]


DirectionsLike: TypeAlias = LoadingResult | xr.DataArray | np.ndarray | Sequence[Sequence[float]]
"""Earlier private directions V_dp: a dp_loading result or a p x k matrix (one row per variable)."""


@dataclass(frozen=True, eq=False)
class Directions:
    """Private directions (p × k', columns PC1..) and the ledger entries that released them.

    ``origin``: ``"dp_loading"`` (released by this fit's loading stage), :data:`SHARED`,
    ``"supplied dp_loading result"`` or ``"supplied matrix"``. ``angles``/``guaranteed``: the
    loading release's angle bounds per column (degrees; ``angle_upper`` and
    ``angle_upper_guaranteed`` of :mod:`~dppca_dask.results.direction_intervals`), when this
    fit released the directions; ``None`` for supplied ones.
    """

    matrix: np.ndarray
    records: tuple[SpendRecord, ...]
    origin: str
    angles: np.ndarray | None = None
    guaranteed: np.ndarray | None = None

    def __post_init__(self) -> None:
        m = np.asarray(self.matrix, dtype=np.float64)
        if m.ndim != 2 or m.shape[1] < 1 or not np.isfinite(m).all():
            raise bad_param("matrix", "Directions", "a finite p x k matrix (k >= 1)",
                            f"an array of shape {m.shape}")
        m = m.copy()
        m.setflags(write=False)
        object.__setattr__(self, "matrix", m)
        object.__setattr__(self, "records", tuple(self.records))

    @property
    def supplied(self) -> bool:
        """Whether the directions are an earlier release (``V_dp``)."""
        return self.origin not in ("dp_loading", SHARED)


def parse_v_dp(V_dp: Any, source: DataSource, owner: str) -> tuple[np.ndarray, str]:
    """``V_dp`` as a p × k' matrix of finite directions, and how it was given.

    Accepts a :class:`~dppca_dask.LoadingResult`, a DataArray (its ``variable`` coordinate must
    name X's variables in order) or an array with one row per variable (a vector is one
    direction).
    """
    count_check("parse_v_dp", owner, "V_dp")
    rule = (f"a dp_loading result or a {source.p} x k matrix of PC directions (one row per "
            "variable, finite values)")
    names = None
    how = "supplied matrix"
    if isinstance(V_dp, LoadingResult):
        V_dp, how = V_dp.directions, "supplied dp_loading result"
    if isinstance(V_dp, xr.DataArray):
        if "variable" in V_dp.coords:
            names = [str(v) for v in V_dp["variable"].values]
        V_dp = V_dp.values
    try:
        v = np.asarray(V_dp, dtype=np.float64)
    except (TypeError, ValueError):
        raise bad_param("V_dp", owner, rule, type(V_dp).__name__) from None
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2 or v.shape[0] != source.p or v.shape[1] < 1 or not np.isfinite(v).all():
        raise bad_param("V_dp", owner, rule, f"an array of shape {v.shape}"
                        + ("" if np.isfinite(v).all() else " with non-finite values"))
    if names is not None and tuple(names) != tuple(source.variables):
        raise bad_param("V_dp", owner, "directions for the variables of X, in the same order",
                        names, cls=InputError)
    return v, how


SHARED = "dp_pca loading part"
"""Origin of directions released by the loading part of the same ``dp_pca`` fit."""


def prior_record(plan: BudgetPlan, origin: str) -> SpendRecord:
    """The one record of directions released before this stage: recorded, not spent again.

    ``origin`` is how they were given (:func:`parse_v_dp`) or :data:`SHARED` (dp_pca's own
    loading part, which its scree and score parts share).
    """
    prior = plan["loading"]
    if origin == SHARED:
        return SpendRecord(component="loading", mechanism="shared directions", eps=prior.eps,
                           delta=prior.delta, status="prior",
                           note="directions released by the loading part of this dp_pca fit; "
                                "recorded, not spent again")
    return SpendRecord(component="loading", mechanism="supplied V_dp", eps=prior.eps,
                       delta=prior.delta, status="prior",
                       note=f"directions released earlier ({origin}); recorded, not spent again")


def release_directions(source: DataSource, plan: BudgetPlan, setup: Setup, rng_state: RngState
                       ) -> tuple[Directions, LoadingResult | None]:
    """The directions of a fit: the supplied ones (``setup.supplied``, a prior release) or this
    fit's loading stage.

    Returns them with the loading stage's result (``None`` for supplied directions).
    """
    if setup.supplied is not None:
        matrix, how = setup.supplied
        return Directions(matrix, (prior_record(plan, how),), how), None
    part = release_loading(source, plan, setup, rng_state)
    matrix = np.asarray(part.result.directions.values)
    ds = part.result.dataset
    angles = ds["angle_upper"].values if "angle_upper" in ds else None
    guaranteed = ds["angle_upper_guaranteed"].values if "angle_upper_guaranteed" in ds else None
    return Directions(matrix, part.records, "dp_loading", angles, guaranteed), part.result


def directions_records(setup: Setup, budget: BudgetPlan) -> tuple[SpendRecord, ...]:
    """The planned records of :func:`release_directions`: the loading release, or the prior
    record of the supplied directions."""
    if setup.supplied is not None:
        return (prior_record(budget, setup.supplied[1]),)
    return loading_records(setup, budget)
