"""The ``dppca-dask`` command line: a thin layer over :mod:`dppca_dask.pipeline.runner` and friends.

Exit status: 0 success; 1 a user or data error (every :class:`~dppca_dask.errors.DPPCAError`: a
bad config, refused budget, unusable input), printed as one ``Error: ...`` line on stderr in
config-key wording (:func:`cli_message`); 2 a usage error (unknown option, missing argument:
click's own); 3 an internal error (a bug: one line, ``--traceback`` shows the trace); 130
Ctrl-C; 143 SIGTERM. A closed output pipe (``dppca-dask inspect X | head -1``) ends the command
quietly with status 0.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from dppca_dask.errors import DPPCAError
from dppca_dask.pipeline.wording import cli_message

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

EXIT_USER_ERROR = 1
EXIT_USAGE_ERROR = 2
EXIT_INTERNAL_ERROR = 3

def _handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        show_trace = bool(ctx.find_root().params.get("traceback"))
        try:
            out = fn(*args, **kwargs)
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
            return out
        except BrokenPipeError:
            _quiet_stdout()
            sys.exit(0)
        except DPPCAError as exc:
            if show_trace:
                raise
            message = cli_message(exc, ctx.meta.get('dppca.task'))
            click.echo(f"Error: {message}", err=True)
            if kwargs.get("as_json"):
                _json_error(type(exc).__name__, message, EXIT_USER_ERROR, exc)
            sys.exit(EXIT_USER_ERROR)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)
        except Exception as exc:
            if show_trace:
                raise
            message = (f"internal error {type(exc).__name__}: {exc} (a bug; rerun with "
                       "--traceback and report it)")
            click.echo(f"Error: {message}", err=True)
            if kwargs.get("as_json"):
                _json_error("InternalError", message, EXIT_INTERNAL_ERROR, None)
            sys.exit(EXIT_INTERNAL_ERROR)

    return wrapper


def _json_error(kind: str, message: str, code: int, exc: DPPCAError | None) -> None:
    """Under ``--json``, an error is JSON on stdout too (the ``Error:`` line stays on stderr):
    ``{"error": {"type", "message", "exit_code", "parameter", "rule", "value", "hint"}}``,
    the fields the package error carries (null where it has none)."""
    fields = {name: None if exc is None else _json_ready(_plain(getattr(exc, name, None)))
              for name in ("parameter", "rule", "value", "hint")}
    click.echo(json.dumps({"error": {"type": kind, "message": message, "exit_code": code,
                                     **fields}}, indent=2))


def _plain(value: Any) -> Any:
    """A JSON-able form of an error field (numbers and strings as they are, others as text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _outcome_json(outcome: Any) -> str:
    """``run --json``/``demo --json``: what was written and spent, and the summary text.

    Keys: ``directory``, ``files`` (names), ``kind``, ``spent`` (the release's ledger total),
    ``passes`` (index, outputs, tasks, seconds), ``timings`` (seconds) and ``summary``. The
    seconds depend on the data: like the terminal's "Times" line they are for the operator, and
    no output file holds them."""
    meta = outcome.result.metadata
    return json.dumps(_json_ready({
        "directory": str(outcome.directory),
        "files": [Path(f).name for f in outcome.files],
        "kind": outcome.result.kind,
        "spent": meta.get("ledger_total"),
        "passes": [{"index": r.index, "outputs": list(r.outputs), "tasks": r.tasks,
                    "seconds": r.seconds} for r in outcome.passes],
        "timings": dict(outcome.timings),
        "summary": repr(outcome.result.summary()),
    }), indent=2)


def _quiet_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the exit's flush raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (e.g. a test runner's capture)
        pass


@click.group(context_settings=CONTEXT)
@click.option("--traceback", is_flag=True, help="Show full tracebacks on errors.")
@click.version_option(package_name="dppca_dask", prog_name="dppca-dask")
def main(traceback: bool) -> None:
    """Differentially private PCA summaries of large datasets with Dask.

    \b
    Exit status:
      0  success
      1  user or data error (bad config or input, refused budget): one "Error:" line
      2  usage error (unknown option, missing argument)
      3  internal error (a bug; --traceback shows where)
      130 / 143  interrupted by Ctrl-C / SIGTERM
    A closed output pipe (e.g. `| head -1`) ends a command quietly with status 0.

    \b
    Run-config settings (run, plan), lowest precedence first:
      the CONFIG file < environment DPPCA_RUN__<KEY>__<SUBKEY>=value
      < --set key.path=value (repeatable)
    e.g. DPPCA_RUN__PRIVACY__EPS=0.5 or --set privacy.eps=0.5; values are YAML.
    The deployment's DPPCA_LEDGER__* settings (Dask config dppca.ledger) are separate.
    """
    import warnings

    warnings.formatwarning = _format_warning


def _format_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> str:
    """Warnings on the command line: one line, no source excerpt."""
    return f"Warning: {message}\n"


_SET_OPTION = click.option(
    "--set", "settings", multiple=True, metavar="KEY.PATH=VALUE",
    help="Override a config key (repeatable; the value is YAML, e.g. --set privacy.eps=0.5). "
         "Precedence: CONFIG < DPPCA_RUN__KEY__PATH environment variables < --set.")


