"""One ledger key per dataset, whatever the spelling (issue 21): the cap cannot be walked around."""

from __future__ import annotations

import os

import pytest
import yaml
from click.testing import CliRunner

from dppca_dask import BudgetError, InputError
from dppca_dask.cli import main
from dppca_dask.io.data import describe_source
from dppca_dask.io.datasets import write_demo_dataset
from dppca_dask.io.identity import normalise_location, resolve_dataset
from dppca_dask.pipeline.budget_cap import Cap
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.pipeline.runner import execute, plan_run
from dppca_dask.privacy.composition import compose


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
    identities = {resolve_dataset(i["path"], i.get("array")) for i in spellings}
    assert {i.key for i in identities} == {f"{os.path.realpath(store)}::X"}
    assert len({i.dataset_id for i in identities}) == 1  # columns never enter it


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
    assert resolve_dataset("S3://Bucket/x.zarr/", "X", pick=False).key == "s3://bucket/x.zarr::X"


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
    })


def test_cap__refused_for_every_spelling(tmp_path, store, ledger_path):
    ledger = Ledger(ledger_path)
    first = _config(tmp_path, {"path": str(store), "array": "X"}, "first")
    records = list(plan_run(first).release.records)
    one, two = (compose(records * m).tight_eps(1e-5) for m in (1, 2))
    ledger.set_cap(resolve_dataset(store), Cap((one + two) / 2, 1e-5))  # admits one release
    execute(first, progress=False)
    for i, source in enumerate(_spellings(store)):
        with pytest.raises(BudgetError, match="past the custodian's cap"):
            execute(_config(tmp_path, source, f"out{i}"), progress=False)
        assert not (tmp_path / f"out{i}").exists()
    assert len(ledger.reservations()) == 1  # nothing reserved by the refused runs
    # Through the command line too, with a column subset given by position.
    cfg = _config(tmp_path, {"path": "./link.zarr/", "columns": [3]}, "cli").to_dict()
    (tmp_path / "cli.yaml").write_text(yaml.safe_dump(cfg))
    result = CliRunner().invoke(main, ["run", str(tmp_path / "cli.yaml"), "-q"])
    assert result.exit_code == 1 and "past the custodian's cap" in result.output
    assert ledger.spent(resolve_dataset(store).dataset_id).basic_eps == 1.0


def test_budget__any_spelling_shows_the_same_history(tmp_path, store):
    execute(_config(tmp_path, {"path": "gau.zarr", "columns": ["V2", "V1"]}, "first"),
            progress=False)
    runner = CliRunner()
    shown = set()
    for spelling in ("gau.zarr", "./gau.zarr/", "file://" + str(store), "link.zarr/X",
                     str(store) + "/X/", resolve_dataset(store).dataset_id):
        result = runner.invoke(main, ["budget", spelling])
        assert result.exit_code == 0, result.output
        assert " released; " in result.output
        assert "basic composition eps = 1, delta = 1e-06" in result.output
        shown.add(result.output)
    assert len(shown) == 1
    other = runner.invoke(main, ["budget", "gau.zarr", "--array", "group"])
    assert other.exit_code == 1 and "has no entry in the budget ledger" in other.output


def test_dataset_id__written_by_convert_and_demo_and_kept_by_a_copy(tmp_path, store):
    import json
    import shutil

    from dppca_dask.io.convert import convert

    ident = resolve_dataset(store)
    assert ident.id_source == "attribute" and ident.shape == (50, 20)
    attrs = json.loads((store / "zarr.json").read_text())["attributes"]
    assert attrs["dppca_dataset_id"] == ident.dataset_id
    shutil.copytree(store, tmp_path / "copy.zarr")  # cp -r: the same dataset, the same budget
    copy = resolve_dataset(tmp_path / "copy.zarr")
    assert copy.dataset_id == ident.dataset_id and copy.key != ident.key
    assert resolve_dataset(store, "group").dataset_id == f"{ident.dataset_id}/group"
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n1,2\n3,5\n4,4\n")
    first = resolve_dataset(convert(csv, tmp_path / "x.zarr"))
    again = resolve_dataset(convert(csv, tmp_path / "y.zarr"))
    assert first.id_source == "attribute" and first.dataset_id != again.dataset_id
    replaced = resolve_dataset(convert(csv, tmp_path / "x.zarr", overwrite=True))
    assert replaced.dataset_id == first.dataset_id  # overwrite keeps the spent budget


def test_dataset_id__derived_without_an_attribute(tmp_path):
    import numpy as np
    import xarray as xr

    path = tmp_path / "plain.zarr"
    xr.Dataset({"X": (("s", "v"), np.zeros((4, 2)))}).to_zarr(path, consolidated=False)
    ident = resolve_dataset(path)
    assert ident.id_source == "derived" and ident.dataset_id.startswith("derived-")
    assert ident.dataset_id == resolve_dataset(f"file://{path}/X").dataset_id
    bigger = tmp_path / "bigger" / "plain.zarr"
    xr.Dataset({"X": (("s", "v"), np.zeros((5, 2)))}).to_zarr(bigger, consolidated=False)
    assert resolve_dataset(bigger).dataset_id != ident.dataset_id
    csv = tmp_path / "x.csv"
    csv.write_text("a\n1\n")
    assert resolve_dataset(csv).dataset_id.startswith("derived-")
    import zarr

    zarr.open_group(path, mode="r+")["X"].attrs["dppca_dataset_id"] = 7
    with pytest.raises(InputError, match="'dppca_dataset_id' attribute .* must be a UUID-like"):
        resolve_dataset(path)
