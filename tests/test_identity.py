"""One ledger key per dataset, whatever the spelling (issue 21): the cap cannot be walked around."""

from __future__ import annotations

import os

import pytest
import yaml
from click.testing import CliRunner

from dppca_dask import BudgetError
from dppca_dask.cli import main
from dppca_dask.io.data import describe_source
from dppca_dask.io.datasets import write_demo_dataset
from dppca_dask.io.identity import normalise_location, resolve_dataset
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.ledger import BudgetLedger, dataset_key
from dppca_dask.pipeline.runner import execute


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A small demo store, a symlink to it, and the working directory set to its folder."""
    path = tmp_path / "gau.zarr"
    write_demo_dataset(path, n_per_group=10)
    (tmp_path / "link.zarr").symlink_to(path)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    return path


def _spellings(store) -> list[dict]:
    s = str(store)
    return [
        {"path": s, "array": "X"},
        {"path": s},  # array omitted: the reader picks X
        {"path": s, "array": "X", "columns": ["V1", "V2", "V3"]},
        {"path": s, "columns": [0, 1, 2]},  # by position
        {"path": s, "columns": ["V3", "V1", "V2"]},  # another order
        {"path": s, "columns": ["V7"]},  # a subset
        {"path": "file://" + s},
        {"path": "gau.zarr"},  # relative
        {"path": "./gau.zarr", "array": "X"},
        {"path": s + "/"},  # trailing slash
        {"path": s + "//", "array": "X"},
        {"path": "sub/../gau.zarr"},
        {"path": str(store.parent / "link.zarr")},  # symlink
        {"path": s + "/X"},  # the array node inside the group
        {"path": "./link.zarr/X/", "array": "ignored-for-an-array-node"},
    ]


def test_resolve_dataset__every_spelling_one_key(store):
    spellings = [*_spellings(store), {"path": f"file://localhost{store}", "array": "X"}]
    keys = {resolve_dataset(i["path"], i.get("array")).key for i in spellings}
    assert keys == {f"{os.path.realpath(store)}::X"}
    assert {dataset_key(i["path"], i.get("array"), i.get("columns"))
            for i in spellings} == keys


def test_resolve_dataset__pick_matches_the_reader(store):
    assert resolve_dataset(store).array == describe_source(str(store)).array == "X"


def test_resolve_dataset__other_arrays_and_plain_files_differ(tmp_path, store):
    assert resolve_dataset(store, "group").key == f"{os.path.realpath(store)}::group"
    csv = tmp_path / "x.csv"
    csv.write_text("a\n1\n")
    (tmp_path / "csvlink.csv").symlink_to(csv)
    assert resolve_dataset("x.csv").key == resolve_dataset(tmp_path / "csvlink.csv").key \
        == str(csv.resolve())


def test_normalise_location__remote_urls():
    same = ["s3://bucket/data/x.zarr", "S3://BUCKET/data/x.zarr/", "s3://bucket/data/./x.zarr",
            "s3://bucket//data/x.zarr", "s3://bucket/data/y/../x.zarr"]
    assert {normalise_location(u) for u in same} == {"s3://bucket/data/x.zarr"}
    assert normalise_location("HTTPS://Example.COM/a/./b/") == "https://example.com/a/b"
    assert normalise_location("gs://b/x.zarr/") == "gs://b/x.zarr"
    assert dataset_key("S3://Bucket/x.zarr/", "X") == "s3://bucket/x.zarr::X"


def test_resolve_dataset__memory_store_array_node():
    import numpy as np
    import xarray as xr

    xr.Dataset({"X": (("s", "v"), np.zeros((3, 2)))}).to_zarr("memory://ident.zarr",
                                                              consolidated=False)
    assert resolve_dataset("memory://ident.zarr").key == "memory://ident.zarr::X"
    assert resolve_dataset("MEMORY://ident.zarr/X/").key == "memory://ident.zarr::X"


def _config(tmp_path, source: dict, name: str) -> RunConfig:
    return RunConfig.from_dict({
        "input": source,
        "privacy": {"eps": 1.0, "delta": 1e-6},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(tmp_path / name)},
        "budget_ledger": {"path": str(tmp_path / "ledger.jsonl"),
                          "cap": {"eps": 1.5, "delta": 1e-5}},
    })


def test_cap__refused_for_every_spelling(tmp_path, store):
    execute(_config(tmp_path, {"path": str(store), "array": "X"}, "first"), progress=False)
    ledger_file = tmp_path / "ledger.jsonl"
    before = ledger_file.read_text()
    for i, source in enumerate(_spellings(store)):
        with pytest.raises(BudgetError, match="past the cap"):
            execute(_config(tmp_path, source, f"out{i}"), progress=False)
        assert not (tmp_path / f"out{i}").exists()
    assert ledger_file.read_text() == before  # nothing reserved by the refused runs
    # Through the command line too, with a column subset given by position.
    cfg = _config(tmp_path, {"path": "./link.zarr/", "columns": [3]}, "cli").to_dict()
    (tmp_path / "cli.yaml").write_text(yaml.safe_dump(cfg))
    result = CliRunner().invoke(main, ["run", str(tmp_path / "cli.yaml"), "-q"])
    assert result.exit_code == 1 and "past the cap" in result.output
    assert BudgetLedger(ledger_file).spent(dataset_key(str(store), "X")).eps == 1.0


def test_budget__any_spelling_shows_the_same_history(tmp_path, store):
    execute(_config(tmp_path, {"path": "gau.zarr", "columns": ["V2", "V1"]}, "first"),
            progress=False)
    runner = CliRunner()
    shown = set()
    for spelling in ("gau.zarr", "./gau.zarr/", "file://" + str(store), "link.zarr/X",
                     str(store) + "/X/"):
        result = runner.invoke(main, ["budget", spelling, "--ledger", "ledger.jsonl"])
        assert result.exit_code == 0, result.output
        assert " released " in result.output and "eps = 1, delta = 1e-06" in result.output
        shown.add(result.output)
    assert len(shown) == 1
    other = runner.invoke(main, ["budget", "gau.zarr", "--array", "group", "--ledger",
                                 "ledger.jsonl"])
    assert "No releases recorded" in other.output


def test_ledger__legacy_keys_with_columns_still_count(tmp_path):
    from dppca_dask.privacy.budget import PrivacyBudget

    ledger = BudgetLedger(tmp_path / "l.jsonl")
    key = dataset_key(str(tmp_path / "d.zarr"), "X")
    ledger.reserve(key + "::columns=a,b", PrivacyBudget(1.0, 0.0))  # as older versions wrote
    with pytest.raises(BudgetError, match="past the cap"):
        ledger.reserve(key, PrivacyBudget(1.0, 0.0), cap=PrivacyBudget(1.5, 1e-6))
