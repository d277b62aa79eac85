"""The curated public namespace (R12)."""

from __future__ import annotations

import dppca_dask


def test_import_star__all_names_exist():
    namespace: dict = {}
    exec("from dppca_dask import *", namespace)  # noqa: S102 (the star import under test)
    for name in dppca_dask.__all__:
        assert name in namespace, name
    assert len(set(dppca_dask.__all__)) == len(dppca_dask.__all__)


def test_errors__single_hierarchy():
    for name in dppca_dask.__all__:
        obj = getattr(dppca_dask, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and not issubclass(obj, Warning):
            assert issubclass(obj, dppca_dask.DPPCAError), name
            assert issubclass(obj, ValueError), name


_NO_NUMBA = """
import sys, warnings
sys.modules["numba"] = None  # import numba now raises ImportError, as where it is not installed
import numpy as np
import dppca_dask
from dppca_dask.kernels.kendall import tile_reference
from dppca_dask.kernels.kendall_fused import NO_NUMBA_MESSAGE, tile_fused
assert "numba" not in [m for m in sys.modules if sys.modules[m] is not None]
x = np.random.default_rng(0).normal(size=(40, 3))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    s, m = tile_fused(x)
    tile_fused(x)
assert [str(w.message) for w in caught] == [NO_NUMBA_MESSAGE], caught
assert m == 780 and np.allclose(s, tile_reference(x)[0], rtol=0, atol=1e-12 * m)
print("ok")
"""


def test_import__works_without_numba():
    # numba is imported lazily: the package imports without it and the Kendall kernel falls back
    # to the unfused NumPy kernel with one warning (same result).
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _NO_NUMBA], check=False, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_import__numba_not_imported_by_the_package():
    import subprocess
    import sys

    code = "import sys, dppca_dask; print('numba' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr
