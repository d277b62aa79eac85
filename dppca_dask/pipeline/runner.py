"""Config-driven runs: ``plan`` (metadata only) and ``execute`` (one release, written atomically).

Order of a run, each step refusing bad input before the next costs anything:

1. the config is validated (:mod:`dppca_dask.pipeline.config`) and checked against the deployment's
   settings (:mod:`dppca_dask.pipeline.deployment`: a required ledger, the deployment's ledger,
   which a run config may replace only where the deployment allows it);
2. the output location is checked: never the input store, inside it or around it, nor around
   the ledger file (:func:`~dppca_dask.io.identity.check_output_location`, with or without
   overwrite); no overwrite unless asked;
3. the budget is resolved and the noise planned from public quantities (n, p, ε, δ);
4. the input's metadata is read (shape, names; never values);
5. the spend is reserved in the persistent ledger (:mod:`dppca_dask.pipeline.ledger`) under the
   dataset's id (:mod:`dppca_dask.io.identity`) with the release's planned records, refusing a
   run past the custodian's cap (lowered, never raised, by ``budget_ledger.cap``) on the tight
   cumulative figure;
6. the cluster is opened, the data passes run, noise is drawn once on the driver (through a
   :class:`DrawTracker` that notes the first draw);
7. every output is written into a temporary directory that is renamed into place at the end,
   so a failed run leaves nothing at the final path; the last one is ``report.html``
   (:mod:`dppca_dask.report.html`: the figures the task wrote, the ledger, the config and the work of
   each data pass, recorded by :func:`~dppca_dask.graph.passlog.record_passes`);
8. the ledger reservation is confirmed once the outputs are in place. A failure before the first
   draw refunds it (``cancelled``); a failure after it (fit, outputs, report) keeps it spent
   (``failed``, naming only the error type). Ctrl-C and SIGTERM are failures like any other
   (the CLI raises them: :mod:`dppca_dask.pipeline.interrupts`); the ledger's writes around the
   reservation hold them back until they are complete.

What each task does is looked up in :data:`dppca_dask.pipeline.tasks.TASKS`.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dppca_dask._rformat import format_r_scalar
from dppca_dask.errors import (
    BudgetError,
    ConfigError,
    DuplicateObservationError,
    OutputExistsError,
    PrivacyWarning,
)
from dppca_dask.graph.memory import MemoryPlan
from dppca_dask.graph.passlog import PassRecord, record_passes
from dppca_dask.io.data import SourceInfo, as_data, describe_source
from dppca_dask.io.duplicates import describe_duplicates, find_duplicates
from dppca_dask.io.identity import check_output_location, resolve_dataset
from dppca_dask.pipeline.budget_cap import Cap
from dppca_dask.pipeline.cluster import connect, describe_cluster
from dppca_dask.pipeline.config import RunConfig, dump_config
from dppca_dask.pipeline.deployment import (
    apply_deployment,
    deployment_settings,
    ledger_location,
    open_deployment_ledger,
)
from dppca_dask.pipeline.expected import ExpectedWidths, expected_widths
from dppca_dask.pipeline.interrupts import critical
from dppca_dask.pipeline.tasks import TASKS, TaskSpec, mib
from dppca_dask.pipeline.tasks.memory import memory_plan
from dppca_dask.privacy.budget import BudgetPlan, PrivacyBudget, resolve_budget
from dppca_dask.privacy.draws import DrawTracker
from dppca_dask.privacy.guarantees import guarantee_warnings
from dppca_dask.privacy.mechanisms import note_label
from dppca_dask.privacy.plan import Plan
from dppca_dask.privacy.rng import RngState, as_rng
from dppca_dask.results.base import Result, guarantee_of, write_atomically

__all__ = ["DrawTracker", "Reserved", "RunOutcome", "RunPlan", "execute", "plan_run",
           "post_processing_generator", "summary_text", "write_release"]


@dataclass(frozen=True)
class RunPlan:
    """What a run would do, derived from the config and the input's metadata only."""

    config: RunConfig
    source: SourceInfo
    budget: BudgetPlan
    noise: tuple[str, ...]
    work: tuple[str, ...]
    release: Plan
    """The release's plan as data: its planned spend records, their total and its passes."""
    guarantees: tuple[str, ...] = ()
    """Settings outside their guarantee (:mod:`dppca_dask.privacy.guarantees`); the CLI prints
    them as one-line warnings, ``budget_ledger.strict`` refuses them."""
    setup: Any = None
    """The task's options, parsed once and bound to the input's public shape (``TaskSpec.setup``):
    the plan, the plan text, the memory plan and the fit all read it."""
    memory: MemoryPlan | None = None
    """The memory plan (:func:`~dppca_dask.pipeline.tasks.memory.memory_plan`)."""
    expected: ExpectedWidths | None = None
    """The release's expected interval widths (:func:`~dppca_dask.pipeline.expected.
    expected_widths`): from the plan's noise scales, n, p and the public bounds."""

    @property
    def spend(self) -> PrivacyBudget:
        """What the release spends, (ε, δ) of :attr:`release`'s total (under zCDP: the (ε, δ)
        its ρ was converted from); the persistent ledger reserves exactly this."""
        total = self.release.total
        return PrivacyBudget(total.get("eps", 0.0), total.get("delta", 0.0))

    def as_dict(self) -> dict[str, Any]:
        """``plan --json``: the release's ``records`` and ``total``, its ``passes``, the task,
        the budget owner and the data's public shape (no rng seed, no data values)."""
        src = self.source
        out = {"task": self.config.task, "owner": self.budget.owner,
               **self.release.as_dict(),
               "data": {"n": src.n, "p": src.p, "variables": list(src.variables)}}
        if self.expected is not None:
            out["expected_widths"] = self.expected.as_dict()
        return out

    def render(self) -> str:
        cfg, src = self.config, self.source
        total = self.budget.total
        split = "implicit equal split" if self.budget.implicit_split else "as given"
        where = src.path or src.origin
        lines = [
            "Resolved config (an rng seed, if given, is never shown or recorded):",
            *("  " + line for line in dump_config(cfg, task_only=True).splitlines()[1:]),
            "",
            f"Privacy budget plan for {self.budget.owner} ({split}):",
            f"  total: eps = {format_r_scalar(total.eps)} ; delta = {format_r_scalar(total.delta)}",
            *self.noise,
            f"  planned ledger ({len(self.release.records)} mechanism calls; "
            "`plan --json` lists them):",
            *_record_lines(self.release),
            f"  this release spends in total (basic composition): "
            f"eps = {format_r_scalar(self.spend.eps)} ; delta = {format_r_scalar(self.spend.delta)}"
            + ("" if self.config.task != "covariance" else " (as rho-zCDP, converted)"),
            *(["", *self.expected.lines()] if self.expected is not None
              and self.expected.lines() else []),
            "",
            f"Data: {where}" + (f" [{src.array}]" if src.array else ""),
            f"  {src.n} observations x {src.p} variables, stored {src.dtype}, "
            f"{len(src.chunks[0])} row chunk(s); {mib(src.nbytes)} as float64",
            "  variables: " + ", ".join(src.variables[:10])
            + (f", ... ({src.p} in all)" if src.p > 10 else ""),
            "",
            *self.work,
            *(self.memory.lines() if self.memory is not None else ()),
            "",
            f"Cluster: {describe_cluster(cfg.cluster)}",
            f"Output: {cfg.output.directory} ({', '.join(cfg.output.formats)})",
        ]
        return "\n".join(lines)


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: the result, the files written, timings (seconds) and the data passes.

    ``timings``: ``plan`` (plan, metadata, ledger reservation), ``cluster_start``,
    ``pass_<i>`` (each data pass), ``driver`` (the fit's work between passes and opening the
    input), ``cluster_close``, ``write_stores``, ``write_figures`` and ``wall`` (the whole run);
    the steps sum to ``wall`` but for the report and the ledger's confirmation. They depend on
    the data: the CLI prints them to the operator's terminal; no output file holds them."""

    result: Result
    directory: str
    files: tuple[str, ...]
    timings: dict[str, float] = field(default_factory=dict)
    passes: tuple[PassRecord, ...] = ()


