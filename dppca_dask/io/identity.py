"""Which dataset a run reads, under one name whatever the spelling: the budget ledger's key.

The persistent ledger (:mod:`dppca_dask.pipeline.ledger`) caps the spend per *dataset*; if two spellings
of one input got two keys, the cap could be walked around. :func:`resolve_dataset` therefore
maps every spelling to one :class:`DatasetIdentity`, reading metadata only (Zarr node types and,
when the array must be picked, xarray's view of the group; never a data value):

* ``file://`` URLs become local paths; local paths are resolved with :func:`os.path.realpath`
  (relative, ``./``, ``..``, trailing slash, symlinks);
* a path to a node inside a Zarr store (an array, or a sub-group) becomes the store root (the
  outermost enclosing Zarr group) plus the node's path inside it;
* the array actually read: the one named, else the one the reader picks (the single 2-D data
  variable of the group, as :func:`dppca_dask.io.data.as_data` does);
* the column selection is *not* part of the key: any subset or order of the columns of one array
  is the same data and spends the same budget;
* remote URLs (``s3://``, ``gs://``, ``http(s)://``, ...) are normalised: lower-case scheme and
  host, no empty or ``.`` segments, ``..`` applied, no trailing slash; the store-root walk uses
  fsspec metadata reads when they are allowed;
* other local files (CSV, Parquet, NetCDF, ``.npy``) are their resolved path.

The key is ``"<location>"`` or ``"<location>::<array path inside the store>"``: the *spelling*
the ledger shows. The ledger's account is the :attr:`DatasetIdentity.dataset_id`:

* the ``dppca_dataset_id`` attribute (:data:`DATASET_ID_ATTR`) of the array read, when it has
  one -- ``dppca-dask convert`` and ``dppca-dask demo`` write a fresh UUID into the store's root
  and its ``X`` array, ``dppca-dask budget adopt`` into an existing store. The id travels with
  the store: a copy made with ``cp -r`` (or ``aws s3 sync``) keeps it, hence keeps the budget;
* else, when only the store root carries one, ``"<root id>/<array path>"``;
* else it is *derived*: ``"derived-"`` and 32 hex digits of the SHA-256 of the canonical key and
  the array's shape (read from its metadata; no shape for files that are not Zarr arrays). A
  derived id changes when the store moves or the array changes shape: adopt such a store to give
  it a stable id (the ledger carries its history over).

A malformed attribute is an :class:`InputError` (it must be a UUID-like string).

:func:`check_output_location` refuses an output directory that is, contains or lies inside a
protected path (the input store, the ledger file) -- the runner, the demo and ``convert`` use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from dppca_dask.errors import DPPCAError, InputError

__all__ = ["DATASET_ID_ATTR", "DatasetIdentity", "check_output_location", "derived_dataset_id",
           "normalise_location", "resolve_dataset", "stamp_dataset_id"]

DATASET_ID_ATTR = "dppca_dataset_id"
"""The Zarr attribute (store root and data array) that names a dataset for the budget ledger."""

_ID_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{7,127}")


@dataclass(frozen=True)
class DatasetIdentity:
    """A dataset's resolved store ``location``, the ``array`` path inside it (or ``None``) and
    its ledger account ``dataset_id`` (``id_source``: ``"attribute"`` or ``"derived"``)."""

    location: str
    array: str | None = None
    local: bool = True
    dataset_id: str = ""
    id_source: Literal["attribute", "derived"] = "derived"
    shape: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not self.dataset_id:
            object.__setattr__(self, "dataset_id", derived_dataset_id(self.key, self.shape))

    @property
    def key(self) -> str:
        return self.location + (f"::{self.array}" if self.array else "")


def derived_dataset_id(key: str, shape: Sequence[int] | None = None) -> str:
    """The id of a dataset without a ``dppca_dataset_id`` attribute: from its key and shape.

    Examples
    --------
    >>> a = derived_dataset_id("s3://bucket/x.zarr::X", (100, 3))
    >>> a.startswith("derived-"), len(a), a == derived_dataset_id("s3://bucket/x.zarr::X", [100, 3])
    (True, 40, True)
    >>> a == derived_dataset_id("s3://bucket/x.zarr::X", (101, 3))
    False
    """
    text = json.dumps([key, None if shape is None else [int(v) for v in shape]])
    return "derived-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _checked_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _ID_RULE.fullmatch(value):
        raise InputError(f"The {DATASET_ID_ATTR!r} attribute of {where} must be a UUID-like "
                         "string (8 to 128 letters, digits, '.', '_', ':' or '-'). "
                         f"Got {value!r} instead.")
    return value


def _is_remote(path: str) -> bool:
    return "://" in path and not path.lower().startswith("file://")


def _file_url_path(url: str) -> str:
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise InputError(f"The 'input.path' file URL {url!r} names a remote host "
                         f"{parts.netloc!r}; only local file:// URLs are supported.")
    return unquote(parts.path) or "/"


def _normalise_url(url: str) -> str:
    parts = urlsplit(url)
    segments: list[str] = []
    for seg in parts.path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if segments:
                segments.pop()
            continue
        segments.append(seg)
    path = "/" + "/".join(segments) if segments else ""
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query,
                       parts.fragment))


def normalise_location(path: str | os.PathLike[str]) -> str:
    """The canonical spelling of a local path or URL (no metadata is read).

    Examples
    --------
    >>> normalise_location("S3://Bucket/data/./x.zarr/")
    's3://bucket/data/x.zarr'
    >>> normalise_location("file:///tmp/../tmp/x.zarr") == os.path.realpath("/tmp/x.zarr")
    True
    """
    text = os.fspath(path)
    if _is_remote(text):
        return _normalise_url(text)
    if text.lower().startswith("file://"):
        text = _file_url_path(text)
    return os.path.realpath(text)


class _Nodes:
    """Zarr node types at paths of one file system (local or fsspec), metadata only."""

    def __init__(self, head: str, storage_options: dict[str, Any] | None) -> None:
        self.head = head
        self.fs: Any = None
        self.unreadable = False
        if head:
            import fsspec

            try:
                self.fs = fsspec.filesystem(urlsplit(head).scheme, **(storage_options or {}))
            except Exception:  # noqa: BLE001 - back-end not installed or bad options: no walk
                self.fs = None
                self.head = ""
                self.unreadable = True

    def _read(self, path: str) -> bytes | None:
        try:
            if self.fs is None:
                with open(path, "rb") as fh:
                    return fh.read()
            return self.fs.cat_file(self.head + path)
        except (OSError, ValueError, KeyError, ImportError):  # absent or not readable: no node
            return None
        except Exception:  # noqa: BLE001 - fsspec back-ends raise their own errors (permissions)
            return None

    def metadata(self, path: str) -> dict[str, Any] | None:
        """The node's metadata (Zarr 3 ``zarr.json``; Zarr 2 ``.zarray``/``.zgroup`` with
        ``.zattrs`` as ``attributes``), or ``None`` when there is no readable node."""
        if self.unreadable:
            return None
        raw = self._read(posixpath.join(path, "zarr.json"))
        if raw is not None:
            try:
                node = json.loads(raw)
            except ValueError:
                return None
            return node if isinstance(node, dict) else None
        for name, kind in ((".zgroup", "group"), (".zarray", "array")):
            raw = self._read(posixpath.join(path, name))
            if raw is None:
                continue
            try:
                node = json.loads(raw)
                attrs = json.loads(self._read(posixpath.join(path, ".zattrs")) or b"{}")
            except ValueError:
                return None
            if not isinstance(node, dict):
                return None
            return {**node, "node_type": kind,
                    "attributes": attrs if isinstance(attrs, dict) else {}}
        return None

    def kind(self, path: str) -> str | None:
        """``"group"``, ``"array"`` or ``None`` for the node at ``path``."""
        node = self.metadata(path)
        kind = None if node is None else node.get("node_type")
        return kind if kind in ("group", "array") else None


def _split(location: str) -> tuple[str, str]:
    """(URL head ``scheme://host`` or ``""``, path part) of a normalised location."""
    if _is_remote(location):
        parts = urlsplit(location)
        return f"{parts.scheme}://{parts.netloc}", parts.path or "/"
    return "", location


def _store_root(location: str, nodes: _Nodes) -> tuple[str, str, str | None]:
    """(store root, path of the node inside it, node kind), walking up enclosing Zarr groups."""
    path = _split(location)[1]
    kind = nodes.kind(path)
    if kind is None:
        return location, "", None
    root, inner = path, ""
    while True:
        parent = posixpath.dirname(root)
        if parent in ("", root) or nodes.kind(parent) != "group":
            break
        base = posixpath.basename(root)
        inner = posixpath.join(base, inner) if inner else base
        root = parent
    head = _split(location)[0]
    return head + ("" if head and root == "/" else root), inner, kind


def _picked_array(path: str, storage_options: dict[str, Any] | None) -> str:
    """The array the reader picks in the Zarr group at ``path`` (the one 2-D data variable)."""
    import xarray as xr
    import zarr

    opts: dict[str, Any] = {"storage_options": storage_options} if storage_options else {}
    store = path if "://" in path else os.path.abspath(path)
    try:
        node = zarr.open_group(store=store, mode="r", **opts)
        consolidated = node.metadata.consolidated_metadata is not None
        try:
            ds = xr.open_zarr(store, chunks={}, consolidated=consolidated, **opts)
            two_d = sorted(str(k) for k, v in ds.data_vars.items() if v.ndim == 2)
        except KeyError:  # no dimension names: the reader wraps every array
            two_d = sorted(str(name) for name, arr in node.arrays() if arr.ndim == 2)
    except DPPCAError:
        raise
    except Exception as exc:  # noqa: BLE001 - unreadable metadata: the reader refuses it too
        raise InputError(f"Cannot tell which array of the Zarr group {path!r} is read "
                         f"({type(exc).__name__}); name it with 'array'.") from None
    if len(two_d) != 1:
        raise InputError(f"Zarr group {path!r} must hold exactly one 2-D array, or 'array' must "
                         f"name one. Found {len(two_d)}.")
    return two_d[0]


def resolve_dataset(path: str | os.PathLike[str], array: str | None = None, *,
                    storage_options: dict[str, Any] | None = None,
                    pick: bool = True) -> DatasetIdentity:
    """The identity of the data read from ``path`` (and ``array``); metadata reads only.

    ``array`` is the array the reader reads in a group (ignored when ``path`` is an array node,
    as the reader ignores it); when it is omitted and ``pick`` is true, the reader's pick is
    looked up. Columns never enter the identity.

    Examples
    --------
    >>> import os, tempfile
    >>> from dppca_dask.io.datasets import write_demo_dataset
    >>> store = write_demo_dataset(os.path.join(tempfile.mkdtemp(), "gau.zarr"), n_per_group=2)
    >>> a = resolve_dataset(store)
    >>> a.array, a == resolve_dataset(store + "/X/") == resolve_dataset("file://" + store, "X")
    ('X', True)
    >>> resolve_dataset("S3://Bucket/x.zarr/", "X", pick=False).key
    's3://bucket/x.zarr::X'
    """
    location = normalise_location(path)
    remote = _is_remote(location)
    nodes = _Nodes(_split(location)[0], storage_options)
    root, inner, kind = _store_root(location, nodes)
    if kind == "array":
        found: str | None = inner or None
    elif kind == "group" or (remote and array):
        if array is None and pick:
            array = _picked_array(location, storage_options)
        if array is None:
            found = inner or None
        else:
            name = posixpath.normpath(array.strip("/"))
            found = posixpath.join(inner, name) if inner else name
    else:
        found = array.strip("/") if array else None
    if kind is None:
        return DatasetIdentity(root, found, local=not remote)
    return _with_id(DatasetIdentity(root, found, local=not remote), nodes)


def _with_id(identity: DatasetIdentity, nodes: _Nodes) -> DatasetIdentity:
    """``identity`` with the dataset id its store's attributes give (or the derived one)."""
    root_path = _split(identity.location)[1]
    node_path = posixpath.join(root_path, identity.array) if identity.array else root_path
    node = nodes.metadata(node_path) or {}
    shape = node.get("shape") if node.get("node_type") == "array" else None
    shape_t = tuple(int(v) for v in shape) if isinstance(shape, list) else None
    attrs = node.get("attributes") or {}
    if isinstance(attrs, dict) and attrs.get(DATASET_ID_ATTR) is not None:
        value = _checked_id(attrs[DATASET_ID_ATTR], f"the Zarr node {identity.key!r}")
        return DatasetIdentity(identity.location, identity.array, identity.local, value,
                               "attribute", shape_t)
    if identity.array:
        root = nodes.metadata(root_path) or {}
        attrs = root.get("attributes") or {}
        if isinstance(attrs, dict) and attrs.get(DATASET_ID_ATTR) is not None:
            value = _checked_id(attrs[DATASET_ID_ATTR], f"the Zarr store {identity.location!r}")
            return DatasetIdentity(identity.location, identity.array, identity.local,
                                   f"{value}/{identity.array}", "attribute", shape_t)
    return DatasetIdentity(identity.location, identity.array, identity.local, shape=shape_t)


def stamp_dataset_id(store: str | os.PathLike[str], array: str | None = "X", *,
                     dataset_id: str | None = None,
                     storage_options: dict[str, Any] | None = None) -> str:
    """Write ``dataset_id`` (default: a fresh UUID) as the :data:`DATASET_ID_ATTR` attribute of
    the Zarr store root at ``store`` and of its ``array`` (``None``: the root only); return it.

    Only the attributes change (a metadata write); callers check first that the store has no
    id (``dppca-dask budget adopt`` refuses a store that has one).
    """
    import zarr

    value = _checked_id(dataset_id or str(uuid.uuid4()), "the new dataset id")
    text = os.fspath(store)
    opts: dict[str, Any] = {"storage_options": storage_options} if storage_options else {}
    target = text if "://" in text else os.path.abspath(text)
    try:
        root = zarr.open(store=target, mode="r+", **opts)
        if array and isinstance(root, zarr.Group):
            root[array].attrs[DATASET_ID_ATTR] = value
        if DATASET_ID_ATTR not in root.attrs:
            root.attrs[DATASET_ID_ATTR] = value
    except DPPCAError:
        raise
    except Exception as exc:  # noqa: BLE001 - not a writable Zarr group, or no such array
        raise InputError(f"Cannot write the {DATASET_ID_ATTR!r} attribute into the Zarr store "
                         f"{text!r}" + (f" (array {array!r})" if array else "")
                         + f": {type(exc).__name__}: {exc}") from None
    return value


def _relation(output: str, protected: str) -> str | None:
    if output == protected:
        return "equal to"
    common = os.path.commonpath([output, protected])
    if common == protected:
        return "inside"
    if common == output:
        return "a folder containing"
    return None


def check_output_location(output: str | os.PathLike[str], protected: Sequence[tuple[str, str]],
                          *, parameter: str, owner: str,
                          cls: type[DPPCAError] = InputError) -> str:
    """Refuse an output path that is, contains or lies inside any ``(label, path)`` protected.

    Symlinks are resolved on both sides; remote protected paths are skipped (a local output cannot
    hold them). Returns the resolved output path.

    Examples
    --------
    >>> check_output_location("/data/out", [("the input store", "/data/x.zarr")],
    ...                       parameter="output.directory", owner="run")
    '/data/out'
    >>> check_output_location("/data", [("the input store", "/data/x.zarr")],
    ...                       parameter="output.directory", owner="run")
    Traceback (most recent call last):
    ...
    dppca_dask.errors.InputError: The 'output.directory' parameter of run must not be equal to, \
inside or a folder containing the input store '/data/x.zarr' (nothing was written or deleted). \
Got '/data' (a folder containing it) instead.
    """
    text = os.fspath(output)
    if _is_remote(text):
        return text
    out = normalise_location(text)
    for label, path in protected:
        if _is_remote(os.fspath(path)):
            continue
        target = normalise_location(path)
        relation = _relation(out, target)
        if relation is not None:
            got = text if out == text else f"{text} (resolved {out})"
            raise cls(owner=owner, parameter=parameter, rule="must not be equal to, inside or "
                      f"a folder containing {label} {target!r} (nothing was written or "
                      "deleted)", got=f"{got!r} ({relation} it)")
    return out
