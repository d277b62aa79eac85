"""One job's process: ``python -m dppca_dask.service.worker JOB_DIR``.

It runs the job's config through :func:`~dppca_dask.pipeline.runner.execute` -- the task code,
the server's cluster, the ledger -- with the reservation the server made when the job was
submitted (:class:`~dppca_dask.pipeline.runner.Reserved`). SIGTERM (a cancel, the time limit,
the server stopping) ends it as it ends ``dppca-dask run``: refunded before the first noise
draw, kept as spent after it. Just *before* the first draw it creates ``JOB_DIR/drawn`` (synced
to disk), so a worker killed with SIGKILL is known to have drawn noise. Files it writes:
``progress.json`` (data passes done), ``outcome.json`` (released or failed, and the error's
type) and ``output/`` (what the analyst may download); its log goes to the server's
``worker.log``, never to the analyst.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

__all__ = ["main", "withheld"]


def _write(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically (a reader never sees half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _mark_drawn(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def withheld(result: Any, group_sizes_public: bool) -> list[str]:
    """What in ``result`` is outside the privacy guarantee and not allowed by the catalogue (a
    grouped release's group sizes are allowed where the catalogue names the group variable)."""
    from dppca_dask.results.html import non_private_elements

    found = non_private_elements(result)
    if group_sizes_public:
        found = [f for f in found if "unless group sizes are public" not in f]
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    job = Path(args[0])
    spec = json.loads((job / "job.json").read_text())
    from dppca_dask.pipeline.config import RunConfig
    from dppca_dask.pipeline.interrupts import signals_raise
    from dppca_dask.pipeline.ledger import Ledger
    from dppca_dask.pipeline.runner import Reserved, execute

    where = spec["ledger"]
    ledger = Ledger(where["path"], journal_mode=where["journal_mode"], caps=where["caps"],
                    accountant="tight")
    done = {"passes": 0}

    def on_pass(record: Any) -> None:
        done["passes"] += 1
        _write(job / "progress.json", done)
        print(f"Pass {record.index}: {', '.join(record.outputs)} ({record.tasks} tasks, "
              f"{record.seconds:.1f} s)", file=sys.stderr, flush=True)

    try:
        config = RunConfig.from_dict(spec["config"])
        with signals_raise():
            outcome = execute(config, progress=False, on_pass=on_pass,
                              on_warning=lambda m: print(f"Warning: {m}", file=sys.stderr),
                              reservation=Reserved(ledger, spec["reservation"]),
                              on_first_draw=lambda: _mark_drawn(job / "drawn"))
    except BaseException as exc:  # noqa: BLE001 -- every end is reported to the server
        traceback.print_exc()
        _write(job / "outcome.json", {"status": "failed", "error": type(exc).__name__,
                                      "drawn": (job / "drawn").exists()})
        return 143 if type(exc).__name__ == "Terminated" else 1
    hidden = withheld(outcome.result, bool(spec.get("group_sizes_public")))
    timings = ", ".join(f"{k} {v:.2f} s" for k, v in outcome.timings.items())
    print(f"Released; times (the custodian's log only): {timings}", file=sys.stderr)
    _write(job / "outcome.json", {"status": "released", "withheld": hidden, "drawn": True})
    return 0


if __name__ == "__main__":  # pragma: no cover -- run by the server as a process
    sys.exit(main())
