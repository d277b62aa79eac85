"""A browser session's state: the dataset's budget in the ledger, runs and their history.

Every release goes through :func:`dppca_dask.pipeline.runner.execute` -- the task code, the
configured cluster and the deployment's persistent ledger of ``dppca-dask run`` -- in a worker
thread, so the page stays live; :class:`Progress` is what the page polls (data passes done out
of the plan's passes, and the phase). A run past the dataset's cap is refused by the ledger
before any data is read, with its own message. No Panel here.
"""

from __future__ import annotations

import io
import math
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dppca_dask.app.catalogue import DatasetChoice

__all__ = ["NO_CAP", "BudgetStatus", "Progress", "Release", "Session", "budget_status",
           "fresh_run_directory", "remaining_text", "zip_directory"]


NO_CAP = "no cap (runs are recorded, not limited)"


@dataclass(frozen=True)
class BudgetStatus:
    """A dataset's account in the ledger: its id, cap and cumulative spend (in words), and what
    remains of the cap (:func:`remaining_text`)."""

    dataset_id: str
    cap: str
    spent: str
    ledger: str
    remaining: str = NO_CAP

    @property
    def line(self) -> str:
        """The page's ledger line."""
        return (f"Ledger: dataset {self.dataset_id} -- spent: {self.spent}; cap: {self.cap} "
                f"(ledger {self.ledger})")


def remaining_text(cap: Any, spend: Any) -> str:
    """What remains of a dataset's cap (``cap``: a :class:`~dppca_dask.pipeline.budget_cap.Cap`
    or None; ``spend``: its :class:`~dppca_dask.pipeline.budget_cap.Spend` at the cap's δ, or
    None), 4 significant digits: the cap's ε less the tight ε spent (the figure the cap is
    checked on), and its ρ less the ρ spent.

    Examples
    --------
    >>> from dppca_dask.pipeline.budget_cap import Cap, Spend
    >>> remaining_text(Cap(eps=3.0, delta=1e-4), Spend(1.0, 2e-5, 0.0, 1.3333333, 1e-4))
    "eps = 1.667 at delta = 0.0001 (of the cap's eps = 3)"
    >>> remaining_text(None, None)
    'no cap (runs are recorded, not limited)'
    """
    if cap is None:
        return NO_CAP
    parts = []
    if cap.eps is not None:
        used = 0.0 if spend is None else float(spend.tight_eps)
        left = max(0.0, cap.eps - used) if not math.isnan(used) else 0.0
        parts.append(f"eps = {left:.4g} at delta = {cap.delta:.4g} (of the cap's eps = "
                     f"{cap.eps:.4g})")
    if cap.rho is not None:
        used = 0.0 if spend is None else float(spend.rho)
        parts.append(f"rho = {max(0.0, cap.rho - used):.4g} (of the cap's rho = {cap.rho:.4g})")
    return " and ".join(parts)


def budget_status(choice: DatasetChoice) -> BudgetStatus:
    """What the deployment's ledger holds for ``choice`` (reading never creates a ledger)."""
    from dppca_dask.io.identity import resolve_dataset
    from dppca_dask.pipeline.deployment import deployment_settings, open_deployment_ledger

    settings = deployment_settings()
    where = settings.ledger_path
    identity = resolve_dataset(choice.path, choice.array)
    entry = spend = None
    if where.exists():
        ledger = open_deployment_ledger(where, settings, create=False)
        entry = ledger.dataset(identity.dataset_id)
        if entry is not None:
            spend = ledger.spent(entry.id)
    cap = "none (runs are recorded, not limited)" if entry is None or entry.cap is None \
        else entry.cap.describe()
    return BudgetStatus(identity.dataset_id, cap,
                        "nothing" if spend is None else spend.describe(), str(where),
                        remaining_text(None if entry is None else entry.cap, spend))


def fresh_run_directory(base: str | Path) -> Path:
    """A new ``run-YYYYmmdd-HHMMSS[-k]`` directory name under ``base`` (not created)."""
    stamp = time.strftime("run-%Y%m%d-%H%M%S")
    root = Path(base)
    candidate, k = root / stamp, 1
    while candidate.exists():
        k += 1
        candidate = root / f"{stamp}-{k}"
    return candidate


def zip_directory(directory: str | Path) -> bytes:
    """The run directory as a zip archive (its folder name at the top).

    Every entry carries the same fixed date (1980-01-01) and mode: a file's time of writing
    depends on how long the run took, which depends on the data."""
    root = Path(directory)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                info = zipfile.ZipInfo(str(Path(root.name) / path.relative_to(root)),
                                       date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


@dataclass
class Progress:
    """A run's progress, written by the run's thread and read by the page."""

    planned_passes: int | None = None
    passes: list[str] = field(default_factory=list)
    phase: str = "idle"
    started: float = field(default_factory=time.monotonic)
    warnings: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def on_pass(self, record: Any) -> None:
        with self.lock:
            self.passes.append(f"Pass {record.index}: {', '.join(record.outputs)} "
                               f"({record.tasks} tasks, {record.seconds:.1f} s)")
            self.phase = "data passes"

    def on_warning(self, message: str) -> None:
        with self.lock:
            self.warnings.append(message)

    def fraction(self) -> float | None:
        """Passes done out of the plan's passes (``None``: the plan gives no count)."""
        with self.lock:
            if not self.planned_passes:
                return None
            return min(1.0, len(self.passes) / self.planned_passes)

    def text(self) -> str:
        with self.lock:
            done = len(self.passes)
            total = f" of {self.planned_passes}" if self.planned_passes else ""
            elapsed = time.monotonic() - self.started
            return (f"Running ({self.phase}): {done}{total} data passes done, "
                    f"{elapsed:.0f} s")


@dataclass(frozen=True)
class Release:
    """One release of this session: where its run directory is and the budget around it."""

    number: int
    dataset: str
    directory: str
    spend: str
    before: BudgetStatus
    after: BudgetStatus
    result: Any
    files: tuple[str, ...]

    @property
    def title(self) -> str:
        return f"#{self.number} {Path(self.directory).name} on {self.dataset} ({self.spend})"

    @property
    def report(self) -> Path:
        return Path(self.directory) / "report.html"


class Session:
    """This browser session's releases (newest last)."""

    def __init__(self) -> None:
        self.history: list[Release] = []

    def run(self, config: Any, plan: Any, choice: DatasetChoice, progress: Progress) -> Release:
        """Run ``config`` with :func:`~dppca_dask.pipeline.runner.execute` (blocking: call it
        from a worker thread); raises what ``execute`` raises (a refusal past the cap is the
        ledger's :class:`~dppca_dask.errors.BudgetError`)."""
        from dppca_dask.pipeline.runner import execute

        before = budget_status(choice)
        progress.planned_passes = plan.release.passes
        progress.phase = "reserving budget, starting the cluster"
        outcome = execute(config, progress=False, on_warning=progress.on_warning,
                          on_pass=progress.on_pass)
        after = budget_status(choice)
        spend = plan.spend
        release = Release(len(self.history) + 1, choice.label, outcome.directory,
                          f"eps = {spend.eps:.4g}, delta = {spend.delta:.3g}", before, after,
                          outcome.result, outcome.files)
        self.history.append(release)
        return release
