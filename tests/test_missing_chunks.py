"""Missing Zarr chunks are an error, never the fill value (issue 21): before and during a pass."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
import zarr
from click.testing import CliRunner
from dask.array.utils import assert_eq
from dask.base import compute
from zarr.storage import LocalStore, WrapperStore

from dppca_dask import InputError, dp_covariance, dp_loading, privacy_control
from dppca_dask.cli import main
from dppca_dask.io.data import as_data, describe_source
from dppca_dask.io.zarr_guard import RULE, ChunkGuardStore, MissingChunkError, check_chunks
from tests.helpers import raise_if_dask_computes

RULE_RE = r"every chunk must be present; missing data is never read as zeros"
X = np.arange(60, dtype=np.float64).reshape(20, 3) % 7 + 1.0  # no zeros: no chunk is skipped


def _write(path: Path, layout: str, x: np.ndarray = X) -> Path:
    """A store of ``x`` in rows of 5 (shards of 10 rows); returns the file of rows 10-14."""
    if layout in ("array_v3", "array_v2", "sharded"):
        fmt = {"zarr_format": 2} if layout == "array_v2" else {}
        shards = {"shards": (10, 3)} if layout == "sharded" else {}
        arr = zarr.create_array(str(path), shape=x.shape, chunks=(5, 3), dtype="f8", **fmt,
                                **shards)
        arr[:] = x
        return path / ("2.0" if layout == "array_v2" else ("c/1/0" if shards else "c/2/0"))
    fmt = 2 if layout == "group_v2" else 3
    ds = xr.Dataset({"X": (("sample", "variable"), x),
                     "g": (("sample",), np.array(list("ab") * (len(x) // 2), dtype=object))},
                    coords={"variable": np.array(["a", "b", "c"], dtype=object)})
    with warnings.catch_warnings():  # zarr: no v3 spec for fixed-length strings (labels)
        warnings.simplefilter("ignore")
        ds.to_zarr(path, mode="w", consolidated=False, zarr_format=fmt,
                   encoding={"X": {"chunks": (5, 3)}, "g": {"chunks": (5,)}})
    return path / "X" / ("2.0" if fmt == 2 else "c/2/0")


LAYOUTS = ["array_v3", "array_v2", "sharded", "group_v3", "group_v2"]


@pytest.fixture(params=LAYOUTS)
def store(request, tmp_path) -> tuple[Path, Path, str]:
    chunk = _write(tmp_path / "data.zarr", request.param)
    assert chunk.is_file()
    return tmp_path / "data.zarr", chunk, request.param


def _one_line(message: str) -> None:
    assert "\n" not in message.strip()
    assert "Traceback" not in message


def test_as_data__missing_chunk_is_an_error_before_any_pass(store):
    path, chunk, layout = store
    chunk.unlink()
    word = "Shard" if layout == "sharded" else "Chunk"
    key = "c/1/0" if layout == "sharded" else ("2.0" if layout.endswith("v2") else "c/2/0")
    where = "of Zarr array" if layout.startswith("array") or layout == "sharded" else (
        "of array 'X' of Zarr group")
    with raise_if_dask_computes(), pytest.raises(MissingChunkError) as info:
        as_data(str(path))
    message = str(info.value)
    assert message.startswith(f"{word} '{key}' {where} '{path}' is missing; ")
    assert RULE in message and "write_empty_chunks=True" in message
    _one_line(message)
    with raise_if_dask_computes(), pytest.raises(InputError, match=RULE_RE):
        describe_source(str(path))  # what `plan` reads: refused too, from metadata alone


def test_as_data__chunk_deleted_after_the_check_is_never_read_as_zeros(store):
    path, chunk, layout = store
    src = as_data(str(path))
    assert_eq(src.array, X)
    chunk.unlink()  # after as_data returned, before the pass
    with pytest.raises(MissingChunkError, match=RULE_RE) as info:
        compute(src.array)
    message = str(info.value)
    assert "disappeared after the input was checked" in message
    assert ("array 'X' of Zarr group" in message) == layout.startswith("group")
    _one_line(message)


@pytest.mark.parametrize("fmt", [2, 3])
def test_as_data__missing_group_label_or_coordinate_chunk(tmp_path, fmt):
    path = tmp_path / "data.zarr"
    _write(path, f"group_v{fmt}")
    g_chunk = path / "g" / ("1" if fmt == 2 else "c/1")
    g_chunk.unlink()
    as_data(str(path), array="X")  # the labels are not used: not checked
    with pytest.raises(MissingChunkError, match=r"of array 'g' of Zarr group .* is missing"):
        as_data(str(path), array="X", group="g")
    (path / "variable" / ("0" if fmt == 2 else "c/0")).unlink()
    with pytest.raises(MissingChunkError, match=RULE_RE):  # variable names: read at open
        as_data(str(path), array="X")


def test_estimators__missing_chunk_is_refused_before_a_pass(tmp_path):
    path = tmp_path / "data.zarr"
    _write(path, "array_v3").unlink()
    with raise_if_dask_computes(), pytest.raises(InputError, match=RULE_RE):
        dp_loading(str(path), privacy=privacy_control(eps=1.0, delta=1e-5), rng=1)
    with raise_if_dask_computes(), pytest.raises(InputError, match=RULE_RE):
        dp_covariance(str(path), preset="seed", rho=1.0, bounds=10.0, rng=1)


def test_estimators__chunk_deleted_during_the_pass(tmp_path, monkeypatch):
    path = tmp_path / "data.zarr"
    chunk = _write(path, "array_v3")
    chunk.unlink()
    monkeypatch.setattr("dppca_dask.io.data.check_chunks", lambda arr, label: None)  # "after" it
    with pytest.raises(MissingChunkError, match="disappeared after the input was checked"):
        dp_covariance(str(path), rho=1.0, bounds=10.0, method="diagonal", rng=1)
    with pytest.raises(MissingChunkError, match=RULE_RE):
        dp_loading(str(path), privacy=privacy_control(eps=1.0, delta=1e-5), rng=1)


def test_as_data__intact_store_with_fill_value_zero(tmp_path):
    x = X.copy()
    x[5:10] = 0.0  # one chunk equals the fill value
    arr = zarr.create_array(str(tmp_path / "a.zarr"), shape=x.shape, chunks=(5, 3), dtype="f8",
                            fill_value=0.0, config={"write_empty_chunks": True})
    arr[:] = x
    assert arr.fill_value == 0 and arr.nchunks_initialized == arr.nchunks
    assert_eq(as_data(str(tmp_path / "a.zarr")).array, x)
    skipped = zarr.create_array(str(tmp_path / "b.zarr"), shape=x.shape, chunks=(5, 3),
                                dtype="f8")
    skipped[:] = x  # zarr's default: the all-zero chunk is not stored
    with pytest.raises(MissingChunkError, match=r"Chunk 'c/1/0' .*write_empty_chunks=True"):
        as_data(str(tmp_path / "b.zarr"))


def test_check_chunks__is_structural_and_reads_no_chunk(tmp_path):
    """The check lists the store; it never asks for a chunk's bytes."""

    class NoChunkReads(WrapperStore):
        async def get(self, key, prototype, byte_range=None):
            if not key.endswith(("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")):
                raise AssertionError(f"read {key}")
            return await self._store.get(key, prototype, byte_range)

    for layout in ("array_v3", "array_v2", "sharded"):
        path = tmp_path / layout
        chunk = _write(path, layout)
        arr = zarr.open_array(NoChunkReads(LocalStore(str(path), read_only=True)), mode="r")
        check_chunks(arr, str(path))
        chunk.unlink()
        with pytest.raises(MissingChunkError, match=RULE_RE):
            check_chunks(arr, str(path))
    # Stores other than a local directory: zarr's listing, or one `exists` per key without one.

    class NoListing(WrapperStore):
        supports_listing = False

        def with_read_only(self, read_only: bool = False) -> NoListing:  # zarr < 3.1.6
            return type(self)(self._store.with_read_only(read_only))

    memory = zarr.storage.MemoryStore()
    arr = zarr.create_array(memory, name="x", shape=X.shape, chunks=(5, 3), dtype="f8")
    arr[:] = X
    for wrapped in (memory, NoListing(memory)):
        check_chunks(zarr.open_array(wrapped, path="x", mode="r"), "mem")
    zarr.core.sync.sync(memory.delete("x/c/3/0"))
    for wrapped in (memory, NoListing(memory)):
        with pytest.raises(MissingChunkError, match=r"Chunk 'c/3/0' of array 'x' of Zarr group"):
            check_chunks(zarr.open_array(wrapped, path="x", mode="r"), "mem")
    # Only the keys of the grid count: a stray file does not stand in for a missing chunk.
    (tmp_path / "array_v3" / "c" / "9").mkdir()
    (tmp_path / "array_v3" / "c" / "9" / "0").write_bytes(b"x")
    with pytest.raises(MissingChunkError, match=r"'c/2/0'"):
        as_data(str(tmp_path / "array_v3"))