def _load(config: str, settings: tuple[str, ...], strict: bool) -> Any:
    """The run config with environment and ``--set`` overrides, ``--strict`` applied; notes the
    task for :func:`cli_message`."""
    from dppca_dask.pipeline.config import load_config

    cfg = _strict(load_config(config, overrides=settings), strict)
    click.get_current_context().meta["dppca.task"] = cfg.task
    return cfg


def _pass_line(record: Any) -> None:
    """One line per data pass on stderr (logs: no progress bar)."""
    click.echo(f"Pass {record.index}: {', '.join(record.outputs)} ({record.tasks} tasks, "
               f"{record.seconds:.1f} s)", err=True)


def _progress(quiet: bool) -> tuple[bool, Callable[[Any], None] | None]:
    """The progress bar only on a terminal; one line per pass otherwise; nothing with -q."""
    if quiet:
        return False, None
    terminal = sys.stderr.isatty() and sys.stdout.isatty()
    return (True, None) if terminal else (False, _pass_line)


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--overwrite", is_flag=True, help="Replace an existing output directory.")
@click.option("--quiet", "-q", is_flag=True, help="No progress and no summary: only the final "
              "'Wrote ...' line (and warnings/errors on stderr).")
@click.option("--strict", is_flag=True, help="Refuse settings outside their guarantee "
              "(classical calibration at eps >= 1, delta >= 1/n) instead of warning.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON when done: directory, files, "
              "kind, spent, passes, timings, summary (errors as JSON too); no progress bar.")
@_SET_OPTION
@_handle_errors
def run(config: str, overwrite: bool, quiet: bool, strict: bool, settings: tuple[str, ...],
        as_json: bool) -> None:
    """Run the release described by CONFIG and write its outputs.

    A progress bar is shown on a terminal; in logs (stderr not a terminal) one line per data
    pass instead.
    """
    from dppca_dask.pipeline.runner import execute

    cfg = _load(config, settings, strict)
    bar, on_pass = _progress(quiet or as_json)
    with _stops_cleanly():
        outcome = execute(cfg, progress=bar, overwrite=overwrite or None,
                          on_warning=_warn_line, on_pass=on_pass)
    if as_json:
        click.echo(_outcome_json(outcome))
        return
    if not quiet:
        click.echo(repr(outcome.result.summary()))
        click.echo("")
    click.echo(f"Wrote {outcome.directory}/: " + ", ".join(Path(f).name for f in outcome.files))
    if not quiet:
        _echo_report(Path(outcome.directory))
        _echo_timings(outcome)


def _warn_line(message: str) -> None:
    """A guarantee warning on the command line: one line on stderr (``--strict`` refuses)."""
    click.echo(f"Warning: {message} (--strict refuses this)", err=True)


def _strict(cfg: Any, strict: bool) -> Any:
    """``cfg`` with ``budget_ledger.strict`` set when ``--strict`` was given."""
    if not strict:
        return cfg
    ledger = cfg.budget_ledger.model_copy(update={"strict": True})
    return cfg.model_copy(update={"budget_ledger": ledger})


@contextmanager
def _stops_cleanly() -> Iterator[None]:
    """SIGTERM (and Ctrl-C) raise inside the run, so its cleanup runs: temporary outputs are
    removed and the ledger reservation refunded, or kept if noise was drawn. Exit status 143."""
    from dppca_dask.pipeline.interrupts import Terminated, signals_raise

    try:
        with signals_raise():
            yield
    except Terminated:
        click.echo("Terminated (SIGTERM): temporary outputs removed; the budget reservation was "
                   "refunded, or kept as spent if noise had been drawn.", err=True)
        sys.exit(143)


def _echo_timings(outcome: Any) -> None:
    """Run times, for the operator only: they depend on the data, so no output file (result
    store, report, summary, config, figure) and no ledger records them."""
    parts = [f"{k.replace('_', ' ')} {v:.2f} s" for k, v in outcome.timings.items()]
    if parts:
        click.echo("Times (operator only: in no output file): "
                   + ", ".join(parts))


def _echo_report(directory: Path) -> None:
    if (directory / "report.html").exists():
        click.echo(f"Report: {directory / 'report.html'} (self-contained; open it in a browser)")


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--strict", is_flag=True, help="Refuse settings outside their guarantee instead "
              "of warning.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the plan as JSON: planned spend records, total, passes.")
@_SET_OPTION
@_handle_errors
def plan(config: str, as_json: bool, strict: bool, settings: tuple[str, ...]) -> None:
    """Show the resolved config of the run's task, budget plan and work size of CONFIG; reads
    metadata only (shape, names, that input.group exists), no data values.

    With --json: the release's planned spend records, their total and the data passes as JSON
    (keys records, total, passes, ...); the total is what the run reserves and spends.
    """
    from dppca_dask.pipeline.runner import plan_run

    planned = plan_run(_load(config, settings, strict))
    for message in planned.guarantees:
        _warn_line(message)
    click.echo(json.dumps(planned.as_dict(), indent=2) if as_json else planned.render())


@main.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("target", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet", "npy"]), default=None,
              help="Input format (default: from the file extension).")
@click.option("--chunk-rows", type=click.IntRange(min=1), default=None,
              help="Rows per Zarr chunk (default: about 64 MiB per chunk).")
@click.option("--columns", default=None, help="Comma-separated columns to keep.")
@click.option("--group-column", default=None, help="A label column stored as the 'group' variable.")
@click.option("--overwrite", is_flag=True, help="Replace TARGET if it exists.")
@click.option("--check-duplicates", is_flag=True,
              help="Report rows whose values repeat an earlier row (the Kendall tasks refuse "
                   "them; covariance does not mind). Not private: row numbers only.")
