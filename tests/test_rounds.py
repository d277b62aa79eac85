"""The one pass protocol (graph/rounds.py) and the computation point it relies on."""

from __future__ import annotations

import dask.array as da
import numpy as np
from dask import delayed

from dppca_dask.graph.compute import compute
from dppca_dask.graph.rounds import DaskBackend, chain, counted, gather, once, run


def test_compute__mixed_collection_kinds_come_back_in_argument_order():
    # dask 2026.8 hands back (a, c, b) for (Delayed a, Array b, Delayed c); compute must not.
    x = da.arange(12.0, chunks=5)
    out = compute(delayed("a"), x.sum(), delayed("c"), x.max(), (delayed("d"), x.min()), 7)
    assert out == ("a", 66.0, "c", 11.0, ("d", 0.0), 7)


def _total(x, log, name):
    (value,) = yield (x.sum(),)
    log.append(name)
    (again,) = yield (x.sum() * 0 + value,)
    log.append(name)
    return float(again)


def test_gather__one_round_for_all_stages_and_values_in_list_order():
    log: list[str] = []
    backend = DaskBackend()
    out = run(gather([_total(da.ones(4, chunks=3), log, "a"),
                      _total(da.arange(4, chunks=3), log, "b")]), backend)
    assert out == [4.0, 6.0]
    assert backend.passes == 2
    assert log == ["a", "b", "a", "b"]  # draws after each round: in list order


def test_chain__one_stage_after_another():
    log: list[str] = []
    backend = DaskBackend()
    out = run(chain([_total(da.ones(4, chunks=3), log, "a"),
                     _total(da.arange(4, chunks=3), log, "b")]), backend)
    assert out == [4.0, 6.0]
    assert backend.passes == 4
    assert log == ["a", "a", "b", "b"]


def test_once_and_counted__empty_requests_cost_no_round():
    backend = DaskBackend()
    assert run(once(), backend) == ()
    assert backend.passes == 0
    (value, rounds) = run(counted(gather([once(da.ones(3).sum()), once()])), backend)
    assert value == [(3.0,), ()]
    assert rounds == 1 and backend.passes == 1


def test_gather__uneven_stages_keep_their_values_apart():
    def short(v):
        (a, b) = yield (v.sum(), v.max())
        return (float(a), float(b))

    def long(v):
        (a,) = yield (v.min(),)
        (b, c, d) = yield (v.sum(), v.sum() + a, v.mean())
        return (float(a), float(b), float(c), float(d))

    x = da.from_array(np.arange(6.0), chunks=4)
    backend = DaskBackend()
    assert run(gather([short(x), long(x)]), backend) == [(15.0, 5.0), (0.0, 15.0, 15.0, 2.5)]
    assert backend.passes == 2
