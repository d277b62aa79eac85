"""Synthetic public demo data: the ``gau``/``gau_g`` design of docs/spec/SPEC_dppca.md §12.

Five groups of ``n_per_group`` rows each, stacked in group order, 20 columns ``V1..V20``; row
``i`` of group ``g`` is ``mu_g + sqrt(c_g) * Z[i, ::-1]`` where ``Z`` is an ``n_per_group × 20``
standard-normal matrix filled column by column from ``20 * n_per_group`` draws (R's
``matrix(rnorm(...), ncol = 20)`` order), so an R-RNG emulator passed as ``rng`` reproduces the
R package's draws. With a NumPy generator the data are only "similar" to R's ``gau``.

The seed here makes demo data reproducible; it is not a privacy-noise seed.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from dppca_dask._validation import parse_int
from dppca_dask.io.convert import write_frames
from dppca_dask.io.data import default_chunk_rows
from dppca_dask.privacy.rng import as_rng

__all__ = ["GAU_MEANS", "GAU_SCALES", "make_gau", "write_demo_dataset"]

P = 20
GAU_SCALES = (1.0, 1.0, 5.0, 5.0, 8.0)


def _means() -> tuple[tuple[float, ...], ...]:
    def block(values: dict[int, float]) -> tuple[float, ...]:
        return tuple(values.get(j // 5, 0.0) for j in range(P))

    return (block({}), block({0: 5.0}), block({0: -3.0}), block({1: -1.0}), block({1: 3.0}))


GAU_MEANS = _means()


def make_gau(n_per_group: int = 1000, *, rng: Any = 0) -> pd.DataFrame:
    """The ``gau_g`` demo frame: 5 Gaussian groups, columns ``V1..V20`` and ``group``.

    Parameters
    ----------
    n_per_group
        Rows per group (R's ``gau`` has 1000).
    rng
        Seed or generator for the synthetic data (see :func:`dppca_dask.privacy.rng.as_rng`).

    Returns
    -------
    pandas.DataFrame
        ``5 * n_per_group`` rows; ``group`` holds ``"group1"`` .. ``"group5"`` in order.

    Examples
    --------
    >>> df = make_gau(4, rng=1)
    >>> df.shape, list(df.columns[:2]), df["group"].iloc[[0, -1]].tolist()
    ((20, 21), ['V1', 'V2'], ['group1', 'group5'])
    """
    n = parse_int(n_per_group, "n_per_group", "make_gau", low=1)
    gen = as_rng(rng, owner="make_gau").generator
    blocks = []
    for mu, c in zip(GAU_MEANS, GAU_SCALES, strict=True):
        z = np.asarray(gen.normal(0.0, 1.0, size=P * n), dtype=np.float64).reshape(P, n).T
        blocks.append(np.asarray(mu) + np.sqrt(c) * z[:, ::-1])
    frame = pd.DataFrame(np.vstack(blocks), columns=[f"V{j + 1}" for j in range(P)])
    frame["group"] = np.repeat([f"group{g + 1}" for g in range(len(GAU_SCALES))], n)
    return frame


def write_demo_dataset(path: str | os.PathLike, *, n_per_group: int = 1000, rng: Any = 0,
                       overwrite: bool = False) -> str:
    """Write :func:`make_gau` as a Zarr group in the :mod:`dppca_dask.io.convert` layout.

    ``X`` (sample × variable, float64) with the ``variable`` coordinate ``V1..V20`` and the
    ``group`` labels; like every store :func:`~dppca_dask.io.convert.write_frames` writes, it
    carries a fresh dataset id (``dppca_dataset_id`` attribute) for the budget ledger. Returns
    ``path`` as a string.

    Examples
    --------
    >>> import os, tempfile
    >>> from dppca_dask.io.data import as_data
    >>> out = write_demo_dataset(os.path.join(tempfile.mkdtemp(), "gau.zarr"), n_per_group=10)
    >>> src = as_data(out, group="group")
    >>> src.n, src.p, src.variables[-1], np.asarray(src.groups)[[0, -1]].tolist()
    (50, 20, 'V20', ['group1', 'group5'])
    """
    frame = make_gau(n_per_group, rng=rng)
    rows = default_chunk_rows(len(frame), P)
    return write_frames([frame], path, rows=rows, group_column="group", overwrite=overwrite,
                        source="make_gau()", owner="write_demo_dataset")
