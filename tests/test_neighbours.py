"""Nothing data-dependent leaves the driver except the mechanisms' outputs (issue: privacy leaks).

Every task and method is run through the CLI's runner on neighbouring datasets D and D' (one row
replaced by an extreme row, its group label kept: group sizes are public) at the same input and
output paths, with the same seed. Then every field of the result store, the report and the
persistent ledger's events must be identical between the two runs, except:

* data variables and coordinates the store marks ``private = 1`` (mechanism outputs and their
  post-processing) -- these are the release itself;
* metadata fields listed in :data:`NOISY_METADATA` (post-processing of private outputs, e.g.
  which pairs PACE-GGM's private selection chose);
* in the report, the figures and the printed result (they show the released values);
* in the ledger, reservation ids and start times, event sequence numbers and times.

Anything else that differs is a leak. A field added later is covered automatically: it must be
identical unless it is declared private.

A second check permutes the rows of D: the release of a permuted dataset must not be told apart
either (group level order used to follow the first row).
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.pipeline.runner import execute
from tests.helpers import figures_not_rendered

N, P = 240, 4

# Metadata keys whose values are post-processing of the private outputs only.
NOISY_METADATA = {
    # PACE-GGM: what its private (exponential-mechanism) selection measured, and the max-entropy
    # solver's work on the noisy measurements (post-processing; its time depends on nothing else).
    "measured_offdiagonal", "measured_fraction", "rounds", "anneals", "solver_seconds",
    "solver_iterations", "solver_converged",
}

TASKS: list[tuple[str, dict[str, Any]]] = [
    ("loading", {}),
    ("loading", {"loading": {"calibration": "analytic", "sensitivity": "tight"}}),
    ("scree", {"scree": {"k": 3, "method": ["clipped", "pmwm", "huber"], "controls": {
        "clipped": {"C_clip": 40}, "pmwm": {"a": 0, "b": 60, "trim_const": 10, "eta": 0.01,
                                            "beta": 1.01, "split_mode": False},
        "huber": {"k_min_m2": -10, "k_max_m2": 15, "m2_frac": 0.25}}}}),
    ("score", {"input": {"group": "group"},
               "score": {"method": ["add", "sparse"], "plots": False}}),
    ("score", {"score": {"method": ["add", "sparse"], "frame": "smooth", "plots": False}}),
    ("pca", {"input": {"group": "group"},
             "pca": {"k": 3, "scree_control": {"clipped": {"C_clip": 40}},
                     "score_method": ["add", "sparse"], "plots": False}}),
    ("covariance", {"covariance": {"method": "pace_ggm", "bounds": 8.0}}),
    ("covariance", {"covariance": {"method": "ssp", "bounds": 8.0}}),
    ("covariance", {"covariance": {"method": "diagonal", "bounds": 8.0}}),
]


def _data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(size=(N, P)) * [3.0, 2.0, 1.0, 0.5]
    groups = np.array(["b", "c", "a"])[rng.integers(0, 3, N)]
    return x, groups


def _write(path: Path, x: np.ndarray, groups: np.ndarray) -> None:
    shutil.rmtree(path, ignore_errors=True)
    xr.Dataset(
        {"X": (("sample", "variable"), x), "group": (("sample",), groups.astype(object))},
        coords={"variable": np.array(["v1", "v2", "v3", "v4"], dtype=object)},
    ).to_zarr(path, consolidated=False, encoding={"X": {"chunks": (70, P)}})


def _config(root: Path, task: str, extra: dict[str, Any]) -> RunConfig:
    cfg: dict[str, Any] = {
        "input": {"path": str(root / "data.zarr"), "array": "X", **extra.get("input", {})},
        "task": task,
        "privacy": {"eps": 2.0, "delta": 1e-5},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(root / "out"), "formats": ["zarr"]},
        "budget_ledger": {"path": str(root / "ledger.sqlite")},
        "rng": 11,
    }
    cfg.update({k: v for k, v in extra.items() if k != "input"})
    return RunConfig.from_dict(cfg)


def _release(root: Path, task: str, extra: dict[str, Any], x: np.ndarray,
             groups: np.ndarray, keep: Path) -> dict[str, Any]:
    """Run the task on (x, groups) at the fixed paths; return everything it published."""
    _write(root / "data.zarr", x, groups)
    shutil.rmtree(root / "out", ignore_errors=True)
    for suffix in ("", "-wal", "-shm"):
        (root / f"ledger.sqlite{suffix}").unlink(missing_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. an empty noisy histogram: not what is tested
        execute(_config(root, task, extra), progress=False)
    shutil.copytree(root / "out", keep)
    ledger = Ledger(root / "ledger.sqlite")
    events = [{k: v for k, v in r.as_dict().items() if k not in ("id", "started")}
              for r in ledger.reservations()]
    events += [{k: v for k, v in e.items() if k not in ("seq", "reservation", "time")}
               for e in ledger.events()]
    return {"store": keep / f"{task}.zarr", "report": (keep / "report.html").read_text(),
            "ledger": events, "summary": (keep / "summary.txt").read_text(),
            "config": (keep / "config.yaml").read_text()}


def _diff_json(a: Any, b: Any, path: str, out: list[str]) -> None:
    if path.rsplit(".", 1)[-1] in NOISY_METADATA:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            _diff_json(a.get(key), b.get(key), f"{path}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            _diff_json(u, v, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r:.120} != {b!r:.120}")


def _nodes(store: Path) -> list[tuple[str, xr.Dataset]]:
    """The root dataset and, for stores with parts (pca), every group's dataset."""
    tree = xr.open_datatree(store, engine="zarr", consolidated=False)
    return sorted((node.path, node.to_dataset()) for node in tree.subtree)


