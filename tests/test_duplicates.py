"""Duplicate rows (issue 16 item 5): one line naming how many and which rows, never values;
convert --check-duplicates / --drop-duplicates."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from dppca_dask.cli import main
from dppca_dask.io.data import as_data
from dppca_dask.io.duplicates import RowIndex, duplicate_pairs, find_duplicates, row_hashes


@pytest.fixture
def iris_like(tmp_path) -> Path:
    """150 rows x 4 measurements with one repeated row (iris has one: 143 repeats 102)."""
    rng = np.random.default_rng(7)
    x = np.round(rng.normal(5.0, 1.0, size=(150, 4)), 3) + np.arange(150)[:, None] * 1e-3
    x[142] = x[101]
    frame = pd.DataFrame(x, columns=["sepal_length", "sepal_width", "petal_length",
                                     "petal_width"])
    frame["species"] = np.repeat(["setosa", "versicolor", "virginica"], 50)
    path = tmp_path / "iris.csv"
    frame.to_csv(path, index=False)
    return path


def test_duplicate_pairs__first_occurrence_and_order():
    x = np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0], [-0.0, 1.0], [1.0, 2.0], [3.0, 3.0]])
    dup, first = duplicate_pairs(row_hashes(x))
    assert dup.tolist() == [2, 3, 4] and first.tolist() == [0, 1, 0]
    found = find_duplicates(x)
    assert found.count == 3 and found.examples == ((2, 0), (3, 1), (4, 0))
    assert find_duplicates(np.eye(3)).count == 0


def test_row_index__streams_blocks_like_one_pass():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, size=(200, 2)).astype(float)  # many repeats
    index = RowIndex()
    masks = [index.add(x[i:i + 37], i) for i in range(0, 200, 37)]
    streamed = index.result()
    whole = find_duplicates(x)
    assert streamed == whole and whole.count == 200 - len(np.unique(x, axis=0))
    kept = x[~np.concatenate(masks)]
    assert len(np.unique(kept, axis=0)) == len(kept)


def test_find_duplicates__dask_array_matches_numpy():
    import dask.array as da

    x = np.random.default_rng(1).normal(size=(50, 3))
    x[[10, 40, 41]] = x[[3, 3, 20]]
    assert find_duplicates(da.from_array(x, chunks=(7, 3))) == find_duplicates(x)
    assert find_duplicates(x).describe().startswith("3 duplicate rows: row 10 repeats row 3, "
                                                     "row 40 repeats row 3, row 41 repeats row 20")


def _config(tmp_path: Path, data: Path, processes: bool = False) -> Path:
    cfg = {"input": {"path": str(data), "group": "species"}, "task": "pca",
           "privacy": {"eps": 1.0, "delta": 1e-5},
           "pca": {"k": 2, "scree_control": {"clipped": {"C_clip": 10}}},
           "cluster": {"kind": "local", "n_workers": 1, "processes": processes},
           "output": {"directory": str(tmp_path / "out")}}
    path = tmp_path / "iris.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_run__duplicates_are_one_line_naming_the_rows(tmp_path, iris_like):
    # through the real entry point, worker processes and all: one line, no Dask log, no trace
    proc = subprocess.run([sys.executable, "-m", "dppca_dask.cli", "run",
                           str(_config(tmp_path, iris_like, processes=True))],
                          capture_output=True, text=True, check=False, timeout=600,
                          env={**os.environ, "PYTHONWARNINGS": "default"})
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines()
             if not line.startswith("Dask dashboard:")]  # the cluster's address, if shown
    assert lines == [
        "Error: The input has 1 duplicate row: row 142 repeats row 101 (rows numbered from 0 in "
        "storage order). The spherical Kendall mechanism is undefined for duplicate "
        "observations: remove them first (dppca-dask convert --drop-duplicates). No budget was "
        "spent."], proc.stderr
    frame = pd.read_csv(iris_like)
    for value in frame.iloc[101, :4]:  # no data value in the message
        assert f"{value}" not in proc.stderr
    assert "Compute Failed" not in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "out").exists()


def test_cli_convert__check_and_drop_duplicates(tmp_path, iris_like):
    runner = CliRunner()
    checked = tmp_path / "checked.zarr"
    result = runner.invoke(main, ["convert", str(iris_like), str(checked), "--group-column",
                                  "species", "--check-duplicates"])
    assert result.exit_code == 0, result.output
    assert ("Warning: 1 duplicate row: row 142 repeats row 101 (rows numbered from 0 in storage "
            "order)") in result.stderr
    assert as_data(str(checked)).n == 150  # reported, kept
    dropped = tmp_path / "dropped.zarr"
    result = runner.invoke(main, ["convert", str(iris_like), str(dropped), "--group-column",
                                  "species", "--drop-duplicates", "--chunk-rows", "40"])
    assert result.exit_code == 0, result.output
    assert "Dropped 1 duplicate row: row 142 repeats row 101" in result.stderr
    src = as_data(str(dropped), group="group")
    assert src.n == 149 and src.array.chunks[0] == (40, 40, 40, 29)
    precise = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    expected = pd.read_csv(iris_like, **precise).drop(index=142)  # exact on pandas < 3 too
    np.testing.assert_array_equal(src.array.compute(), expected.iloc[:, :4].to_numpy())
    assert [str(v) for v in np.asarray(src.groups)] == expected["species"].tolist()
    assert find_duplicates(src.array).count == 0
    clean = runner.invoke(main, ["convert", str(iris_like), str(tmp_path / "again.zarr"),
                                 "--group-column", "species", "--drop-duplicates",
                                 "--check-duplicates"])
    assert clean.exit_code == 0 and "Dropped 1 duplicate row" in clean.stderr
    # the dropped store runs
    cfg = _config(tmp_path, dropped)
    text = yaml.safe_load(cfg.read_text())
    text["input"]["group"] = "group"
    cfg.write_text(yaml.safe_dump(text))
    run = runner.invoke(main, ["run", str(cfg), "-q"])
    assert run.exit_code == 0, run.output
    assert run.stdout.startswith("Wrote ")
