"""Kept scores (graph/kept_scores.py): the passes after the directions read Y = X·V, kept once,
instead of X -- bit-identical releases, one more pass, no read of X after it."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

from dppca_dask import (
    clipped_control,
    dp_pca,
    dp_score,
    dp_scree,
    huber_control,
    pmwm_control,
    privacy_control,
)
from dppca_dask.errors import ConfigError
from dppca_dask.graph import kept_scores
from dppca_dask.graph.kept_scores import keep_decision, keep_scores
from dppca_dask.graph.passes import Leaves, row_block_sum
from dppca_dask.graph.passlog import record_passes
from dppca_dask.kernels.scores import project
from dppca_dask.pca.pca import plan_pca
from dppca_dask.privacy.budget import resolve_budget
from tests.helpers import write_store

PC = privacy_control(eps=6, delta=1e-4)
CONTROLS = {"clipped": clipped_control(C_clip=40),
            "pmwm": pmwm_control(a=0, b=40, trim_const=5, eta=0.01),
            "huber": huber_control(k_min_m2=-6, k_max_m2=8, m2_frac=0.25, M=4)}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(31)
    x = rng.normal(size=(600, 7)) * [3.0, 2.0, 1.5, 1.0, 0.7, 0.5, 0.3]
    x[::5] += 4.0  # an offset cluster
    return x


def _values(fit):
    """Every data variable of every part (the private values and their labels)."""
    parts = {"": fit} if not hasattr(fit, "loading") else {
        "loading": fit.loading, "scree": fit.scree, "score": fit.score}
    return {f"{name}/{var}": part.dataset[var].values
            for name, part in parts.items() for var in part.dataset.data_vars}


def _same(a, b):
    va, vb = _values(a), _values(b)
    assert va.keys() == vb.keys()
    for key in va:
        np.testing.assert_array_equal(va[key], vb[key], err_msg=key)


def _fit(keep, fn, *args, **kwargs):
    with dask.config.set({"dppca.scores.keep": keep}):
        return fn(*args, **kwargs)


def test_project__integer_positions_select_kept_columns_bit_for_bit(data):
    v = np.linalg.qr(np.random.default_rng(1).normal(size=(7, 4)))[0]
    y = project(data, v)
    for cols in ([0, 1], [3], [2, 0]):
        np.testing.assert_array_equal(project(y, np.array(cols)), project(data, v[:, cols]))


@pytest.mark.parametrize("sizes", [(7,) * 85 + (5,), (1,), (1, 2, 3, 1), (5,) * 9, (40,) * 64,
                                   (13,) * 70])
@pytest.mark.parametrize("group", [8, 64])
def test_row_block_sum__groups_of_leaves_sum_bit_for_bit(sizes, group):
    rng = np.random.default_rng(sum(sizes))
    y = rng.standard_cauchy(size=(sum(sizes), 3)) * 10.0 ** rng.integers(-8, 8, size=3)
    leaves = Leaves(sizes, group)
    fine = da.from_array(y, chunks=(sizes, 3))
    coarse = da.from_array(y, chunks=(leaves.blocks(), 3))

    def fn(block, start, scale):  # float sums that depend on the order and on the start
        return (block * scale).sum(axis=0) + start, np.array([len(block)])

    want = dask.compute(row_block_sum(fine, fn, 1.7, with_start=True))[0]
    got = dask.compute(row_block_sum(coarse, fn, 1.7, with_start=True, leaves=leaves))[0]
    for a, b in zip(want, got, strict=True):
        np.testing.assert_array_equal(a, b)
    assert got[1].item() == sum(sizes)


def test_row_block_sum__blocks_that_are_not_groups_of_the_leaves_are_refused():
    x = da.ones((10, 1), chunks=5)
    with pytest.raises(RuntimeError, match="not groups of the leaves"):
        row_block_sum(x, np.sum, leaves=Leaves((2,) * 5, 8))


@pytest.mark.parametrize(("frame", "methods", "chunks", "block_bytes"), [
    ("ranged", ("clipped",), (77, 7), None),
    ("capped", ("clipped", "pmwm"), (50, 3), None),
    ("durfee", ("huber",), (601, 7), None),
    ("smooth", ("pmwm",), (123, 4), None),
    ("ranged", ("clipped", "pmwm", "huber"), (7, 7), 8 * 7 * 3 * 8),  # groups of 8 blocks
    ("capped", ("huber",), (3, 2), 8 * 3 * 3 * 64),  # groups of 64, the last one partial
])
def test_dp_pca__kept_scores_give_the_release_bit_for_bit(data, frame, methods, chunks,
                                                          block_bytes, monkeypatch):
    if block_bytes is not None:
        monkeypatch.setattr(kept_scores, "KEPT_BLOCK_BYTES", block_bytes)
    groups = np.repeat(["a", "b", "c"], 200)
    kwargs = {"privacy": PC, "k": 3, "frame": frame, "group": groups, "rng": 13,
              "scree_method": list(methods), "scree_control": {m: CONTROLS[m] for m in methods},
              "non_private": True}
    x = da.from_array(data, chunks=chunks)
    apart = _fit(False, dp_pca, x, **kwargs)
    kept = _fit(True, dp_pca, x, **kwargs)
    _same(apart, kept)
    assert kept.metadata["passes"] == apart.metadata["passes"] + 1
    if block_bytes is not None:  # the kept blocks were groups of several of X's blocks
        width = max(3, *kwargs.get("axes", (1, 2)))
        group = kept_scores.leaf_group(chunks[0], width)
        assert 1 < group < len(x.chunks[0])


def test_dp_pca__kept_scores_from_a_zarr_store_with_stored_groups(tmp_path, data):
    labels = np.where(np.arange(600) % 3 == 0, 1.0, 2.0)
    store = write_store(tmp_path / "in.zarr", data, chunk=90, labels={"g": labels})
    kwargs = {"privacy": PC, "k": 2, "group": "g", "rng": 3,
              "scree_control": CONTROLS["clipped"]}

    def fit(keep):
        return _fit(keep, dp_pca, xr.open_zarr(store, consolidated=False), **kwargs)

    apart, kept = fit(False), fit(True)
    assert kept.score.groups == ["1.0", "2.0"]
    _same(apart, kept)


def test_dp_scree_and_dp_score__kept_scores_give_the_release_bit_for_bit(data):
    x = da.from_array(data, chunks=(101, 7))
    scree = {"privacy": PC, "k": 4, "method": ["clipped", "huber"], "rng": 5,
             "control": {"clipped": CONTROLS["clipped"], "huber": CONTROLS["huber"]}}
    _same(_fit(False, dp_scree, x, **scree), _fit(True, dp_scree, x, **scree))
    score = {"privacy": PC, "axes": (2, 3), "frame": "ranged", "rng": 6}
    _same(_fit(False, dp_score, x, **score), _fit(True, dp_score, x, **score))


class _CountingArray:
    """An array-like whose every block read is counted (per computation, by the pass log)."""

    def __init__(self, values):
        self.values, self.reads = values, 0
        self.shape, self.dtype, self.ndim = values.shape, values.dtype, values.ndim

    def __getitem__(self, key):
        self.reads += 1
        return self.values[key]


def test_dp_pca__after_the_keeping_pass_no_pass_reads_x(data):
    source = _CountingArray(data)
    reads = []
    with record_passes(lambda record: reads.append(source.reads)) as passes:
        fit = _fit(True, dp_pca, da.from_array(source, chunks=(100, 7)), privacy=PC, k=2,
                   frame="ranged", rng=8, scree_control=CONTROLS["clipped"])
    assert len(passes) == fit.metadata["passes"] == 1 + 1 + 4  # Kendall, keep, 4 rounds
    assert passes[1].outputs == ("scores on the released directions, kept on the workers",)
    per_pass = np.diff([0, *reads])
    assert per_pass[1] >= 6 and not per_pass[2:].any(), per_pass  # 6 blocks, then none


def test_plan_pca__counts_the_keeping_pass_as_the_fit_makes_it(data):
    budget = resolve_budget(PC, owner="dp_pca")
    for keep in (False, True):
        with dask.config.set({"dppca.scores.keep": keep}):
            plan = plan_pca(600, 7, budget, k=2, controls={"clipped": CONTROLS["clipped"]})
            fit = dp_pca(data, privacy=PC, k=2, scree_control=CONTROLS["clipped"], rng=2)
        assert plan.passes == fit.metadata["passes"]


def test_keep_decision__auto_keeps_large_inputs_read_twice_or_more():
    assert keep_decision(10**7, 50, 5, rounds=4)
    assert not keep_decision(10**7, 50, 5, rounds=1)  # one pass: keeping would add one
    assert not keep_decision(1000, 50, 5, rounds=4)  # small input: a pass costs more
    with dask.config.set({"dppca.scores.keep-max-bytes": "1 MiB"}):
        assert not keep_decision(10**7, 50, 5, rounds=4)  # Y (400 MB) above the limit
    with dask.config.set({"dppca.scores.keep-min-bytes": "1 kB"}):
        assert keep_decision(1000, 50, 5, rounds=2)
    with dask.config.set({"dppca.scores.keep": "true"}):
        assert keep_decision(10, 2, 2, rounds=2) and not keep_decision(10, 2, 2, rounds=1)
    with dask.config.set({"dppca.scores.keep": "false"}):
        assert not keep_decision(10**7, 50, 5, rounds=4)


def test_keep_decision__a_bad_setting_is_a_clear_error():
    with dask.config.set({"dppca.scores.keep": "sometimes"}), \
            pytest.raises(ConfigError, match="dppca.scores.keep must be 'auto', true or false"):
        keep_decision(10, 2, 2, rounds=2)


def test_keep_scores__keys_are_those_of_its_input_and_directions(data):
    v = np.eye(7)[:, :2]
    with dask.config.set({"dppca.scores.keep": True}):
        a = keep_scores(da.from_array(data, chunks=100), v, rounds=2)
        b = keep_scores(da.from_array(data + 1, chunks=100), v, rounds=2)
    assert a.kept and b.kept and a.array.name != b.array.name


def test_dp_pca__kept_on_a_connected_cluster_give_the_release_bit_for_bit(data):
    from dppca_dask.pipeline.cluster import connect
    from dppca_dask.pipeline.cluster_config import LocalClusterConfig

    x = da.from_array(data, chunks=(70, 7))
    kwargs = {"privacy": PC, "k": 3, "frame": "ranged", "rng": 21,
              "scree_control": CONTROLS["clipped"]}
    local = LocalClusterConfig(kind="local", n_workers=2, processes=False, dashboard=False)
    with connect(local, progress=False), record_passes() as passes:
        kept = _fit(True, dp_pca, x, **kwargs)
    assert passes[1].outputs == ("scores on the released directions, kept on the workers",)
    _same(_fit(False, dp_pca, x, **kwargs), kept)


def test_persist__a_failing_task_on_a_connected_cluster_raises_its_error():
    from dppca_dask.graph.compute import persist
    from dppca_dask.pipeline.cluster import connect
    from dppca_dask.pipeline.cluster_config import LocalClusterConfig

    def fail(block):
        raise ConfigError("a task failed")

    local = LocalClusterConfig(kind="local", n_workers=1, processes=False, dashboard=False)
    with connect(local, progress=False), pytest.raises(ConfigError, match="a task failed"):
        persist(da.ones(4, chunks=2).map_blocks(fail, dtype=float))