@click.option("--drop-duplicates", is_flag=True,
              help="Leave out rows whose values repeat an earlier row (the first stays).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: target, dropped, duplicates "
              "found (count; examples: row, the earlier row it repeats); errors as JSON too.")
@_handle_errors
def convert(source: str, target: str, fmt: str | None, chunk_rows: int | None,
            columns: str | None, group_column: str | None, overwrite: bool,
            check_duplicates: bool, drop_duplicates: bool, as_json: bool) -> None:
    """Convert a CSV, Parquet or .npy file SOURCE into a Zarr store TARGET.

    Duplicate rows (equal values in every feature column) are compared exactly; with
    --check-duplicates they are reported (one line on stderr: their count and first row numbers,
    counted from 0 without the header) and kept; --drop-duplicates leaves them out.
    """
    from dppca_dask.io.convert import DuplicateMode
    from dppca_dask.io.convert import convert as do_convert
    from dppca_dask.io.duplicates import Duplicates

    cols = [c.strip() for c in columns.split(",")] if columns else None
    found: list[Duplicates] = []
    mode: DuplicateMode = "drop" if drop_duplicates else "check" if check_duplicates else "keep"
    out = do_convert(source, target, fmt=fmt, chunk_rows=chunk_rows, columns=cols,
                     group_column=group_column, overwrite=overwrite, duplicates=mode,
                     on_duplicates=found.append)
    if as_json:
        click.echo(json.dumps({"target": str(out), "dropped": drop_duplicates, "duplicates": [
            {"count": item.count, "examples": [{"row": int(r), "repeats": int(e)}
                                               for r, e in item.examples]} for item in found]},
            indent=2))
        return
    for item in found:
        if item.count == 0:
            click.echo("No duplicate rows.", err=True)
        elif drop_duplicates:
            click.echo(f"Dropped {item.describe()}.", err=True)
        else:
            click.echo(f"Warning: {item.describe()}; the Kendall tasks (loading, scree, score, "
                       "pca) refuse duplicate rows: convert with --drop-duplicates to leave "
                       "them out.", err=True)
    click.echo(f"Wrote {out}")


