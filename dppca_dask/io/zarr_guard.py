"""Zarr reads that never turn a missing chunk into the fill value (used by :mod:`dppca_dask.io.data`).

Zarr treats a chunk that is absent from the store as "uninitialised" and reads it as the array's
fill value (0 by default), so a truncated copy, a failed upload or a chunk deleted while a pass
runs would silently become rows of zeros in a release. zarr 3.1 has no option to raise instead,
so this module does two things:

- :func:`check_chunks` (before any pass): one listing of the array's prefix in the store, then
  every key of the chunk grid (the shard grid for sharded arrays) must be in it. Metadata only:
  no chunk is read, and the cost is one listing plus one set look-up per chunk key.
- :class:`ChunkGuardStore` (during the pass): a :class:`zarr.storage.WrapperStore` whose ``get``
  raises :class:`MissingChunkError` where the wrapped store answers "no such key" for anything but
  a metadata document, so a chunk (or shard) that disappears after the check is an error on the
  worker that reads it, never the fill value. Arrays are reopened on it by :func:`guarded`.

Inner chunks that a *present* shard's index marks empty are written that way on purpose by zarr
(chunks equal to the fill value) and are read as the fill value, as zarr specifies.
"""

from __future__ import annotations

import itertools
import math
import os
import posixpath
from collections.abc import AsyncGenerator, Iterable
from typing import Any

from zarr.storage import WrapperStore

from dppca_dask.errors import InputError

__all__ = ["RULE", "ChunkGuardStore", "MissingChunkError", "check_chunks", "describe_array",
           "guarded", "missing_message"]

RULE = "every chunk must be present; missing data is never read as zeros"
_HINT = ("(zarr does not store a chunk that equals the fill value unless it is written with "
         "write_empty_chunks=True)")
_METADATA = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


class MissingChunkError(InputError):
    """A chunk (or shard) of a Zarr input is not in the store."""


def describe_array(label: str, path: str) -> str:
    """How messages name an array: the store itself, or an array inside a group."""
    return f"Zarr array {label!r}" if not path else f"array {path!r} of Zarr group {label!r}"


def missing_message(label: str, path: str, key: str, word: str = "chunk", extra: str = "",
                    hint: bool = False) -> str:
    """The one-line message for a missing chunk: the array, the chunk's key, the rule."""
    where = describe_array(label, path)
    return (f"{word.capitalize()} {key!r} of {where} is missing{extra}; {RULE}"
            + (f" {_HINT}." if hint else "."))


class ChunkGuardStore(WrapperStore):
    """A read-only view of a store whose missing (non-metadata) keys raise instead of ``None``.

    ``label`` is how messages name the store (the path or URL the user gave).
    """

    def __init__(self, store: Any, label: str = "") -> None:
        super().__init__(store)
        self.label = label

    def _with_store(self, store: Any) -> ChunkGuardStore:
        return type(self)(store, self.label)

    def with_read_only(self, read_only: bool = False) -> ChunkGuardStore:
        """The same guard over the wrapped store's read-only (or writable) copy (zarr < 3.1.6's
        WrapperStore does not forward this, and ``mode="r"`` needs it)."""
        return self._with_store(self._store.with_read_only(read_only))

    def _missing(self, key: str) -> MissingChunkError:
        exc = MissingChunkError(f"Chunk {key!r} of the Zarr input {self.label!r} is missing; "
                                f"{RULE}.")
        exc.key = key  # type: ignore[attr-defined]  # for data._read_chunk (same process)
        return exc

    def _check(self, key: str, value: Any) -> Any:
        if value is None and posixpath.basename(key) not in _METADATA:
            raise self._missing(key)
        return value

    async def get(self, key: str, prototype: Any, byte_range: Any = None) -> Any:
        return self._check(key, await self._store.get(key, prototype, byte_range))

    async def get_partial_values(self, prototype: Any,
                                 key_ranges: Iterable[tuple[str, Any]]) -> list[Any]:
        key_ranges = list(key_ranges)
        values = await self._store.get_partial_values(prototype, key_ranges)
        return [self._check(key, v) for (key, _), v in zip(key_ranges, values, strict=True)]

    async def _get_many(self, requests: Iterable[tuple[str, Any, Any]]
                        ) -> AsyncGenerator[tuple[str, Any], None]:
        for key, prototype, byte_range in requests:
            yield key, await self.get(key, prototype, byte_range)

    def __repr__(self) -> str:
        return f"ChunkGuardStore({self._store!r}, label={self.label!r})"


def guarded(node: Any, label: str) -> Any:
    """``node`` (a zarr Array or Group) reopened, read-only, on a :class:`ChunkGuardStore`."""
    import zarr

    store_path = node.store_path
    store = store_path.store
    if not isinstance(store, ChunkGuardStore):
        store = ChunkGuardStore(store, label)
    return zarr.open(store=store, path=store_path.path, mode="r")


def _grid_keys(arr: Any) -> Iterable[str]:
    """Storage keys of every chunk (or shard) of ``arr``, in grid order."""
    block = arr.shards or arr.chunks
    # an empty axis (length 0, whatever its chunk length, even 0) has no chunk
    grid = [range(math.ceil(s / c) if s else 0) for s, c in zip(arr.shape, block, strict=True)]
    encode = arr.metadata.encode_chunk_key
    return (encode(coords) for coords in itertools.product(*grid))


async def _list(store: Any, prefix: str) -> set[str]:
    return {key[len(prefix):] async for key in store.list_prefix(prefix)}


def _listed(store: Any, prefix: str) -> set[str]:
    """Keys under ``prefix``, relative to it: one listing of the store.

    A local directory is walked with :func:`os.walk` (no ``stat`` per file: about twice as fast
    as ``LocalStore.list_prefix`` on 10^5 chunk files); other stores list through zarr.
    """
    from zarr.core.sync import sync
    from zarr.storage import LocalStore

    if not isinstance(store, LocalStore):
        return sync(_list(store, prefix))
    top = os.path.join(str(store.root), *prefix.rstrip("/").split("/"))
    keys: set[str] = set()
    for folder, _, files in os.walk(top, followlinks=True):  # zarr reads through links
        rel = os.path.relpath(folder, top)
        head = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        keys.update(head + name for name in files)
    return keys


async def _absent(store: Any, prefix: str, keys: list[str]) -> list[str]:
    import asyncio

    found = await asyncio.gather(*(store.exists(prefix + k) for k in keys))
    return [k for k, ok in zip(keys, found, strict=True) if not ok]


def check_chunks(arr: Any, label: str) -> None:
    """Raise :class:`MissingChunkError` unless every chunk (shard) key of ``arr`` is stored.

    One listing of the array's prefix (no chunk is read); stores that cannot list are asked
    whether each key exists instead.
    """
    from zarr.core.sync import sync

    store = arr.store_path.store
    store = getattr(store, "_store", store) if isinstance(store, ChunkGuardStore) else store
    path = arr.store_path.path
    prefix = f"{path}/" if path else ""
    keys = _grid_keys(arr)
    if store.supports_listing:
        listed = _listed(store, prefix)
        missing = [k for k in keys if k not in listed]
    else:
        missing = sync(_absent(store, prefix, list(keys)))
    if missing:
        word = "shard" if arr.shards else "chunk"
        total = math.prod(math.ceil(s / c) for s, c in
                          zip(arr.shape, arr.shards or arr.chunks, strict=True))
        extra = f" ({len(missing)} of {total} {word}s missing)" if len(missing) > 1 else ""
        raise MissingChunkError(missing_message(label, path, missing[0], word, extra, hint=True))
