"""The installed version of the package, read from its distribution metadata."""

from __future__ import annotations

from importlib import metadata as importlib_metadata

__all__ = ["DISTRIBUTION", "UNKNOWN_VERSION", "package_version"]

DISTRIBUTION = "dppca_dask"
"""The distribution name in pyproject.toml (``pip install dppca_dask``; also spelled dppca-dask)."""

UNKNOWN_VERSION = "0+unknown"
"""The version reported when the package runs from a source tree that is not installed."""


def package_version(distribution: str = DISTRIBUTION) -> str:
    """The installed version of ``distribution``, or ``"0+unknown"`` when it is not installed.

    >>> package_version() == importlib_metadata.version("dppca-dask")
    True
    >>> package_version("no-such-distribution-dppca")
    '0+unknown'
    """
    try:
        return importlib_metadata.version(distribution)
    except importlib_metadata.PackageNotFoundError:
        return UNKNOWN_VERSION