def _json_ready(value: Any) -> Any:
    """``value`` with non-finite floats as strings ("inf", "nan"): strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    return value


INTERVAL_EXTRAS = frozenset({
    "cumulative_pve", "kendall_eigenvalue", "covariance_eigenvalue", "direction_identifiable",
    "frame_center_cell_lower", "frame_center_cell_upper", "frame_radius_cell_lower",
    "frame_radius_cell_upper", "frame_resolution", "scree_sampling_sd", "covariance_sampling_sd",
})
"""Variables ``inspect --json`` lists under ``intervals`` besides those with an
``interval_level``: the values the intervals are about, the flags, the frame's resolution and
the sampling sds."""

INTERVAL_VALUES_MAX = 1000
"""Larger interval variables (e.g. big histograms) are summarised (min, max), not listed."""


def _interval_entry(var: Any) -> dict[str, Any]:
    """One interval variable for ``inspect --json``: dims, coordinates, values (or min/max),
    level, description, and its assumption where it has one."""
    import numpy as np

    values = var.values
    entry: dict[str, Any] = {
        "dims": [str(d) for d in var.dims],
        "coords": {str(d): [str(v) for v in var[d].values] for d in var.dims
                   if d in var.coords and var.sizes[d] <= INTERVAL_VALUES_MAX},
        "level": var.attrs.get("interval_level"),
        "description": var.attrs.get("long_name") or var.attrs.get("description"),
    }
    if "assumption" in var.attrs:
        entry["assumption"] = var.attrs["assumption"]
    if values.size <= INTERVAL_VALUES_MAX:
        entry["values"] = values.tolist()
    else:
        finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values.ravel()
        entry["values"] = None
        entry["range"] = ([float(finite.min()), float(finite.max())] if finite.size
                          else None)
    return entry


def _describe_result(result: Any, path: Path, report: Path | None) -> dict[str, Any]:
    """``inspect --json``: the kind, the store's variables (dims, shape, private flag; a result
    of several parts, as dp_pca's, names them ``part/variable``), the intervals (every variable
    with an ``interval_level``, the values they are about, the flags, the frame's resolution
    and the sampling sds: dims, coordinates, values), the release's metadata (budgets, ledger,
    provenance) and the summary text."""
    nodes = ([(node.path.strip("/"), node.to_dataset()) for node in result.to_tree().subtree]
             if hasattr(result, "to_tree") else [("", result.dataset)])
    variables: dict[str, Any] = {}
    intervals: dict[str, Any] = {}
    dims: dict[str, int] = {}
    for prefix, ds in nodes:
        dims.update({str(k): int(v) for k, v in ds.sizes.items()})
        for name, var in ds.variables.items():
            key = f"{prefix}/{name}" if prefix else str(name)
            variables[key] = {"dims": [str(d) for d in var.dims],
                              "shape": [int(n) for n in var.shape],
                              "private": bool(var.attrs.get("private", 0))}
            if name in ds.data_vars and ("interval_level" in var.attrs
                                         or name in INTERVAL_EXTRAS):
                intervals[key] = _interval_entry(ds[name])
    return _json_ready({
        "path": str(path), "kind": result.kind, "dims": dims, "variables": variables,
        "intervals": intervals, "metadata": result.metadata, "summary": repr(result.summary()),
        "report": None if report is None else str(report)})


@main.command()
@click.argument("output", type=click.Path(exists=False))
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: kind, path, dims, variables (dims, shape, private), "
                   "intervals (each interval variable's dims, coordinates and values), metadata "
                   "(budgets, ledger, provenance) and the summary text.")
@_handle_errors
def inspect(output: str, as_json: bool) -> None:
    """Print the summary of a written result (a .zarr store or .nc file, or a run directory).

    Works for every result kind (loading, scree, score, pca, ...); a part of a dp_pca store can
    be named directly, e.g. ``pca.zarr/score``.
    """
    from dppca_dask import load_result  # the package import registers every result kind

    path = Path(output)
    run_directory = None
    if path.is_dir() and not (path / "zarr.json").exists():
        stores = sorted([*path.glob("*.zarr"), *path.glob("*.nc")])
        if not stores:
            raise DPPCAError(f"No result store (.zarr or .nc) found in {output!r}.")
        run_directory, path = path, stores[0]
    result = load_result(path)
    if as_json:
        report = (run_directory or path.parent) / "report.html"
        data = _describe_result(result, path, report if report.exists() else None)
        click.echo(json.dumps(data, indent=2, allow_nan=False))
        return
    click.echo(repr(result))
    click.echo("")
    click.echo(repr(result.summary()))
    _echo_report(run_directory or path.parent)


def _fresh_run_directory(base: Path) -> Path:
    stamp = time.strftime("run-%Y%m%d-%H%M%S")
    candidate, k = base / stamp, 1
    while candidate.exists():
        k += 1
        candidate = base / f"{stamp}-{k}"
    return candidate


def _check_demo_directory(base: Path) -> None:
    """The demo's folder must be a folder (or new), and not inside a Zarr store (someone's data)."""
    from dppca_dask.errors import ParameterError
    from dppca_dask.io.identity import resolve_dataset

    if base.exists() and not base.is_dir():
        raise ParameterError(f"The '--directory' parameter of demo must be a folder (it is "
                             f"created if missing). Got {str(base)!r}, an existing file, instead.")
    probe = base
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    root = resolve_dataset(str(probe), pick=False)
    if root.array is not None or any((probe / f).exists() for f in ("zarr.json", ".zgroup",
                                                                      ".zarray")):
        raise ParameterError(f"The '--directory' parameter of demo must not be inside a Zarr "
                             f"store ({root.location!r}). Got {str(base)!r} instead.")


@main.command()
@click.option("--directory", default="dppca-demo", show_default=True,
              help="Where the demo dataset, config and outputs go.")
@click.option("--eps", default=1.0, show_default=True, type=float, help="Total epsilon.")
@click.option("--delta", default=1e-5, show_default=True, type=float, help="Total delta.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON when done (as run --json).")
@_handle_errors
def demo(directory: str, eps: float, delta: float, quiet: bool, as_json: bool) -> None:
    """Write a synthetic Zarr dataset (SPEC 'gau': 5000 x 20, five groups) and run dp_pca on it.

    One budget for the shared directions, the scree values and the grouped score histograms;
    the run writes the store, the figures, synthetic samples and report.html. The dataset is
    created once and reused; each run writes a new timestamped output directory, so nothing is
    ever overwritten.
    """
    import yaml

    from dppca_dask.io.datasets import write_demo_dataset
    from dppca_dask.pipeline.config import RunConfig
    from dppca_dask.pipeline.runner import execute

    base = Path(directory)
    _check_demo_directory(base)
    data = base / "gau.zarr"
    if not data.exists():
        base.mkdir(parents=True, exist_ok=True)
        with _stops_cleanly():
            write_demo_dataset(data)
        if not quiet and not as_json:
            click.echo(f"Wrote the demo dataset {data}")
    settings = {
        "input": {"path": str(data), "array": "X", "group": "group"},
        "task": "pca",
        "privacy": {"eps": eps, "delta": delta},
        # C_clip: a public clip level for the squared centred scores, about 4 x the largest PC
        # variance implied by the generator's known parameters (not computed from the data).
        "pca": {"k": 10, "scree_control": {"clipped": {"C_clip": 150}},
                "calibration": "analytic", "sensitivity": "tight"},  # the recommended settings
        "cluster": {"kind": "local"},
        "output": {"directory": str(_fresh_run_directory(base)),
                   "formats": ["zarr", "netcdf"]},
    }
    cfg = RunConfig.from_dict(settings)
    config_path = base / "demo.yaml"
    config_path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    bar, on_pass = _progress(quiet or as_json)  # as `run`: a bar on a terminal, else lines
    with _stops_cleanly():
        outcome = execute(cfg, progress=bar, on_warning=_warn_line, on_pass=on_pass)
    if as_json:
        click.echo(_outcome_json(outcome))
        return
    if not quiet:
        click.echo(repr(outcome.result.summary()))
        click.echo(f"\nConfig: {config_path} (rerun with: dppca-dask run {config_path} "
                   "after changing output.directory)")
        click.echo(f"Wrote {outcome.directory}/: "
                   + ", ".join(Path(f).name for f in outcome.files))
        _echo_report(Path(outcome.directory))
        _echo_timings(outcome)


class _BudgetGroup(click.Group):
    """``dppca-dask budget DATASET`` is ``dppca-dask budget show DATASET``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


