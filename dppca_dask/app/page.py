"""The page of ``dppca-dask app``: the form, the dataset's ledger line, runs and their history.

One :class:`Page` per browser session. "Check" validates the form as ``dppca-dask plan`` does and
shows the plan; "Run" checks again, then runs the release in a worker thread through the same
:func:`~dppca_dask.pipeline.runner.execute` as ``dppca-dask run`` (task code, configured
cluster, the deployment's ledger), polling its progress. Errors are the CLI's one-line messages.
"""

from __future__ import annotations

import asyncio
import html
from pathlib import Path
from typing import Any, Literal

import panel as pn

from dppca_dask.app.catalogue import (
    AppConfig,
    convert_upload,
    dataset_choices,
    describe_choice,
    guess_group_column,
    numeric_columns,
    read_upload_frame,
)
from dppca_dask.app.form import Form
from dppca_dask.app.settings import Checked, Wording, check, run_settings
from dppca_dask.app.state import (
    BudgetStatus,
    Progress,
    Release,
    Session,
    budget_status,
    fresh_run_directory,
)
from dppca_dask.app.view import WRAP, budget_pane, release_view
from dppca_dask.errors import DPPCAError
from dppca_dask.pipeline.wording import cli_message

__all__ = ["Page", "serve_app"]

_NONE = "(no group column)"
AlertKind = Literal["info", "success", "danger"]


