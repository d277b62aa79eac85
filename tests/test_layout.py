"""The package layout's rules, checked on the source (issue: one house plan)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dppca_dask"

DRAWS = {"normal", "laplace", "gumbel", "exponential", "integers", "random", "choice",
         "uniform", "standard_normal", "random_raw", "permutation", "shuffle", "geometric",
         "binomial", "poisson"}
# Outside privacy/, only these draw random numbers, and none of them for privacy: synthetic
# samples from released histograms (post-processing), the demo data, the R RNG emulator, the
# directions' angle bootstrap (post-processing of released eigenvalues, a fixed public stream).
POST_PROCESSING_SAMPLERS = {"results/sampling.py", "io/datasets.py", "testing.py",
                            "results/noise_bootstrap.py"}


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
    # The scan must be able to fail: it finds the mechanisms' own draws (the searches' exponential
    # draws; the other families draw through exact_noise), and every module on the allow list
    # really draws (a stale entry would hide a new sampler under that name).
    assert _draw_calls(PACKAGE / "privacy" / "mechanisms" / "search.py")
    assert _draw_calls(PACKAGE / "privacy" / "exact_noise.py")
    assert all(_draw_calls(PACKAGE / p) for p in POST_PROCESSING_SAMPLERS)


def _imports(path: Path, names: set[str]) -> set[str]:
    """The package modules ``path`` imports, at any depth (function-level imports count too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dppca_dask"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in names else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("dppca_dask"))
    return out & names


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_layout__no_import_cycles():
    modules = {_module_name(p): p for p in _modules()}
    graph = {name: _imports(path, set(modules)) - {name} for name, path in modules.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep):], dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


# The documented layering (docs/HELPERS.md "Layout and layering"): a module imports only from its
# own layer and the layers before it. A layer names the first part of the module path below
# dppca_dask ("" is the curated namespace dppca_dask/__init__.py); a top-level module or package
# in no layer fails the check until it is placed here and in the document.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "_validation", "_rformat", "_typing", "_version", "testing"),  # top-level helpers
    ("privacy",),
    ("kernels",),
    ("graph",),
    ("io",),
    ("results",),
    ("pca",),
    ("covariance",),
    ("plots", "report"),
    ("pipeline",),
    ("", "sklearn", "app", "service", "client"),
    ("cli",),
)
# Upward imports kept on purpose: at most two, each a function-level (lazy) import, with its reason.
UPWARD_EXCEPTIONS = {
    ("dppca_dask.privacy.audit.kendall", "dppca_dask.pca.loading"):
        "the audit of dp_loading's release takes the Kendall matrices of real neighbouring data and "
        "their tight sensitivity from pca.loading (spherical_kendall, kendall_sensitivity), as the "
        "estimator computes them",
    ("dppca_dask.privacy.quantiles", "dppca_dask.kernels.counts"):
        "durfee_upper/durfee_quantile, the in-memory conveniences, count their values with the "
        "data-side kernel; the count-based searches that the estimators run import no kernel",
}


def _layer(module: str) -> int:
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else ""
    for index, layer in enumerate(LAYERS):
        if head in layer:
            return index
    raise AssertionError(f"{module} is in no layer: place it in LAYERS and in docs/HELPERS.md")