_LEDGER_OPTION = click.option(
    "--ledger", "ledger_path", default=None,
    help="The ledger (a path or sqlite:///path; default: the deployment's dppca.ledger.url).")


@main.group(cls=_BudgetGroup)
def budget() -> None:
    """The persistent budget ledger: a dataset's spend, and the custodian's commands.

    `dppca-dask budget DATASET` is `dppca-dask budget show DATASET`.
    """


@budget.command("show")
@click.argument("dataset")
@click.option("--array", default=None, help="The array of a Zarr group (default: the one the "
              "reader picks; every array of the store recorded if it cannot tell).")
@_LEDGER_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_handle_errors
def budget_show(dataset: str, array: str | None, ledger_path: str | None, as_json: bool) -> None:
    """Releases, reservations (pid, host, start of unfinished runs) and the cumulative spend,
    basic and tight, of DATASET (a path or URL in any spelling, or a dataset id).

    A dataset the ledger does not know, or a ledger that does not exist, is an error. --ledger
    may name a JSON-lines ledger of an earlier version: it is read as is.
    """
    from dppca_dask.pipeline.budget_commands import show

    click.echo(show(dataset, array, ledger_path, as_json))


@budget.command("list")
@_LEDGER_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: one object per dataset, as budget show --json.")
@_handle_errors
def budget_list(ledger_path: str | None, as_json: bool) -> None:
    """Every dataset of the ledger: id, last location, cap and cumulative spend."""
    from dppca_dask.pipeline.budget_commands import list_datasets

    click.echo(list_datasets(ledger_path, as_json))


@budget.command("cap")
@click.argument("dataset")
@click.option("--array", default=None, help="The array of a Zarr group.")
@click.option("--eps", type=float, default=None, help="Cap on the cumulative epsilon (with --delta).")
@click.option("--delta", type=float, default=None, help="The delta of the cap (with --eps).")
@click.option("--rho", type=float, default=None, help="Cap on the cumulative zCDP rho.")
@click.option("--remove", is_flag=True, help="Remove the dataset's cap.")
@click.option("--analyst", default=None, help="Set the cap of this analyst's releases on "
              "DATASET instead ('*': each analyst without one of their own; the release "
              "service's analysts, `dppca-dask serve`).")
@_LEDGER_OPTION
@_handle_errors
def budget_cap(dataset: str, array: str | None, eps: float | None, delta: float | None,
               rho: float | None, remove: bool, analyst: str | None,
               ledger_path: str | None) -> None:
    """Set the custodian's cap of DATASET (a run config can only lower it for its run).

    A run is admitted when the dataset's recorded releases plus the planned one compose to a
    tight epsilon at delta = D of at most E (--eps E --delta D), and, with --rho R, to a zCDP
    rho of at most R. With --analyst, the same test on that analyst's releases alone (both
    caps apply to the release service's runs).
    """
    from dppca_dask.pipeline.budget_commands import cap

    click.echo(cap(dataset, array, eps, delta, rho, remove, ledger_path, analyst))


@budget.command("verify")
@_LEDGER_OPTION
@click.option("--head", default=None, metavar="HASH",
              help="A head hash noted earlier (printed by this command): the log must still "
                   "contain it, so a log rewritten from the start is detected too.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: ok, and per log the "
              "entries, head and problems.")
@_handle_errors
def budget_verify(ledger_path: str | None, head: str | None, as_json: bool) -> None:
    """Check the ledger's tamper-evident release log: every reservation, release, refusal,
    failure and cap is an entry chained by sha256 to the one before it. An edited, deleted,
    reordered or appended-out-of-band entry, or an edited reservation or cap row, is named;
    exit status 1 when the log is broken.
    """
    from dppca_dask.pipeline.budget_commands import verify_log

    ok, text = verify_log(ledger_path, head, as_json)
    click.echo(text if ok or as_json else f"Error: {text}", err=not ok and not as_json)
    if not ok:
        sys.exit(EXIT_USER_ERROR)


@budget.command("adopt")
@click.argument("dataset")
@click.option("--array", default=None, help="The array of a Zarr group (default: the reader's pick).")
@_LEDGER_OPTION
@_handle_errors
def budget_adopt(dataset: str, array: str | None, ledger_path: str | None) -> None:
    """Write a dataset id into DATASET, a Zarr store without one; its history carries over.

    A fresh UUID goes into the dppca_dataset_id attribute of the array and the store root (a
    metadata write; no data is read), so that copies of the store keep its budget.
    """
    from dppca_dask.pipeline.budget_commands import adopt

    click.echo(adopt(dataset, array, ledger_path))


@budget.command("release")
@click.argument("reservation_id")
@click.option("--spent", is_flag=True, help="Keep it as spent instead of refunding it (noise may "
              "have been drawn, or outputs written).")
@click.option("--force", is_flag=True, help="Even if its process still runs on this host.")
@_LEDGER_OPTION
@_handle_errors
def budget_release(reservation_id: str, spent: bool, force: bool, ledger_path: str | None) -> None:
    """Release the reservation of a run that did not finish (e.g. killed with kill -9)."""
    from dppca_dask.pipeline.budget_commands import release

    click.echo(release(reservation_id, spent, force, ledger_path))