def _diff_store(a: Path, b: Path) -> list[str]:
    out: list[str] = []
    nodes_a, nodes_b = _nodes(a), _nodes(b)
    assert [n for n, _ in nodes_a] == [n for n, _ in nodes_b]
    for (name, da_), (_, db_) in zip(nodes_a, nodes_b, strict=True):
        attrs_a, attrs_b = dict(da_.attrs), dict(db_.attrs)
        meta_a = json.loads(attrs_a.pop("dppca_metadata", "{}"))
        meta_b = json.loads(attrs_b.pop("dppca_metadata", "{}"))
        _diff_json(meta_a, meta_b, "", out)
        _diff_json(attrs_a, attrs_b, f"{name}@attrs", out)
        assert sorted(da_.variables) == sorted(db_.variables), name
        for var in da_.variables:
            va, vb = da_.variables[var], db_.variables[var]
            where = f"{name}/{var}"
            _diff_json(dict(va.attrs), dict(vb.attrs), f"{where}@attrs", out)
            if (va.dims, va.shape, va.dtype) != (vb.dims, vb.shape, vb.dtype):
                out.append(f"{where}: layout {va.dims}{va.shape}{va.dtype} != "
                           f"{vb.dims}{vb.shape}{vb.dtype}")
                continue
            if va.attrs.get("private") == 1:
                continue  # the release itself
            if not np.array_equal(va.values, vb.values, equal_nan=va.dtype.kind == "f"):
                out.append(f"{where}: values differ but the variable is not marked private")
    return out


_IMG = re.compile(r'src="data:image/[^"]*"')
_SECTION = re.compile(r'(<section id="([^"]+)".*?</section>)', re.DOTALL)
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# Sections that show no released value: compared character for character.
_GENERIC = {"dataset", "ledger", "config", "work"}


def _report_public(page: str) -> str:
    """The report with the released values masked: figures, and every number in the sections
    that show the release (kind sections, printed result); their text and layout stay."""
    page = _IMG.sub('src="IMG"', page)

    def mask(match: re.Match[str]) -> str:
        section, name = match.group(1), match.group(2)
        if name in _GENERIC:
            return section
        return re.sub(r"\s+", " ", _NUMBER.sub("#", section))

    return _SECTION.sub(mask, page)


def _neighbours() -> tuple[tuple[np.ndarray, np.ndarray],
                           list[tuple[str, np.ndarray, np.ndarray]]]:
    """D, and its neighbours: one row replaced, and D with its rows permuted."""
    rng = np.random.default_rng(2024)
    x, g = _data(rng)
    x2 = x.copy()
    x2[0] = [40.0, -35.0, 25.0, -15.0]  # an extreme replacement, same (public) group
    order = rng.permutation(N)
    return (x, g), [("replace one row", x2, g), ("rows permuted", x[order], g[order])]


@pytest.mark.slow
@pytest.mark.parametrize(("task", "extra"), TASKS,
                         ids=[f"{t}-{i}" for i, (t, _) in enumerate(TASKS)])
def test_neighbours__publish_nothing_data_dependent_but_the_release(tmp_path, task, extra):
    # D is released once and compared with each neighbour, all at the same paths and seed.
    # Figures are never compared (they show the release), so they are built but not drawn.
    (x, g), neighbours = _neighbours()
    problems: list[str] = []
    with figures_not_rendered():
        a = _release(tmp_path, task, extra, x, g, tmp_path / "keep_D")
        for i, (label, x2, g2) in enumerate(neighbours):
            b = _release(tmp_path, task, extra, x2, g2, tmp_path / f"keep_{i}")
            found = _diff_store(a["store"], b["store"])
            pa, pb = _report_public(a["report"]), _report_public(b["report"])
            if pa != pb:
                import difflib

                lines = list(difflib.unified_diff(pa.split("><"), pb.split("><"), n=0,
                                                  lineterm=""))[2:8]
                found.append("report.html differs outside the release: " + " | ".join(lines))
            _diff_json(a["ledger"], b["ledger"], "ledger", found)
            if a["config"] != b["config"]:
                found.append("config.yaml differs")
            problems += [f"[{label}] {f}" for f in found]
    assert not problems, "\n".join(problems)
