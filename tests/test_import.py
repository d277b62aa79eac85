"""The curated public namespace (R12)."""

from __future__ import annotations

import dppca_dask


def test_import_star__all_names_exist():
    namespace: dict = {}
    exec("from dppca_dask import *", namespace)
    for name in dppca_dask.__all__:
        assert name in namespace, name
    assert len(set(dppca_dask.__all__)) == len(dppca_dask.__all__)


def test_errors__single_hierarchy():
    for name in dppca_dask.__all__:
        obj = getattr(dppca_dask, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and not issubclass(obj, Warning):
            assert issubclass(obj, dppca_dask.DPPCAError), name
            assert issubclass(obj, ValueError), name