def _source_kwargs(config: RunConfig) -> dict[str, Any]:
    spec = TASKS[config.task]
    return {
        "owner": spec.owner,
        "columns": config.input.columns,
        "array": config.input.array,
        "storage_options": config.input.storage_options or None,
        **spec.source_options(config),
    }


def plan_run(config: RunConfig, *, cap_check: bool = True) -> RunPlan:
    """Resolve budget, noise and work for ``config`` without reading any data values.

    Refuses what :func:`execute` would refuse before any work: a run config the deployment
    forbids, an output location over the input or the ledger, and (``cap_check``) a release past
    the dataset's cap -- the ledger's read-only check, nothing recorded; :func:`execute` passes
    False: its reservation makes the same check."""
    config = apply_deployment(config)
    _guard_output(config)
    spec = TASKS[config.task]
    budget = resolve_budget(config.privacy.to_control(), owner=spec.owner)
    source = describe_source(config.input.path, **_source_kwargs(config))
    setup = spec.setup(config, source, budget)  # the options: parsed once, here
    release = spec.plan(setup, budget)
    guarantees = tuple(guarantee_warnings(release, source.n))
    if guarantees and config.budget_ledger.strict:
        raise BudgetError("Refused (budget_ledger.strict): " + " | ".join(guarantees)
                          + ". No data was read.")
    planned = RunPlan(
        config, source, budget,
        tuple(spec.noise_plan(config, setup, budget, release)),
        tuple(spec.work_plan(config, source, setup, release)), release, guarantees,
        setup=setup, memory=memory_plan(config, source, setup),
        expected=expected_widths(release, n=source.n, p=source.p,
                                 bins=getattr(setup, "m_bins", None),
                                 clip=getattr(setup, "clip", None),
                                 bounds=getattr(setup, "bounds", None)),
    )
    if cap_check:
        _check_ledger_cap(planned)
    return planned


