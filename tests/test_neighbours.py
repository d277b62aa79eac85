"""Nothing data-dependent leaves the driver except the mechanisms' outputs (issue: privacy leaks).

Every task and method is run through the CLI's runner on neighbouring datasets D and D' (one row
replaced by an extreme row, its group label kept: group sizes are public; and D with its rows
permuted) at the same input and output paths, with the same seed. Every byte of every artefact in
the output folder is then accounted for, with no masked section:

* **The result stores** (``<task>.zarr``) are compared file by file between D and D': every
  file must be byte-identical, except the chunks of the arrays the store marks ``private = 1``
  (the release itself) and the metadata documents (``zarr.json``), which must be equal as JSON
  but for the keys the release itself declares post-processing (``post_processing`` lists in
  its metadata, e.g. which pairs PACE-GGM's private selection chose).
* **Every other file** (report.html, summary.txt, every figure, config.yaml, the NetCDF copy) is
  rebuilt from D's stored result alone -- after D's data were overwritten by D' -- with D''s
  public inputs (the input's public metadata, the passes' task counts) and must equal D's file
  byte for byte: each is a function of the release and public quantities only. (A run time, a
  statistic of the raw data or a generator state that the noise draws advanced would differ.)
* **File times**: every file and folder of a run's output carries one modification time, set
  before any data was read; the app's zip download carries a fixed date.
* **The persistent ledger**: reservations and events are equal, but for ids, start times,
  sequence numbers and event times (and the per-call records of a release that declares its
  ``ledger`` post-processing: PACE-GGM's adaptive rounds, the scree's pmwm and huber scales).

Anything else that differs is a leak. A field or file added later is covered automatically.
"""

from __future__ import annotations

import difflib
import json
import shutil
import warnings
import zipfile
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dppca_dask import load_result
from dppca_dask.app.state import zip_directory
from dppca_dask.pipeline.config import RunConfig
from dppca_dask.pipeline.ledger import Ledger
from dppca_dask.pipeline.runner import (
    RunOutcome,
    execute,
    plan_run,
    post_processing_generator,
    write_release,
)
from dppca_dask.privacy.rng import RngState, as_rng
from tests.helpers import figures_not_rendered, write_store

N, P = 240, 4
SEED = 11

TASKS: list[tuple[str, dict[str, Any]]] = [
    ("loading", {}),
    ("loading", {"loading": {"calibration": "analytic", "sensitivity": "tight"}}),
    ("scree", {"scree": {"k": 3, "method": ["clipped", "pmwm", "huber"], "controls": {
        "clipped": {"C_clip": 40}, "pmwm": {"a": 0, "b": 60, "trim_const": 10, "eta": 0.01,
                                            "beta": 1.01, "split_mode": False},
        "huber": {"k_min_m2": -10, "k_max_m2": 15, "m2_frac": 0.25}}}}),
    ("score", {"input": {"group": "group"},
               "score": {"method": ["add", "sparse"], "plots": False}}),
    ("score", {"score": {"method": ["add", "sparse"], "frame": "smooth"}}),
    ("pca", {"input": {"group": "group"},
             "pca": {"k": 3, "scree_control": {"clipped": {"C_clip": 40}},
                     "score_method": ["add", "sparse"], "plots": False}}),
    ("covariance", {"covariance": {"method": "pace_ggm", "bounds": 8.0}}),
    ("covariance", {"covariance": {"method": "ssp", "bounds": 8.0}}),
    ("covariance", {"covariance": {"method": "diagonal", "bounds": 8.0}}),
    ("covariance", {"covariance": {}}),  # the default: auto, row clipping at a private radius
]


def _data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(size=(N, P)) * [3.0, 2.0, 1.0, 0.5]
    groups = np.array(["b", "c", "a"])[rng.integers(0, 3, N)]
    return x, groups


def _write(path: Path, x: np.ndarray, groups: np.ndarray) -> None:
    write_store(path, x, names=["v1", "v2", "v3", "v4"], chunk=70,
                labels={"group": groups.astype(object)})


