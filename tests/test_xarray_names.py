"""Result labels work with xarray: no dimension or coordinate is named after a keyword of
xarray's indexing methods, and ``.sel(mechanism=...)`` selects one mechanism (issue 16)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import numpy as np
import pytest
import xarray as xr

from dppca_dask.results.base import Result
from tests.helpers import example_results

INDEXING_METHODS = ("sel", "isel", "interp", "reindex")


@pytest.fixture(scope="module")
def results() -> dict[str, Result]:
    return example_results()


def _xarray_keywords() -> set[str]:
    """Named parameters of sel/isel/interp/reindex on Dataset and DataArray, read from their
    signatures (so a keyword added by a later xarray is covered too)."""
    names: set[str] = set()
    for cls in (xr.Dataset, xr.DataArray):
        for method in INDEXING_METHODS:
            for param in inspect.signature(getattr(cls, method)).parameters.values():
                if param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL) \
                        and param.name != "self":
                    names.add(param.name)
    return names


def _registered_kinds() -> set[str]:
    kinds, todo = set(), list(Result.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.kind:
            kinds.add(cls.kind)
    return kinds


def _labelled(obj: object, where: str,
              seen: set[int]) -> Iterator[tuple[str, xr.Dataset | xr.DataArray]]:
    """Every Dataset/DataArray a result exposes: its dataset, its tree's nodes, each data
    variable, and whatever its public properties return (sub-results recursively)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, xr.DataTree):
        for node in obj.subtree:
            yield from _labelled(node.to_dataset(), f"{where}{node.path}", seen)
    elif isinstance(obj, xr.Dataset):
        yield where, obj
        for name, var in obj.data_vars.items():
            yield f"{where}[{name!r}]", var
    elif isinstance(obj, xr.DataArray):
        yield where, obj
    elif isinstance(obj, Result):
        yield from _labelled(obj.dataset, f"{where}.dataset", seen)
        for name, member in inspect.getmembers(type(obj)):
            if not name.startswith("_") and isinstance(member, property):
                yield from _labelled(getattr(obj, name), f"{where}.{name}", seen)
        tree = getattr(obj, "tree", None)
        if tree is not None:
            yield from _labelled(tree, f"{where}.tree", seen)


def test_xarray_keywords__read_from_signatures():
    keywords = _xarray_keywords()
    # the names that bit (or could bite) users; the walk below fails if a result used them
    assert {"method", "tolerance", "drop", "indexers", "coords", "fill_value"} <= keywords


def test_results__examples_cover_every_result_kind(results):
    assert {r.kind for r in results.values()} == _registered_kinds()


def test_results__no_dimension_or_coordinate_shadows_an_xarray_keyword(results):
    keywords = _xarray_keywords()
    walked = 0
    for label, result in results.items():
        for where, obj in _labelled(result, label, set()):
            walked += 1
            names = {str(d) for d in obj.dims} | {str(c) for c in obj.coords}
            assert not names & keywords, f"{where}: {sorted(names & keywords)} shadow xarray"
    assert walked > 50  # the walk reached the parts, variables and properties


def test_results__shadowing_name_is_caught():
    """The check above fails on a dataset built the old way (dimension ``method``)."""
    old = xr.Dataset({"scree": (("method", "component"), np.zeros((2, 1)))},
                     coords={"method": ["clipped", "pmwm"]})
    assert {str(d) for d in old.dims} & _xarray_keywords() == {"method"}
    # ... and it is the bug of issue 16: sel(method=...) silently selects nothing
    assert old.sel(method="pmwm").sizes == old.sizes


def test_scree__sel_mechanism_selects_one(results):
    fit = results["scree"]
    assert fit.mechanisms == fit.methods == ("clipped", "pmwm")
    picked = fit.scree.sel(mechanism="pmwm")
    assert "mechanism" not in picked.dims and picked.dims == ("component",)
    np.testing.assert_array_equal(picked.values, fit.scree.values[1])
    one = fit.dataset.sel(mechanism="clipped")
    assert "mechanism" not in one.dims
    np.testing.assert_array_equal(one["pve"].values, fit.pve.values[0])
    # the example of issue 16 that raised "Invalid fill method"
    value = fit.scree.sel(mechanism="pmwm", component="PC1")
    assert value.ndim == 0 and float(value) == float(fit.scree.values[1, 0])


def test_score__sel_mechanism_selects_one(results):
    fit = results["score"]
    assert fit.mechanisms == ("add", "sparse")
    picked = fit.probability.sel(mechanism="sparse")
    assert picked.dims == ("group", "y_bin", "x_bin")
    np.testing.assert_array_equal(picked.values, fit.probability.values[1])
    total = fit.dataset["released_total"].sel(mechanism="add")
    assert total.dims == ("group",)


def test_pca__sel_mechanism_selects_one(results):
    fit = results["pca"]
    assert fit.scree.scree.sel(mechanism="clipped").dims == ("component",)
    assert fit.score.probability.sel(mechanism="geometric").dims == ("group", "y_bin", "x_bin")