def test_chunk_guard_store__pickles_with_its_label(tmp_path):
    import pickle

    _write(tmp_path / "a.zarr", "array_v3")
    src = as_data(str(tmp_path / "a.zarr"))
    back = pickle.loads(pickle.dumps(src.array))
    assert_eq(back, X)
    store = ChunkGuardStore(LocalStore(str(tmp_path)), label="lbl")
    assert pickle.loads(pickle.dumps(store)).label == "lbl"
    assert store.with_read_only(True).label == "lbl"


def _run_config(tmp_path: Path, data: Path, processes: bool) -> Path:
    cfg = {
        "input": {"path": str(data)},
        "task": "covariance",
        "privacy": {"eps": 1.0, "delta": 1e-5},
        "covariance": {"method": "diagonal", "bounds": 10.0},
        "cluster": {"kind": "local", "n_workers": 1, "processes": processes},
        "output": {"directory": str(tmp_path / "out"), "formats": ["zarr"]},
        "rng": 5,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_run__missing_chunk_is_one_line_and_writes_nothing(tmp_path):
    data = tmp_path / "data.zarr"
    _write(data, "array_v2").unlink()
    result = CliRunner().invoke(main, ["run", str(_run_config(tmp_path, data, False)), "-q"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: Chunk '2.0' of Zarr array ")
    assert RULE in result.output
    _one_line(result.output)
    assert not (tmp_path / "out").exists()


def test_cli_run__chunk_deleted_during_the_pass_on_worker_processes(tmp_path, monkeypatch,
                                                                    capfd):
    """The read guard runs in a worker process of the embedded LocalCluster; its InputError
    comes back through the client as the one-line CLI error, and the worker logs nothing."""
    data = tmp_path / "data.zarr"
    _write(data, "group_v3").unlink()
    monkeypatch.setattr("dppca_dask.io.data.check_chunks", lambda arr, label: None)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", str(_run_config(tmp_path, data, True)), "-q"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: Chunk 'c/2/0' of array 'X' of Zarr group ")
    assert "disappeared after the input was checked" in result.output
    _one_line(result.output)
    assert not (tmp_path / "out").exists()
    assert os.path.isdir(data)
    worker_stderr = capfd.readouterr().err  # the worker process writes to the real fd 2
    assert "Compute Failed" not in worker_stderr and "Traceback" not in worker_stderr


def test_as_data__fsspec_url_with_consolidated_metadata():
    import fsspec

    url = "memory://dppca-missing-chunks.zarr"
    ds = xr.Dataset({"X": (("sample", "variable"), X)}, coords={"variable": ["a", "b", "c"]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(url, mode="w", consolidated=True, encoding={"X": {"chunks": (5, 3)}})
    fs = fsspec.filesystem("memory")
    try:
        src = as_data(url)
        fs.rm("/dppca-missing-chunks.zarr/X/c/1/0")
        with pytest.raises(MissingChunkError, match="disappeared after the input was checked"):
            compute(src.array)
        with pytest.raises(MissingChunkError, match=r"Chunk 'c/1/0' of array 'X' of Zarr group "
                                                    r"'memory://dppca-missing-chunks.zarr'"):
            as_data(url)
    finally:
        fs.rm("/dppca-missing-chunks.zarr", recursive=True)
