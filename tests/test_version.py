"""``dppca_dask.__version__`` comes from the installed distribution's metadata (issue 16)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np

import dppca_dask
from dppca_dask import _version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_version__matches_the_installed_distribution():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert project["name"] == _version.DISTRIBUTION
    assert dppca_dask.__version__ == importlib.metadata.version(project["name"])
    assert dppca_dask.__version__ != _version.UNKNOWN_VERSION  # the test env installs it
    assert re.fullmatch(r"\d+(\.\d+)*([.+-]?\w+)*", dppca_dask.__version__)
    assert "__version__" in dppca_dask.__all__


def test_version__results_record_the_same_version():
    fit = dppca_dask.dp_loading(np.array([[1.0, 2.0], [2.0, 0.5], [0.0, 1.0], [3.0, 1.5]]),
                                privacy=dppca_dask.privacy_control(eps=0.5, delta=1e-3), rng=0)
    assert fit.metadata["version"] == dppca_dask.__version__


def test_version__falls_back_when_not_installed(monkeypatch):
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert _version.package_version() == "0+unknown"


def test_version__package_imports_without_metadata():
    """A source tree that is not installed imports with ``__version__ == "0+unknown"``."""
    code = ("import importlib.metadata as m\n"
            "real = m.version\n"
            "def version(name):\n"
            "    if name.replace('-', '_') == 'dppca_dask':\n"
            "        raise m.PackageNotFoundError(name)\n"
            "    return real(name)\n"
            "m.version = version\n"
            "import dppca_dask\nprint(dppca_dask.__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=PYPROJECT.parent)
    assert out.stdout.strip() == "0+unknown"