def _listed_note(note: str) -> str:
    """A planned record's note as the plan lists it: the caller's label with the component,
    axis, step and side generalised, so that the calls of one kind fold into one line."""
    label = note_label(note)
    label = re.sub(r"\bPC\d+\b", "PCj", label)
    label = re.sub(r"\bstep \d+\b", "step t", label)
    label = re.sub(r"\b(frame \w+) [xy]\b", r"\1 (each axis)", label)
    return re.sub(r"\((positive|negative) side\)", "(one side)", label)


def _record_lines(plan: Plan) -> list[str]:
    """The planned records, the calls of one kind (same component, mechanism, amount and
    generalised label) folded into one line, in the order each kind first appears."""
    counts: dict[tuple[Any, ...], int] = {}
    for r in plan.records:
        key = (r.component, r.mechanism, r.status, r.eps, r.delta, r.rho, _listed_note(r.note))
        counts[key] = counts.get(key, 0) + 1
    lines: list[str] = []
    groups = list(counts.items())
    for (component, mechanism, status, eps, delta, rho, note), count in groups:
        amount = (f"rho = {format_r_scalar(rho)}" if plan.accounting == "zcdp" and rho is not None
                  else f"eps = {format_r_scalar(eps)} ; delta = {format_r_scalar(delta)}")
        times = f"{count} x " if count > 1 else ""
        tail = " (prior release: recorded, not spent)" if status == "prior" else ""
        what = f" -- {note}" if note and status != "prior" else ""
        lines.append(f"    {component}: {times}{mechanism}, {amount}"
                     f"{' each' if count > 1 else ''}{tail}{what}")
    return lines


def _guard_output(config: RunConfig) -> None:
    """Refuse an output directory equal to, inside or around the input store or the ledger."""
    path = config.input.path
    protected = []
    if "://" not in path or path.lower().startswith("file://"):
        store = resolve_dataset(path, pick=False).location
        protected += [("the input store", store), ("the input path", path)]
    if config.budget_ledger.enabled:
        protected.append(("the budget ledger file", str(ledger_location(config))))
    check_output_location(config.output.directory, protected, parameter="output.directory",
                          owner="the run config", cls=ConfigError)


def _check_output(config: RunConfig, overwrite: bool) -> Path:
    directory = Path(config.output.directory)
    if directory.exists() and not overwrite:
        raise OutputExistsError(
            f"Output directory {str(directory)!r} already exists; use --overwrite (or "
            "output.overwrite: true) to replace it."
        )
    return directory


