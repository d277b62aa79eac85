"""The package layout's rules, checked on the source (issue: one house plan)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dppca_dask"

DRAWS = {"normal", "laplace", "gumbel", "exponential", "integers", "random", "choice",
         "uniform", "standard_normal", "random_raw", "permutation", "shuffle", "geometric",
         "binomial", "poisson"}
# Outside privacy/, only these draw random numbers, and none of them for privacy: synthetic
# samples from released histograms (post-processing), the demo data, the R RNG emulator.
POST_PROCESSING_SAMPLERS = {"pca/sampling.py", "io/datasets.py", "testing.py"}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _draw_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [f"{path.relative_to(PACKAGE)}:{node.lineno} .{node.func.attr}()"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in DRAWS]


def test_layout__noise_is_drawn_only_under_privacy():
    found = [call for path in _modules()
             if path.relative_to(PACKAGE).parts[0] != "privacy"
             and path.relative_to(PACKAGE).as_posix() not in POST_PROCESSING_SAMPLERS
             for call in _draw_calls(path)]
    assert not found, "random draws outside dppca_dask/privacy/:\n" + "\n".join(found)


def test_layout__the_scan_sees_the_draws_it_allows():
    # The scan must be able to fail: it finds the mechanisms' own draws, and every module on the
    # allow list really draws (a stale entry would hide a new sampler under that name).
    assert _draw_calls(PACKAGE / "privacy" / "mechanisms.py")
    assert _draw_calls(PACKAGE / "privacy" / "exact_noise.py")
    assert all(_draw_calls(PACKAGE / p) for p in POST_PROCESSING_SAMPLERS)