def _upward_imports(root: Path = PACKAGE) -> list[tuple[str, str, int, bool]]:
    """(importer, imported, line, lazy) for every import of a module of a later layer, module-level
    and function-level (lazy = inside a function) alike."""
    def name(path: Path) -> str:
        parts = path.relative_to(root.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    paths = {name(p): p for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    found = []
    for importer, path in sorted(paths.items()):
        tree = ast.parse(path.read_text(), filename=str(path))
        lazy = {id(node) for fn in ast.walk(tree)
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
                for node in ast.walk(fn)}
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dppca_dask"):
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths
                           else node.module for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for imported in dict.fromkeys(t for t in targets if t in paths):
                if _layer(imported) > _layer(importer):
                    found.append((importer, imported, node.lineno, id(node) in lazy))
    return sorted(found, key=lambda edge: (edge[0], edge[2]))


def test_layout__imports_go_down_the_layers():
    found = _upward_imports()
    unexpected = [f"{a}:{line} imports {b} (a later layer{', lazily' if lazy else ''})"
                  for a, b, line, lazy in found if (a, b) not in UPWARD_EXCEPTIONS]
    assert not unexpected, "upward imports (docs/HELPERS.md layering):\n" + "\n".join(unexpected)
    assert all(lazy for *_, lazy in found), "an upward exception must stay a function-level import"
    assert {(a, b) for a, b, *_ in found} == set(UPWARD_EXCEPTIONS)  # no stale exception
    assert len(UPWARD_EXCEPTIONS) <= 2 and all(UPWARD_EXCEPTIONS.values())


def test_layout__the_direction_check_can_fail(tmp_path):
    # A copy of two modules with a bad import each: module-level and lazy, both found.
    root = tmp_path / "dppca_dask"
    for module in ("kernels/counts.py", "pca/loading.py", "privacy/probe.py", "io/data.py"):
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text("")
    (root / "kernels" / "counts.py").write_text("from dppca_dask.pca.loading import dp_loading\n")
    (root / "privacy" / "probe.py").write_text(
        "def f():\n    from dppca_dask.io import data\n\n\nfrom dppca_dask.kernels import counts\n")
    assert _upward_imports(root) == [
        ("dppca_dask.kernels.counts", "dppca_dask.pca.loading", 1, False),
        ("dppca_dask.privacy.probe", "dppca_dask.io.data", 2, True),
        ("dppca_dask.privacy.probe", "dppca_dask.kernels.counts", 5, False),
    ]
    (root / "newpackage").mkdir()
    (root / "newpackage" / "mod.py").write_text("from dppca_dask.pca import loading\n")
    with pytest.raises(AssertionError, match="dppca_dask.newpackage.mod is in no layer"):
        _upward_imports(root)


def test_layout__every_result_plot_finds_its_function():
    # The inversion that keeps results/ below plots/: each plots module registers its function
    # (results/plotters.py) and importing the package loads them all (plotter() imports it on
    # first use). Import every result module and the plots package here: in a fresh process
    # (this test alone) nothing else has.
    import importlib

    for module in ("pca", "covariance", "score", "scree", "sampling"):
        importlib.import_module(f"dppca_dask.results.{module}")
    importlib.import_module("dppca_dask.plots")
    from dppca_dask.results.base import Result
    from dppca_dask.results.plotters import plotter, registered_kinds

    def subclasses(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]

    kinds = {cls.kind for cls in subclasses(Result) if cls.kind and "plot" in vars(cls)}
    assert kinds == set(registered_kinds()) == {"covariance", "loading", "pca", "score", "scree"}
    assert all(plotter(kind).__module__ == f"dppca_dask.plots.{kind}" for kind in kinds)


def _private_imports(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dppca_dask"):
                found += [f"{path.relative_to(root)}: {node.module}.{a.name}"
                          for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_layout__no_module_imports_another_modules_private_names(tmp_path):
    assert _private_imports() == []
    (tmp_path / "probe.py").write_text("from dppca_dask.graph.compute import _identity, compute\n")
    assert _private_imports(tmp_path) == ["probe.py: dppca_dask.graph.compute._identity"]


def _cited_documents(root: Path = PACKAGE) -> set[str]:
    import re

    found = set()
    for path in root.rglob("*.py"):
        found |= {m.group(1) for m in re.finditer(
            r"(?<![\w/.-])((?:docs|seeds|deploy|benchmarks|configs)/[\w./-]+\.(?:md|txt|yaml))",
            path.read_text())}
    return found


def test_layout__every_document_a_docstring_cites_is_in_the_repository():
    repo = PACKAGE.parent
    cited = _cited_documents()
    assert len(cited) > 10  # the scan sees the citations
    assert sorted(ref.rstrip(".") for ref in cited if not (repo / ref.rstrip(".")).exists()) == []
    import re

    bare = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
            if re.search(r"(?<![\w/.-])(SPEC_\w+\.md|ARCHITECTURE\.md|seeds/)", path.read_text())]
    assert bare == []  # cited by their repository path