def _write_outputs(tmp: str, config: RunConfig, result: Result, summary: str,
                   extra: Callable[[Path], None] | None = None,
                   report: Callable[[Path], None] | None = None,
                   timings: dict[str, float] | None = None, stamp: float | None = None) -> None:
    """Write every output into ``tmp``; ``timings`` gets the seconds of the stores and of the
    task's extra outputs (for the operator's terminal, never into an output file). With
    ``stamp`` (the run's start, before any data was read), every file and folder written gets
    that modification time: when each was written depends on how long the data took."""
    clock = time.perf_counter()
    os.makedirs(tmp)
    base = Path(tmp)
    name = config.task
    if "zarr" in config.output.formats:
        result.to_zarr(base / f"{name}.zarr")
    if "netcdf" in config.output.formats:
        result.to_netcdf(base / f"{name}.nc")
    (base / "config.yaml").write_text(dump_config(config))
    (base / "summary.txt").write_text(summary + "\n")
    if timings is not None:
        timings["write_stores"] = time.perf_counter() - clock
    clock = time.perf_counter()
    if extra is not None:  # task-specific outputs (TaskSpec.write_outputs)
        extra(base)
    if timings is not None:
        timings["write_figures"] = time.perf_counter() - clock
    if report is not None:  # last, so that it embeds the figures written above
        report(base)
    if stamp is not None:
        for path in [*base.rglob("*"), base]:
            os.utime(path, (stamp, stamp), follow_symlinks=False)


def _warm_figures() -> None:
    """Import matplotlib, its font list and the plot modules in a background thread: the
    figures are the run's last step, and their imports (~0.6 s of CPU) would otherwise start
    only then, while the cluster's start leaves the driver waiting. Imports only (no backend is
    chosen, no data, no randomness); an import error surfaces where the figures are drawn, as
    before."""
    import threading

    def load() -> None:
        try:
            for name in ("matplotlib.figure", "matplotlib.backends.backend_agg",
                         "matplotlib.patches", "matplotlib.ticker", "matplotlib.colors",
                         "dppca_dask.plots.pca"):
                importlib.import_module(name)
            fonts = importlib.import_module("matplotlib.font_manager")
            fonts.get_font(fonts.findfont(fonts.FontProperties()))  # the text's font file
        except Exception:  # noqa: BLE001,S110 -- reported by the figures' own import
            pass

    threading.Thread(target=load, name="dppca-warm-figures", daemon=True).start()


def summary_text(result: Result) -> str:
    """summary.txt: the printed result and its summary, below a NOT PRIVATE line for a release
    outside the guarantee (a seeded generator)."""
    text = f"{result!r}\n\n{result.summary()!r}"
    guarantee = guarantee_of(result.metadata)
    return text if guarantee == "private" else f"{guarantee}.\n\n{text}"


def post_processing_generator(generator: Any) -> Any:
    """A generator for post-processing (synthetic samples), independent of the noise draws: a
    child of ``generator`` spawned before any draw (reproducible under a seed), or
    ``generator`` itself when it cannot spawn (e.g. the R emulator)."""
    spawn = getattr(generator, "spawn", None)
    if spawn is None:
        return generator
    try:
        return spawn(1)[0]
    except (TypeError, ValueError, AttributeError):  # e.g. no SeedSequence behind it
        return generator


def _report(config: RunConfig, source: SourceInfo, result: Result,
            passes: tuple[PassRecord, ...], state: Any) -> Callable[[Path], None]:
    def write(base: Path) -> None:
        from dppca_dask.report.html import figure_files, write_report

        files = figure_files(base)
        write_report(base / "report.html", result, figures=files or None, config=config,
                     source=source, passes=passes, rng=state.generator)

    return write


def write_release(tmp: str, config: RunConfig, result: Result, *, source: SourceInfo,
                  passes: tuple[PassRecord, ...], post: RngState,
                  timings: dict[str, float] | None = None, stamp: float | None = None) -> None:
    """Write every output file of a finished run into the new folder ``tmp``: a function of the
    release ``result`` and public inputs only (the config, the input's public metadata
    ``source``, the passes' task counts, the post-processing generator ``post``), so the same
    arguments write the same bytes -- ``tests/test_neighbours.py`` rebuilds a run's folder from
    its stored result this way. ``timings`` and ``stamp``: see :func:`_write_outputs`."""
    spec = TASKS[config.task]
    write_extra = spec.write_outputs
    extra = None if write_extra is None else (
        lambda base: write_extra(config, result, base, post))
    _write_outputs(tmp, config, result, summary_text(result), extra,
                   _report(config, source, result, passes, post), timings, stamp=stamp)


