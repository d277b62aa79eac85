"""Smoke tests of benchmarks: kendall.py and exact_noise.py --quick run every section; scale.py's
graphs and their no-op copies. No timing assertions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import cloudpickle
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kendall.py"


@pytest.mark.slow
def test_benchmark_kendall__quick_mode_runs_every_section(capsys):
    spec = importlib.util.spec_from_file_location("bench_kendall", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_kendall"] = bench
    try:
        spec.loader.exec_module(bench)
        cloudpickle.register_pickle_by_value(bench)  # workers cannot import it by name
        rows = bench.main(["--quick"])
    finally:
        del sys.modules["bench_kendall"]
    sections = {row[0] for row in rows}
    assert sections == {"dgemm", "roofline", "kernel", "dask", "ooc", "blocks", "total"}
    ooc = [row for row in rows if row[0] == "ooc"]
    assert ooc[0][3].endswith("identical: True")  # out-of-core output = in-memory output
    out = capsys.readouterr().out
    assert "fused/unfused p=50" in out and "pair_block=512" in out


def test_benchmark_scale__graphs_and_their_no_op_copies(tmp_path):
    """benchmarks/scale.py's graph part at a small n: the no-op copy has the graph's keys and
    dependencies and runs to the same keys; the kept-scores round has far fewer tasks."""
    import dask

    from tests.helpers import benchmark_module

    with benchmark_module("scale", "bench_scale") as bench:
        x = bench.empty_store(tmp_path / "v.zarr", 200_000, 10, 4096)
        built = bench.build_graphs(x, 3)
        tasks = {}
        for name, (obj, _) in built.items():
            graph, keys = bench.materialize(obj)
            noops = bench.noop_graph(graph)
            assert noops.keys() == graph.keys()
            assert dask.get(noops, keys) in (None, [None], (None,))
            tasks[name] = len(graph)
    assert tasks["one round on the kept scores"] * 5 < tasks["one round on X (before)"]


@pytest.mark.slow
def test_benchmark_exact_noise__quick_mode_prints_every_cell(capsys):
    spec = importlib.util.spec_from_file_location(
        "bench_exact_noise", SCRIPT.parent / "exact_noise.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    lines = bench.main(["--quick"])
    rows = [line for line in lines if line.startswith(("| gaussian", "| laplace"))]
    assert len(rows) == 12 and all(row.count("|") == 9 for row in rows)
    assert "single-value gaussian_release, csprng" in capsys.readouterr().out


def test_benchmark_kendall_microkernel__prototypes_equal_the_production_weights():
    """benchmarks/kendall_microkernel.py --quick: its numba prototypes give the production weight
    pass's weights bit for bit, so its speed ratios compare equal work."""
    from tests.helpers import benchmark_module

    with benchmark_module("kendall_microkernel", "bench_microkernel") as bench:
        rows = bench.main(["--quick"])
    protos = {row[1]: row for row in rows if row[0] == "prototype"}
    assert set(protos) == {"p=10 rows", "p=10 registers", "p=10 reciprocal"}
    assert protos["p=10 rows"][3] == protos["p=10 registers"][3] == "weights identical: True"
    assert float(protos["p=10 reciprocal"][3].split()[-1]) < 1e-14  # a few ulps from 1/d
    assert {row[0] for row in rows} == {"steps", "prototype", "asm", "load"}