class Page:
    """The widgets and callbacks of one browser session (``remote``: a release service's
    back end, :mod:`dppca_dask.app.remote`, instead of this machine's pipeline)."""

    def __init__(self, app: AppConfig, wording: Wording | None, remote: Any = None) -> None:
        self.app, self.wording, self.remote = app, wording, remote
        self.session = Session() if remote is None else remote.session(app.output_directory)
        self.form = Form(app, dataset_choices(app) if remote is None else remote.choices())
        self.upload_frame: Any = None
        self.check_button = pn.widgets.Button(name="Check settings (plan; spends nothing)")
        self.run_button = pn.widgets.Button(name="Run release (spends budget)",
                                            button_type="primary")
        self.refresh = pn.widgets.Button(name="Refresh ledger", button_type="light")
        self.ledger = pn.Column(budget_pane("Budget", None))
        self.message = pn.pane.Alert("", alert_type="info", visible=False, width=860,
                                     stylesheets=WRAP)
        self.progress = pn.indicators.Progress(value=0, max=100, visible=False, width=400)
        self.progress_text = pn.pane.Markdown("", width=900, stylesheets=WRAP)
        self.plan_text = pn.pane.Markdown("", width=900)
        self.history = pn.widgets.Select(name="This session's releases", options=[], width=600)
        self.reopen = pn.widgets.Button(name="Reopen")
        self.result = pn.Column(pn.pane.Markdown("No release yet in this session."))
        self._wire()
        self._dataset_changed()

    # --- layout -------------------------------------------------------------------------------

    def view(self) -> Any:
        header = pn.pane.Markdown(
            "## dppca_dask -- differentially private PCA\nEvery run is a release: it spends "
            "budget from the dataset's ledger (the same ledger as `dppca-dask run`).")
        main = pn.Column(header, self.ledger, self.refresh, self.message, self.progress,
                         self.progress_text, pn.Row(self.history, self.reopen),
                         self.result, pn.Card(self.plan_text, title="Plan", collapsed=True,
                                              width=900))
        side = pn.Column(self.form.tabs(), self.check_button, self.run_button, width=440)
        return pn.Row(side, main)

    def _wire(self) -> None:
        f = self.form
        f.dataset.param.watch(lambda _e: self._dataset_changed(), "value")
        f.upload.param.watch(lambda _e: self._uploaded(), "value")
        f.convert.on_click(self._convert)
        self.check_button.on_click(lambda _e: self._check_and_show())
        self.run_button.on_click(self._run)
        self.refresh.on_click(lambda _e: self._show_budget())
        self.reopen.on_click(lambda _e: self._reopen())

    # --- messages -----------------------------------------------------------------------------

    def _say(self, text: str, kind: AlertKind = "info") -> None:
        self.message.alert_type = kind
        self.message.object = html.escape(text)
        self.message.visible = bool(text)

    def _error(self, exc: BaseException) -> None:
        if isinstance(exc, DPPCAError):
            say = self.wording or cli_message
            text = say(exc, "pca")
            self._say(f"Error: {text}", "danger")
        else:
            self._say(f"Error: internal error {type(exc).__name__}: {exc} (a bug; please "
                      "report it)", "danger")

    # --- dataset ------------------------------------------------------------------------------

    def _dataset_changed(self) -> None:
        f = self.form
        choice = f.choice
        uploading = f.dataset.value is not None and choice is None
        f.upload.visible = uploading
        f.upload_group.visible = f.convert.visible = uploading and self.upload_frame is not None
        if choice is None:
            self.ledger[:] = [budget_pane("Budget", None)]
            return
        try:
            describe = describe_choice if self.remote is None else self.remote.describe
            f.show_dataset(choice, describe(choice))
        except DPPCAError as exc:
            self._error(exc)
            return
        self._show_budget()

    def _uploaded(self) -> None:
        f = self.form
        try:
            frame = read_upload_frame(f.upload.filename or "", f.upload.value or b"")
        except DPPCAError as exc:
            self._error(exc)
            return
        self.upload_frame = frame
        guess = guess_group_column(frame)
        f.upload_group.options = [_NONE, *map(str, frame.columns)]
        f.upload_group.value = guess if guess is not None else _NONE
        f.upload_group.visible = f.convert.visible = True
        self._say(f"Read {f.upload.filename}: group column guessed: {guess or 'none'}; numeric "
                  f"columns: {', '.join(numeric_columns(frame, guess)[:12])}. Convert it to a "
                  "Zarr store to use it (a dataset with its own ledger account).")

    async def _convert(self, _event: Any) -> None:
        f = self.form
        group = None if f.upload_group.value in (None, _NONE) else str(f.upload_group.value)
        columns = numeric_columns(self.upload_frame, group) if self.upload_frame is not None \
            else None
        loop = asyncio.get_running_loop()
        try:
            choice = await loop.run_in_executor(
                None, lambda: convert_upload(f.upload.filename or "upload.csv",
                                             f.upload.value or b"", self.app.upload_directory,
                                             columns=columns, group=group))
        except DPPCAError as exc:
            self._error(exc)
            return
        f.add_choice(choice)
        self._say(f"Converted {f.upload.filename} to {choice.path}.")

    def _status(self) -> BudgetStatus | None:
        choice = self.form.choice
        status = budget_status if self.remote is None else self.remote.budget
        return None if choice is None else status(choice)

    def _show_budget(self, before: BudgetStatus | None = None) -> None:
        try:
            now = self._status()
        except DPPCAError as exc:
            self._error(exc)
            return
        panes = [budget_pane("Budget before this run", before)] if before is not None else []
        title = "Budget after this run" if before is not None else "Budget now"
        self.ledger[:] = [*panes, budget_pane(title, now)]

    # --- check and run ------------------------------------------------------------------------

    def _check_and_show(self) -> None:
        self._check(show_plan=True)

    def _check(self, *, show_plan: bool) -> Checked:
        choice = self.form.choice
        if choice is None:
            checked = Checked(error="Choose a dataset (or convert an upload) first.")
        else:
            output = str(fresh_run_directory(self.app.output_directory))
            settings = run_settings(self.form.values(), choice, self.app, output)
            checked = (check(settings, self.app, self.wording) if self.remote is None
                       else self.remote.check(settings))
        if checked.error is not None:
            self._say(f"Error: {checked.error}", "danger")
        elif show_plan:
            self.plan_text.object = "```\n" + checked.plan.render() + "\n```"
            spend = checked.plan.spend
            warn = "".join(f" Warning: {w}." for w in checked.warnings)
            self._say(f"Settings are valid: the release would spend eps = {spend.eps:.4g}, "
                      f"delta = {spend.delta:.3g} ({checked.plan.release.passes} data passes)."
                      f"{warn} Open 'Plan' for the details.", "success")
        return checked

    async def _run(self, _event: Any) -> None:
        checked = self._check(show_plan=False)
        choice = self.form.choice
        if checked.error is not None or choice is None:
            return
        self.plan_text.object = "```\n" + checked.plan.render() + "\n```"
        try:
            before = self._status()
            assert before is not None
        except DPPCAError as exc:
            self._error(exc)
            return
        self.ledger[:] = [budget_pane("Budget before this run", before)]
        progress = Progress()
        self.run_button.disabled = self.check_button.disabled = True
        self.progress.visible = True
        self.progress.value = -1
        self._say("Running: the budget is reserved in the ledger before any data is read.")
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(None, self.session.run, checked.config, checked.plan,
                                   choice, progress)
        try:
            while not job.done():
                fraction = progress.fraction()
                self.progress.value = -1 if fraction is None else int(100 * fraction)
                self.progress_text.object = html.escape(progress.text())
                await asyncio.sleep(0.5)
            release = job.result()
        except Exception as exc:  # noqa: BLE001 -- shown on the page (a refusal: BudgetError)
            self.progress_text.object = ""
            self._error(exc)
            self._show_budget()
            return
        finally:
            self.run_button.disabled = self.check_button.disabled = False
            self.progress.visible = False
        self.progress_text.object = html.escape(
            "Done: " + "; ".join(progress.passes) + "".join(
                f" Warning: {w}." for w in progress.warnings))
        self._say(f"Released {release.title}; wrote {release.directory}.", "success")
        self._show_budget(before)
        self.history.options = {r.title: r.number for r in self.session.history}
        self.history.value = release.number
        self._open(release)

    def _open(self, release: Release) -> None:
        self.result[:] = [release_view(release)]

    def _reopen(self) -> None:
        chosen = [r for r in self.session.history if r.number == self.history.value]
        if chosen:
            self._open(chosen[0])


def serve_app(app: AppConfig, *, port: int, address: str, wording: Wording | None,
              show: bool = False, remote: Any = None) -> None:
    """Serve the page on ``address:port`` until the process is stopped (``remote``: work
    against a release service)."""
    import matplotlib

    matplotlib.use("Agg")  # the figures are drawn in worker threads
    Path(app.output_directory).mkdir(parents=True, exist_ok=True)
    origins = [f"{address}:{port}", f"localhost:{port}", f"127.0.0.1:{port}"]
    pn.serve({"/": lambda: Page(app, wording, remote).view()}, port=port, address=address,
             websocket_origin=origins, show=show, title="dppca_dask app",
             websocket_max_message_size=app.max_upload_mib * 2**20,
             start=True)