def _run_cap(config: RunConfig) -> Cap | None:
    cap = config.budget_ledger.cap
    return None if cap is None else Cap(cap.eps, cap.delta, cap.rho)


def _deployment_ledger(plan: RunPlan, *, read_only: bool = False) -> tuple[Any, Any, Any]:
    """The deployment's settings, its ledger and the dataset's identity for ``plan``'s input
    (metadata only). ``read_only``: a ledger not yet written is an empty in-memory one (it
    holds no release; the custodian's caps database still applies) and no file is created."""
    config = plan.config
    deployment = deployment_settings()
    path = ledger_location(config, deployment)
    if read_only and not path.exists():
        path = Path(":memory:")
    ledger = open_deployment_ledger(path, deployment, create=not read_only)
    identity = resolve_dataset(config.input.path, plan.source.array,
                               storage_options=config.input.storage_options or None)
    return deployment, ledger, identity


def _check_ledger_cap(plan: RunPlan) -> None:
    """``plan``'s read-only copy of the cap check the run's reservation makes (the same
    refusal, before any work; nothing is recorded and no ledger file is created)."""
    if not plan.config.budget_ledger.enabled:
        return
    deployment, ledger, identity = _deployment_ledger(plan, read_only=True)
    ledger.check(identity, [r.as_dict() for r in plan.release.records], plan.spend,
                 run_cap=_run_cap(plan.config), require_cap=deployment.require_cap)


@dataclass(frozen=True)
class Reserved:
    """A reservation made before :func:`execute` runs (the release service reserves a job's
    planned records when the job is submitted): the run uses it instead of reserving, and ends
    it as any run ends its own -- confirmed, refunded before the first draw, kept after it."""

    ledger: Any
    """The :class:`~dppca_dask.pipeline.ledger.Ledger` that holds it."""
    id: str


def _planned_dicts(records: Any) -> list[dict[str, Any]]:
    """Records as the ledger stores them (JSON, sorted keys), for comparing."""
    loaded: list[dict[str, Any]] = json.loads(json.dumps([dict(r) for r in records],
                                                         sort_keys=True))
    return loaded


def _check_reserved(reserved: Reserved, plan: RunPlan) -> None:
    """Refuse a reservation that is no longer open or no longer matches the run's plan."""
    held = reserved.ledger.reservation(reserved.id)
    if held is None or held.status != "reserved":
        state = "missing" if held is None else held.status
        raise BudgetError(f"Refused: the reservation {reserved.id} of this run is {state}, not "
                          "reserved (released by the custodian?). No data was read.")
    if _planned_dicts(held.planned) != _planned_dicts(r.as_dict() for r in plan.release.records):
        raise BudgetError(f"Refused: the reservation {reserved.id} holds other planned records "
                          "than this run's plan (the dataset's public shape changed?). No data "
                          "was read.")


@contextmanager
def _ledger_reservation(
    config: RunConfig, plan: RunPlan, spec: TaskSpec, seeded: bool, tracker: Any,
    reserved: Reserved | None = None,
) -> Iterator[dict[str, Any]]:
    """Reserve the release's planned records in the persistent ledger before data is read (cap
    check), or take over ``reserved``; if the run fails (an exception, Ctrl-C, SIGTERM), refund
    it when ``tracker`` saw no draw, else keep it spent (``failed``); confirm it (with the
    records the body puts in the yielded dict under ``"records"``) when the body ends."""
    settings = config.budget_ledger
    holder: dict[str, Any] = {}
    if not settings.enabled and reserved is None:
        yield holder
        return
    release_id = None
    if reserved is not None:
        ledger = reserved.ledger
    else:
        deployment, ledger, identity = _deployment_ledger(plan)
    try:
        with critical():
            if reserved is not None:
                release_id = reserved.id
                _check_reserved(reserved, plan)  # a mismatch is refunded below (no draw yet)
            else:
                release_id = ledger.reserve(
                    identity, [r.as_dict() for r in plan.release.records], plan.spend,
                    run_cap=_run_cap(config), require_cap=deployment.require_cap,
                    task=config.task, output=str(Path(config.output.directory).resolve()),
                    seeded=seeded)
        yield holder
    except BaseException as exc:
        if release_id is not None:
            with critical():
                if tracker.drawn:  # noise exists: the spend stays counted; only the error *type*
                    ledger.fail_after_draw(release_id, error=type(exc).__name__, seeded=seeded,
                                           records=holder.get("records", ()))
                else:
                    ledger.cancel(release_id)
        raise
    assert release_id is not None
    with critical():
        ledger.confirm(release_id, holder.get("records", ()), seeded=seeded)