@budget.command("import")
@click.argument("old", type=click.Path(exists=True, dir_okay=False))
@_LEDGER_OPTION
@_handle_errors
def budget_import(old: str, ledger_path: str | None) -> None:
    """Copy OLD, a JSON-lines ledger of an earlier version, into the ledger (OLD is only read;
    importing twice adds nothing)."""
    from dppca_dask.pipeline.budget_commands import import_old

    click.echo(import_old(old, ledger_path))


@main.command()
@click.option("--config", "app_config", type=click.Path(dir_okay=False), default=None,
              help="APP.yaml: the catalogue of Zarr stores, uploads, output directory, cluster "
                   "and whether non-private panels are offered (default: built-in settings, "
                   "the demo dataset if ./dppca-demo/gau.zarr exists).")
@click.option("--port", type=click.IntRange(1, 65535), default=5006, show_default=True,
              help="The port to listen on (127.0.0.1 only).")
@click.option("--server", default=None, metavar="URL",
              help="Work against a release service (`dppca-dask serve`): its datasets, plans, "
                   "runs and ledger; the token from DPPCA_TOKEN or --token-file.")
@click.option("--token-file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="With --server: a file holding the bearer token.")
@_handle_errors
def app(app_config: str | None, port: int, server: str | None, token_file: str | None) -> None:
    """A local web app (Panel, the `app` extra) on http://127.0.0.1:PORT/: choose a dataset and
    the settings, run pca releases through the same pipeline and ledger as `dppca-dask run`
    (with --server: on a release service, as `dppca-dask submit` does).

    Every run spends budget from the dataset's ledger; the page shows the spend and the cap.
    Stop it with Ctrl-C.
    """
    from dppca_dask.app import MISSING_PANEL, panel_available, serve

    if not panel_available():
        click.echo(f"Error: {MISSING_PANEL}", err=True)
        sys.exit(EXIT_USER_ERROR)
    token = Path(token_file).read_text().strip() if token_file else None
    where = "" if server is None else f" against the release service {server}"
    click.echo(f"dppca-dask app: http://127.0.0.1:{port}/{where} (Ctrl-C stops it)", err=True)
    serve(app_config, port=port, address="127.0.0.1", wording=cli_message, server=server,
          token=token)


class _ServeGroup(click.Group):
    """``dppca-dask serve SERVICE.yaml`` is ``dppca-dask serve start SERVICE.yaml``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["start", *args]
        return super().parse_args(ctx, args)


def _need_service() -> None:
    from dppca_dask.service import MISSING_SERVICE, service_available

    if not service_available():
        raise DPPCAError(MISSING_SERVICE)


@main.group(cls=_ServeGroup)
def serve() -> None:
    """The release service: analysts submit run configs over HTTP, the custodian's server
    holds the data, the ledger and the cluster; only private outputs leave.

    `dppca-dask serve SERVICE.yaml` is `dppca-dask serve start SERVICE.yaml`; the service file
    (catalogue, caps, ledger, cluster, authentication, limits) is described in
    docs/guide/deployment.md ("Release service").
    """


@serve.command("start")
@click.argument("service_file", metavar="SERVICE.yaml", type=click.Path(dir_okay=False))
@click.option("--host", default=None, help="Listen on this address (default: listen.host, "
              "127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Listen on this port (default: listen.port, 8000; 0: a free one).")
@_handle_errors
def serve_start(service_file: str, host: str | None, port: int | None) -> None:
    """Start the server of SERVICE.yaml and serve until Ctrl-C or SIGTERM.

    It refuses to start on a broken release log (`dppca-dask budget verify`), writes the
    file's caps into the ledger, settles the jobs a stopped server left (rerun when no noise
    was drawn, failed when it was) and resumes the queue. Stopping it stops the running jobs
    the same way.
    """
    _need_service()
    from dppca_dask.service.server import serve as run_server

    run_server(service_file, host=host, port=port, say=lambda line: click.echo(line, err=True))


@serve.group("token")
def serve_token() -> None:
    """The analysts' bearer tokens (stored hashed in the server's state directory)."""


@serve_token.command("add")
@click.argument("service_file", metavar="SERVICE.yaml", type=click.Path(dir_okay=False))
@click.argument("analyst")
@click.option("--note", default="", help="A note kept with the token (who, what for).")
@_handle_errors
def serve_token_add(service_file: str, analyst: str, note: str) -> None:
    """Issue a bearer token for ANALYST: printed once on stdout (only its hash is kept).

    Give it to the analyst over a safe channel; they set DPPCA_TOKEN to it. A running server
    accepts it at once.
    """
    from dppca_dask.service.server import add_token

    token_id, token, where = add_token(service_file, analyst, note)
    click.echo(f"Token {token_id} for analyst {analyst!r} (shown only now; its hash is kept in "
               f"{where}; revoke it with `dppca-dask serve token revoke {service_file} "
               f"{token_id}`):", err=True)
    click.echo(token)


@serve_token.command("revoke")
@click.argument("service_file", metavar="SERVICE.yaml", type=click.Path(dir_okay=False))
@click.argument("which")
@_handle_errors
def serve_token_revoke(service_file: str, which: str) -> None:
    """Revoke the token with id WHICH, or every token of the analyst WHICH (at once, also on
    a running server)."""
    from dppca_dask.service.server import revoke_token

    revoked = revoke_token(service_file, which)
    if not revoked:
        raise DPPCAError(f"No active token with id or analyst {which!r} "
                         f"(`dppca-dask serve token list {service_file}` lists them).")
    click.echo("Revoked: " + ", ".join(f"{t.id} ({t.analyst})" for t in revoked))


@serve_token.command("list")
@click.argument("service_file", metavar="SERVICE.yaml", type=click.Path(dir_okay=False))
@_handle_errors
def serve_token_list(service_file: str) -> None:
    """The tokens issued: id, analyst, when, revoked or active, note (never the token)."""
    from dppca_dask.service.server import list_tokens

    for t in list_tokens(service_file):
        state = f"revoked {t.revoked}" if t.revoked else "active"
        click.echo(f"{t.id}  {t.analyst:<20} issued {t.created}  {state}"
                   + (f"  ({t.note})" if t.note else ""))


_SERVER_OPTION = click.option(
    "--server", envvar="DPPCA_SERVER", required=True, metavar="URL",
    help="The release service's URL (default: the DPPCA_SERVER environment variable). The "
         "token comes from DPPCA_TOKEN or --token-file.")
_TOKEN_OPTION = click.option(
    "--token-file", type=click.Path(dir_okay=False, exists=True), default=None,
    help="A file holding the bearer token (default: the DPPCA_TOKEN environment variable).")


def _client(server: str, token_file: str | None) -> Any:
    from dppca_dask.client import Client

    token = Path(token_file).read_text().strip() if token_file else None
    return Client(server, token)


def _job_line(job: dict[str, Any]) -> str:
    """A job's state in one line (passes done of planned; no times)."""
    state = job["state"]
    passes = job.get("passes") or {}
    if state == "queued":
        return f"Job {job['id']}: queued (position {job.get('position') or '?'})"
    if state == "running":
        planned = passes.get("planned")
        of = f" of {planned}" if planned else ""
        stop = "; cancelling" if job.get("cancelling") else ""
        return f"Job {job['id']}: running, {passes.get('done', 0)}{of} data passes done{stop}"
    message = f": {job['message']}" if job.get("message") else ""
    return f"Job {job['id']}: {state}{message}"