def _config(root: Path, task: str, extra: dict[str, Any]) -> RunConfig:
    cfg: dict[str, Any] = {
        "input": {"path": str(root / "data.zarr"), "array": "X", **extra.get("input", {})},
        "task": task,
        "privacy": {"eps": 2.0, "delta": 1e-5},
        "cluster": {"kind": "local", "n_workers": 1, "processes": False},
        "output": {"directory": str(root / "out"), "formats": ["zarr", "netcdf"]},
        "budget_ledger": {"path": str(root / "ledger.sqlite")},
        "rng": SEED,
    }
    cfg.update({k: v for k, v in extra.items() if k != "input"})
    return RunConfig.from_dict(cfg)


def _release(root: Path, task: str, extra: dict[str, Any], x: np.ndarray,
             groups: np.ndarray, keep: Path) -> tuple[RunOutcome, list[dict[str, Any]]]:
    """Run the task on (x, groups) at the fixed paths; keep its output folder (times kept)."""
    _write(root / "data.zarr", x, groups)
    shutil.rmtree(root / "out", ignore_errors=True)
    for suffix in ("", "-wal", "-shm"):
        (root / f"ledger.sqlite{suffix}").unlink(missing_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. an empty noisy histogram: not what is tested
        outcome = execute(_config(root, task, extra), progress=False)
    shutil.copytree(root / "out", keep)  # copy2: modification times travel
    ledger = Ledger(root / "ledger.sqlite")
    events = [{k: v for k, v in r.as_dict().items() if k not in ("id", "started", "pid")}
              for r in ledger.reservations()]
    # the release log's hashes chain the (random) reservation ids and the times: left out too
    events += [{k: v for k, v in e.items()
                if k not in ("seq", "reservation", "time", "prev", "hash")}
               for e in ledger.events()]
    return outcome, events


# --- the stores ---------------------------------------------------------------------------------

def _declared(meta: Any) -> set[str]:
    """The metadata keys a release declares post-processing (``post_processing`` lists)."""
    found: set[str] = set()
    if isinstance(meta, dict):
        found.update(meta.get("post_processing", []))
        for value in meta.values():
            found |= _declared(value)
    elif isinstance(meta, list):
        for value in meta:
            found |= _declared(value)
    return found


def _diff_json(a: Any, b: Any, path: str, skip: set[str], out: list[str]) -> None:
    last = path.rsplit(".", 1)[-1]
    if last in skip or (last.startswith("dppca_") and any(last.endswith(f"_{key}")
                                                          for key in skip)):
        return  # a declared key, or its readable copy (results/cf.py: dppca_<path>_<key>)
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key == "dppca_metadata" and isinstance(a.get(key), str):
                _diff_json(json.loads(a[key]), json.loads(b.get(key) or "{}"), f"{path}.{key}",
                           skip, out)
            else:
                _diff_json(a.get(key), b.get(key), f"{path}.{key}", skip, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            _diff_json(u, v, f"{path}[{i}]", skip, out)
    elif a != b:
        out.append(f"{path}: {a!r:.120} != {b!r:.120}")


def _private_arrays(store: Path) -> set[Path]:
    """The folders of the arrays a store marks ``private = 1`` (their chunks are the release)."""
    out = set()
    for meta in store.rglob("zarr.json"):
        doc = json.loads(meta.read_text())
        if doc.get("node_type") == "array" and doc.get("attributes", {}).get("private") == 1:
            out.add(meta.parent)
    return out


def _diff_store(a: Path, b: Path) -> list[str]:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    if files_a != files_b:
        return [f"{a.name}: different files: {sorted(set(files_a) ^ set(files_b))[:6]}"]
    skip = _declared(load_result(a).metadata)
    private = _private_arrays(a)
    out: list[str] = []
    for rel in files_a:
        fa, fb = a / rel, b / rel
        if rel.name == "zarr.json":
            _diff_json(json.loads(fa.read_text()), json.loads(fb.read_text()),
                       f"{a.name}/{rel}", skip, out)
        elif any(folder in fa.parents for folder in private):
            continue  # a chunk of a released array
        elif fa.read_bytes() != fb.read_bytes():
            out.append(f"{a.name}/{rel}: bytes differ, and the array is not marked private")
    return out


# --- every other file: rebuilt from the stored release --------------------------------------

def _rebuild(root: Path, config: RunConfig, kept: Path, public: RunOutcome) -> list[str]:
    """Write the run's folder again from its stored result and ``public``'s public inputs (the
    other dataset's run); every file but the stores must come out byte for byte the same."""
    result = load_result(kept / f"{config.task}.zarr")
    source = plan_run(config).source  # the input now holds the other dataset
    post = RngState(post_processing_generator(as_rng(SEED).generator), True)
    target = root / "rebuilt"
    shutil.rmtree(target, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the run's own warnings again (e.g. an empty histogram)
        write_release(str(target), config, result, source=source, passes=public.passes,
                      post=post)
    out = []
    for path in sorted(kept.rglob("*")):
        rel = path.relative_to(kept)
        if not path.is_file() or rel.parts[0].endswith(".zarr"):
            continue
        again = target / rel
        if not again.is_file():
            out.append(f"{rel}: not written again from the stored release")
        elif again.read_bytes() != path.read_bytes():
            detail = ""
            if path.suffix in (".html", ".txt", ".yaml"):
                lines = list(difflib.unified_diff(path.read_text().split("><"),
                                                  again.read_text().split("><"), n=0,
                                                  lineterm=""))[2:8]
                detail = ": " + " | ".join(lines)
            out.append(f"{rel}: differs from its rebuild from the stored release{detail}")
    return out


def _times(kept: Path) -> list[str]:
    """One modification time for the whole folder; fixed dates in the app's zip."""
    stamps = {p.stat().st_mtime for p in [kept, *kept.rglob("*")]}
    out = [] if len(stamps) == 1 else [f"{len(stamps)} different file times in the output"]
    with zipfile.ZipFile(BytesIO(zip_directory(kept))) as archive:
        dates = {(i.date_time, i.external_attr) for i in archive.infolist()}
    if dates != {((1980, 1, 1, 0, 0, 0), 0o644 << 16)}:
        out.append(f"the zip's entries carry dates or modes: {sorted(dates)[:3]}")
    return out


def _payloads(events: Any) -> Any:
    """The ledger events with their JSON ``payload`` strings (the release log's entries: e.g.
    the hash of a release's records) parsed, so that a declared key inside them is skipped."""
    out = []
    for event in events:
        if isinstance(event, dict) and isinstance(event.get("payload"), str):
            try:
                event = {**event, "payload": json.loads(event["payload"])}
            except ValueError:
                pass
        out.append(event)
    return out


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
    # D's figures are drawn for real (they are rebuilt and compared byte for byte); the
    # neighbours' are built from their data but not drawn: only their stores and ledgers are
    # compared, and the rebuild of D uses their public inputs.
    (x, g), neighbours = _neighbours()
    config = _config(tmp_path, task, extra)
    _, events_a = _release(tmp_path, task, extra, x, g, tmp_path / "keep_D")
    kept = tmp_path / "keep_D"
    problems = [f"[D] {f}" for f in _times(kept)]
    for i, (label, x2, g2) in enumerate(neighbours):
        with figures_not_rendered():
            outcome_b, events_b = _release(tmp_path, task, extra, x2, g2, tmp_path / f"keep_{i}")
        found = _diff_store(kept / f"{task}.zarr", tmp_path / f"keep_{i}" / f"{task}.zarr")
        found += _rebuild(tmp_path, config, kept, outcome_b)
        # a release whose per-call records are post-processing (PACE-GGM's rounds) declares
        # its "ledger"; the persistent ledger holds the same records
        skip = {"records"} if "ledger" in _declared(load_result(
            kept / f"{task}.zarr").metadata) else set()
        _diff_json(_payloads(events_a), _payloads(events_b), "ledger", skip, found)
        problems += [f"[{label}] {f}" for f in found]
    assert not problems, "\n".join(problems)


def test_neighbours__the_check_sees_a_leak(tmp_path):
    """The comparison is not blind: a run time in the report, an unmarked changed array and a
    statistic in the metadata are each found."""
    (x, g), [(_, x2, g2), _] = _neighbours()
    with figures_not_rendered():
        _, _ = _release(tmp_path, "loading", {}, x, g, tmp_path / "a")
        outcome, _ = _release(tmp_path, "loading", {}, x2, g2, tmp_path / "b")
    config = _config(tmp_path, "loading", {})
    page = tmp_path / "a" / "report.html"
    page.write_text(page.read_text().replace("</main>", "<p>Wall time 4.70 s</p></main>"))
    store_a = tmp_path / "a" / "loading.zarr"
    doc_path = store_a / "zarr.json"
    doc = json.loads(doc_path.read_text())
    meta = json.loads(doc["attributes"]["dppca_metadata"])
    meta["column_means"] = x.mean(axis=0).tolist()
    doc["attributes"]["dppca_metadata"] = json.dumps(meta)
    doc_path.write_text(json.dumps(doc))
    array = store_a / "directions"  # a released array (its bytes differ) no longer private
    assert array in _private_arrays(store_a)
    node = json.loads((array / "zarr.json").read_text())
    node["attributes"]["private"] = 0
    (array / "zarr.json").write_text(json.dumps(node))
    with figures_not_rendered():
        found = _diff_store(store_a, tmp_path / "b" / "loading.zarr")
        found += _rebuild(tmp_path, config, tmp_path / "a", outcome)
    text = "\n".join(found)
    assert "report.html: differs" in text and "Wall time" in text
    assert "column_means" in text
    assert "bytes differ, and the array is not marked private" in text


def _api_fits(x: np.ndarray, g: np.ndarray) -> dict[str, Any]:
    """Every estimator of the Python API on (x, g), seeded alike (the release is compared, the
    seed only makes the two runs' noise the same)."""
    from dppca_dask import (
        clipped_control,
        dp_covariance,
        dp_loading,
        dp_pca,
        dp_score,
        dp_scree,
        privacy_control,
    )

    pc = privacy_control(eps=2.0, delta=1e-5)
    return {
        "loading": dp_loading(x, privacy=pc, calibration="analytic", rng=SEED),
        "scree": dp_scree(x, privacy=pc, k=3, control=clipped_control(C_clip=40), rng=SEED),
        "score": dp_score(x, privacy=pc, group=g, bins=(4, 4), rng=SEED),
        "pca": dp_pca(x, privacy=pc, k=2, bins=4, scree_control=clipped_control(C_clip=40),
                      rng=SEED),
        "covariance": dp_covariance(x, rho=0.5, bounds=8.0, method="pace_ggm", rng=SEED),
    }


@pytest.mark.slow
def test_neighbours__python_api_publishes_nothing_data_dependent_but_the_release(tmp_path):
    """The same through the Python API: each result's store compared file by file between D
    and D', and what a user prints (repr, summary, the notebook card) equal to that of the
    result loaded back from its store -- a function of the release alone."""
    (x, g), neighbours = _neighbours()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits_a = _api_fits(x, g)
        problems = []
        for name, fit in fits_a.items():
            fit.to_zarr(tmp_path / f"D-{name}.zarr")
            loaded = load_result(tmp_path / f"D-{name}.zarr")
            for view in (repr, lambda r: repr(r.summary()), lambda r: r._repr_html_()):
                if view(fit) != view(loaded):
                    problems.append(f"[{name}] a printed view is not a function of the store")
        for i, (label, x2, g2) in enumerate(neighbours):
            for name, fit in _api_fits(x2, g2).items():
                fit.to_zarr(tmp_path / f"{i}-{name}.zarr")
                problems += [f"[{label}] {f}" for f in _diff_store(
                    tmp_path / f"D-{name}.zarr", tmp_path / f"{i}-{name}.zarr")]
    assert not problems, "\n".join(problems)