def execute(
    config: RunConfig, *, progress: bool = True, overwrite: bool | None = None,
    on_warning: Callable[[str], None] | None = None,
    on_pass: Callable[[PassRecord], None] | None = None,
    reservation: Reserved | None = None,
    on_first_draw: Callable[[], None] | None = None,
) -> RunOutcome:
    """Run ``config`` end to end and write its outputs; see the module docstring for the order.

    ``reservation``: a reservation made for this run beforehand (:class:`Reserved`; the release
    service's), used instead of reserving; ``on_first_draw`` is called once just before the
    first noise draw (:func:`~dppca_dask.privacy.draws.DrawTracker`).

    ``progress``: the cluster's progress bar (a terminal's); ``on_pass`` receives each data
    pass's :class:`~dppca_dask.graph.passlog.PassRecord` when it ends (the CLI's one line per
    pass in logs). ``on_warning`` receives the plan's guarantee warnings before any data is read
    (the CLI prints them); without it they are :class:`~dppca_dask.errors.PrivacyWarning`
    warnings. Duplicate observations met by a Kendall pass are one
    :class:`~dppca_dask.errors.DuplicateObservationError` naming how many rows and the first
    ones (:mod:`dppca_dask.io.duplicates`: a second, non-private pass, only after the failure).
    """
    started = time.perf_counter()
    wall_started = time.time()  # every output file's mtime: set before any data is read
    config = apply_deployment(config)
    overwrite = config.output.overwrite if overwrite is None else overwrite
    _guard_output(config)
    directory = _check_output(config, overwrite)
    plan = plan_run(config, cap_check=False)  # the reservation below checks the cap
    for message in plan.guarantees:
        if on_warning is not None:
            on_warning(message)
        else:
            warnings.warn(message, PrivacyWarning, stacklevel=2)
    state = as_rng(config.rng, owner="config")
    # post-processing (synthetic samples in figures) draws from its own generator, split off
    # before any noise is drawn: its state never depends on how many draws the noise took
    post = RngState(post_processing_generator(state.generator), state.seeded)
    tracker = DrawTracker(state.generator, on_first_draw)
    state = RngState(tracker, state.seeded)
    spec = TASKS[config.task]
    timings: dict[str, float] = {}
    with _ledger_reservation(config, plan, spec, state.seeded, tracker, reservation) as entry:
        start = time.perf_counter()
        timings["plan"] = start - started
        memory = plan.memory
        assert memory is not None
        _warm_figures()  # the figure modules load while the cluster starts
        with connect(config.cluster, progress=progress, input_path=config.input.path,
                     announce=progress or on_pass is not None,  # the dashboard link
                     task_memory=(memory.task, memory.task_what)):
            timings["cluster_start"] = time.perf_counter() - start
            source = as_data(config.input.path, **_source_kwargs(config))
            begin = time.perf_counter()
            try:
                with record_passes(on_pass) as log:
                    result = spec.fit(source, plan.budget, plan.setup, state)
            except DuplicateObservationError:
                found = find_duplicates(source.array)
                raise DuplicateObservationError(
                    describe_duplicates(found, spent=tracker.drawn)) from None
            fitted = time.perf_counter()
            opened = begin - start - timings["cluster_start"]  # the input's metadata
            for p in log:
                timings[f"pass_{p.index}"] = p.seconds
            timings["driver"] = max(0.0, fitted - begin - sum(p.seconds for p in log)) + opened
        timings["cluster_close"] = time.perf_counter() - fitted
        entry["records"] = [r.as_dict() for r in result.ledger]
        passes = tuple(log)
        write_atomically(
            directory, lambda tmp: write_release(tmp, config, result, source=plan.source,
                                                 passes=passes, post=post, timings=timings,
                                                 stamp=wall_started),
            overwrite=overwrite,
        )
    timings["wall"] = time.perf_counter() - started
    files = tuple(sorted(str(directory / f) for f in os.listdir(directory)))
    return RunOutcome(result, str(directory), files, timings, passes)