def _output_of(config: str) -> str | None:
    """The config's output.directory (where `submit` downloads), if it names one."""
    import yaml

    from dppca_dask.pipeline.config import safe_load_unique

    try:
        data = safe_load_unique(Path(config).read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, DPPCAError):
        return None
    output = data.get("output") if isinstance(data, dict) else None
    directory = output.get("directory") if isinstance(output, dict) else None
    return directory if isinstance(directory, str) and directory else None


def _wait_and_fetch(client: Any, job: dict[str, Any], output: str | None, overwrite: bool,
                    quiet: bool, as_json: bool) -> None:
    """Wait for ``job``, then download a release (``submit`` and ``remote fetch``)."""
    from dppca_dask.client import ServerError

    say = (lambda job: None) if quiet or as_json else (
        lambda job: click.echo(_job_line(job), err=True))
    try:
        final = client.wait(job["id"], on_update=say)
    except KeyboardInterrupt:
        click.echo(f"Stopped waiting; the job goes on on the server: `dppca-dask remote status "
                   f"{job['id']}`, `dppca-dask remote fetch {job['id']}`.", err=True)
        sys.exit(130)
    if final["state"] != "released":
        if as_json:
            click.echo(json.dumps(final, indent=2))
        raise ServerError(f"Job {final['id']} {final['state']}: {final.get('message') or ''}"
                          .rstrip(": "))
    target = client.download(final["id"], output or f"dppca-output/{final['id']}",
                             overwrite=overwrite)
    if as_json:
        click.echo(json.dumps({**final, "directory": str(target)}, indent=2))
        return
    files = sorted(p.name for p in target.iterdir())
    click.echo(f"Wrote {target}/: " + ", ".join(files))
    if not quiet and (target / "report.html").exists():
        _echo_report(target)


@main.command()
@click.argument("config", type=click.Path(dir_okay=False, exists=True))
@_SERVER_OPTION
@_TOKEN_OPTION
@click.option("--output", default=None, help="Where to download the outputs (default: the "
              "config's output.directory, else dppca-output/JOB_ID).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output directory.")
@click.option("--no-wait", is_flag=True, help="Submit and print the job's id; do not wait.")
@click.option("--quiet", "-q", is_flag=True, help="Only the final 'Wrote ...' line.")
@click.option("--json", "as_json", is_flag=True, help="Print the final job as JSON.")
@_handle_errors
def submit(config: str, server: str, token_file: str | None, output: str | None,
           overwrite: bool, no_wait: bool, quiet: bool, as_json: bool) -> None:
    """Submit CONFIG to a release service (`dppca-dask serve`), wait for it and download its
    private outputs.

    CONFIG is a run config whose input.path names a dataset of the server's catalogue
    (`dppca-dask remote datasets` lists them); the server reserves its budget before reading
    any data, runs it on its cluster, and hands back the stores, figures, report and summary.
    Ctrl-C stops waiting, not the job.
    """
    client = _client(server, token_file)
    target = output or _output_of(config)
    if target is not None and Path(target).exists() and not overwrite and not no_wait:
        from dppca_dask.errors import OutputExistsError

        raise OutputExistsError(f"Output directory {target!r} already exists; use --overwrite "
                                "to replace it, or --output to choose another (nothing was "
                                "submitted).")
    job = client.submit(Path(config))
    for note in job.get("notes", []):
        click.echo(f"Note: {note}", err=True)
    if not quiet and not as_json:
        spend = job["spend"]
        click.echo(f"Submitted job {job['id']}: {job['task']} on {job['dataset']}, reserved "
                   f"eps = {spend['eps']:.6g}, delta = {spend['delta']:.3g}.", err=True)
    if no_wait:
        click.echo(json.dumps(job, indent=2) if as_json else job["id"])
        return
    _wait_and_fetch(client, job, target, overwrite, quiet, as_json)


