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
POST_PROCESSING_SAMPLERS = {"results/sampling.py", "io/datasets.py", "testing.py"}


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