@main.group()
def remote() -> None:
    """An analyst's other commands against a release service (`dppca-dask submit` submits):
    its datasets, plans, jobs, cancelling and downloading."""


@remote.command("datasets")
@_SERVER_OPTION
@_TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_handle_errors
def remote_datasets(server: str, token_file: str | None, as_json: bool) -> None:
    """The datasets you may use: n x p, variables, caps, spend and what remains."""
    found = _client(server, token_file).datasets()
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return

    def cap(c: dict[str, Any] | None) -> str:
        if not c:
            return "none"
        parts = [] if c.get("eps") is None else [f"eps = {c['eps']:g}, delta = {c['delta']:g}"]
        return " and ".join(parts + ([] if c.get("rho") is None else [f"rho = {c['rho']:g}"]))

    for d in found:
        mine = d["analyst"]
        left = (d["remaining"] or {}).get("eps")
        mine_left = (mine["remaining"] or {}).get("eps")
        click.echo(f"{d['name']}: {d['n']} x {d['p']} ({', '.join(d['variables'][:8])}"
                   + (", ..." if d["p"] > 8 else "") + ")"
                   + (f", group variable {d['group']}" if d.get("group") else ""))
        click.echo(f"  dataset cap {cap(d['cap'])}; remaining eps ~ "
                   f"{'-' if left is None else f'{left:.4g}'}"
                   + (f"; your cap {cap(mine['cap'])}, remaining eps ~ "
                      f"{'-' if mine_left is None else f'{mine_left:.4g}'}"
                      if mine["cap"] else ""))


@remote.command("plan")
@click.argument("config", type=click.Path(dir_okay=False, exists=True))
@_SERVER_OPTION
@_TOKEN_OPTION
@_handle_errors
def remote_plan(config: str, server: str, token_file: str | None) -> None:
    """Plan CONFIG on the server (as `dppca-dask plan --json`; nothing is spent): refused
    past a cap, as the submission would be."""
    planned = _client(server, token_file).plan(Path(config))
    for note in planned.pop("notes", []):
        click.echo(f"Note: {note}", err=True)
    for warning in planned.pop("guarantees", []):
        _warn_line(warning)
    click.echo(json.dumps(planned, indent=2))


@remote.command("jobs")
@_SERVER_OPTION
@_TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_handle_errors
def remote_jobs(server: str, token_file: str | None, as_json: bool) -> None:
    """Your jobs on the server, oldest first."""
    found = _client(server, token_file).jobs()
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    for job in found:
        click.echo(f"{_job_line(job)} [{job['task']} on {job['dataset']}, submitted "
                   f"{job['submitted']}]")


@remote.command("status")
@click.argument("job_id")
@_SERVER_OPTION
@_TOKEN_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_handle_errors
def remote_status(job_id: str, server: str, token_file: str | None, as_json: bool) -> None:
    """One job's state, data passes and files."""
    job = _client(server, token_file).job(job_id)
    if as_json:
        click.echo(json.dumps(job, indent=2))
        return
    click.echo(_job_line(job))
    for f in job.get("files") or []:
        click.echo(f"  {f['name']} ({f['bytes']} bytes{', a folder' if 'folder' in f['kind'] else ''})")


@remote.command("cancel")
@click.argument("job_id")
@_SERVER_OPTION
@_TOKEN_OPTION
@_handle_errors
def remote_cancel(job_id: str, server: str, token_file: str | None) -> None:
    """Cancel a job: a queued one is refunded; a running one stops (refunded before its first
    noise draw, spent after it)."""
    client = _client(server, token_file)
    job = client.cancel(job_id)
    if job["state"] == "running":
        job = client.wait(job_id, poll=0.5)
    click.echo(_job_line(job))


@remote.command("fetch")
@click.argument("job_id")
@_SERVER_OPTION
@_TOKEN_OPTION
@click.option("--output", default=None, help="Where to download (default dppca-output/JOB_ID).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output directory.")
@_handle_errors
def remote_fetch(job_id: str, server: str, token_file: str | None, output: str | None,
                 overwrite: bool) -> None:
    """Wait for a job (again, e.g. after Ctrl-C) and download its outputs."""
    client = _client(server, token_file)
    _wait_and_fetch(client, client.job(job_id), output, overwrite, False, False)


_VERSIONED = ("dppca_dask", "numpy", "scipy", "dask", "distributed", "zarr", "xarray", "pandas",
              "pyarrow", "h5netcdf", "fsspec", "numba", "pydantic", "click", "matplotlib")


@main.command()
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: {package: version or null}, with python.")
@_handle_errors
def versions(as_json: bool) -> None:
    """Print the versions of dppca_dask and its main dependencies (and Python's)."""
    import platform
    from importlib import metadata

    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    for name, version in found.items():
        click.echo(f"{name}: {version or 'not installed'}")


if __name__ == "__main__":  # pragma: no cover
    main()
