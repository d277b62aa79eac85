"""``dppca-dask app``: the Panel app's server started here on 127.0.0.1, driven in a real browser.

The browser test needs the ``app`` extra (Panel), Selenium and Debian's chromium and
chromium-driver (``/usr/bin/chromium``, ``/usr/bin/chromedriver``; nothing is downloaded at run
time: Selenium Manager runs offline). Without them it skips, naming what is missing, unless
``CI_REQUIRE_APP=1`` (``.ci/run``) makes that a failure. The server is a subprocess of this
test, stopped by its PID; it inherits the test's environment, so its ledger is the conftest's
temporary one (``DPPCA_LEDGER__URL``), never the real per-user ledger. Screenshots are saved
under the test's temporary directory (and copied to ``$APP_TEST_ARTEFACTS`` when set).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from dppca_dask.cli import main
from dppca_dask.errors import DPPCAError
from dppca_dask.pipeline.wording import cli_message

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def _needs(missing: list[str]) -> None:
    if not missing:
        return
    reason = "the app's browser test needs " + ", ".join(missing)
    if os.environ.get("CI_REQUIRE_APP") == "1":
        pytest.fail(reason + " (CI_REQUIRE_APP=1)")
    pytest.skip(reason)


def _browser_requirements() -> list[str]:
    missing = []
    if importlib.util.find_spec("panel") is None:
        missing.append('panel (pip install -e ".[app]")')
    if importlib.util.find_spec("selenium") is None:
        missing.append('selenium (pip install -e ".[test]")')
    if not CHROMIUM.exists():
        missing.append(f"chromium at {CHROMIUM} (apt-get install chromium)")
    if not CHROMEDRIVER.exists():
        missing.append(f"chromedriver at {CHROMEDRIVER} (apt-get install chromium-driver)")
    return missing


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "dppca_dask.cli", *args], capture_output=True,
                         text=True, timeout=120, env=os.environ.copy(), check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


# --- JavaScript over Bokeh's shadow DOM (every Panel component is a shadow root) --------------

_WALK = """
function walk(root, out) {
  for (const el of root.querySelectorAll('*')) { if (el.shadowRoot) walk(el.shadowRoot, out); }
  out.push(root); return out;
}
"""
_TEXT = _WALK + """
const parts = [];
for (const r of walk(document, [])) { if (r === document) continue;
  for (const c of r.children)
    if (!['STYLE', 'LINK', 'SCRIPT'].includes(c.tagName)) parts.push(c.textContent); }
return parts.join('\\n');
"""
_CLICK = _WALK + """
for (const r of walk(document, [])) for (const b of r.querySelectorAll('button'))
  if (b.textContent.trim().startsWith(arguments[0]) && !b.disabled) { b.click(); return true; }
return false;
"""
_IMAGES = _WALK + """
const out = [];
for (const r of walk(document, [])) for (const i of r.querySelectorAll('img'))
  if (i.isConnected && i.naturalWidth > 0) out.push(i.naturalWidth);
return out;
"""

_CLICK_TAB = _WALK + """
for (const r of walk(document, [])) for (const t of r.querySelectorAll('.bk-tab'))
  if (t.textContent.trim() === arguments[0]) { t.click(); return true; }
return false;
"""
_INPUTS = _WALK + """
const out = [];
for (const r of walk(document, [])) for (const i of r.querySelectorAll('input'))
  if (i.getClientRects().length && i.value) {
    const box = i.getBoundingClientRect();
    out.push([i.value, i.scrollWidth, i.clientWidth, box.left, box.right]); }
return out;
"""
_BOXES = _WALK + """
const out = [];
for (const r of walk(document, [])) for (const el of r.querySelectorAll('*'))
  if (el.getClientRects().length && el.textContent.includes(arguments[0])
      && ![...el.children].some(c => c.textContent.includes(arguments[0]))) {
    const box = el.getBoundingClientRect();
    const host = el.getRootNode().host;
    const outer = host ? host.getBoundingClientRect().right : window.innerWidth;
    out.push([el.scrollWidth, el.clientWidth, box.right, Math.min(outer, window.innerWidth)]); }
return out;
"""


class Browser:
    """A headless chromium on the app's page."""

    def __init__(self, url: str, shots: Path) -> None:
        os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never download a driver
        from selenium import webdriver

        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                    "--window-size=1500,2400"):
            options.add_argument(arg)
        service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
        self.driver = webdriver.Chrome(options=options, service=service)
        self.shots = shots
        self.driver.get(url)

    def text(self) -> str:
        return str(self.driver.execute_script(_TEXT))

    def wait_for(self, needle: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if needle in text:
                return text
            if time.monotonic() > deadline:
                self.shot("timeout")
                raise AssertionError(f"{needle!r} did not appear in {timeout} s; page:\n{text}")
            time.sleep(0.5)

    def click(self, label: str) -> None:
        assert self.driver.execute_script(_CLICK, label), f"no enabled button {label!r}"

    def tab(self, label: str) -> None:
        assert self.driver.execute_script(_CLICK_TAB, label), f"no tab {label!r}"

    def inputs(self) -> list[list]:
        """The visible inputs with a value: [value, scrollWidth, clientWidth, left, right]."""
        return list(self.driver.execute_script(_INPUTS))

    def boxes(self, needle: str) -> list[list]:
        """The innermost visible elements whose text holds ``needle``: [scrollWidth,
        clientWidth, right, the right edge of its box (its component's host, within the
        window)]."""
        return list(self.driver.execute_script(_BOXES, needle))

    def images(self) -> list[int]:
        return list(self.driver.execute_script(_IMAGES))

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path


@pytest.fixture
def app_server(tmp_path, ledger_path):
    """The app on a free 127.0.0.1 port over the demo dataset; yields (url, store, runs)."""
    _needs(_browser_requirements())
    from dppca_dask.io.datasets import write_demo_dataset

    (tmp_path / "data").mkdir()
    store = write_demo_dataset(tmp_path / "data" / "gau.zarr")
    runs = tmp_path / "runs"
    (tmp_path / "app.yaml").write_text(
        f"demo: {store}\noutput_directory: {runs}\nupload_directory: {tmp_path / 'uploads'}\n")
    port = _free_port()
    assert os.environ["DPPCA_LEDGER__URL"] == str(ledger_path)  # inherited by the server
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "dppca_dask.cli", "app", "--config",
                             str(tmp_path / "app.yaml"), "--port", str(port)],
                            cwd=tmp_path, env=os.environ.copy(), stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            try:
                with urllib.request.urlopen(url, timeout=5) as page:
                    assert page.status == 200
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        yield url, store, runs
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
        log.close()


@pytest.fixture
def browser(app_server, tmp_path):
    shots = tmp_path / "screenshots"
    shots.mkdir()
    b = Browser(app_server[0], shots)
    try:
        yield b
    finally:
        b.driver.quit()
        target = os.environ.get("APP_TEST_ARTEFACTS")
        if target:
            shutil.copytree(shots, target, dirs_exist_ok=True)
        print(f"app screenshots: {shots}")


def _ledger(store: str) -> dict:
    (entry,) = json.loads(_cli("budget", "show", store, "--json"))
    return entry


@pytest.mark.slow
def test_app__pca_release_in_a_browser_then_refused_past_the_cap(app_server, browser, ledger_path):
    from dppca_dask.io.identity import resolve_dataset
    from dppca_dask.pipeline.ledger import Ledger

    _url, store, runs = app_server
    dataset_id = resolve_dataset(store, "X").dataset_id
    page = browser.wait_for("Run release (spends budget)", timeout=60)
    assert "5000 observations x 20 variables" in page
    assert f"Ledger: dataset {dataset_id} -- spent: nothing; cap: none" in page
    assert "Remaining: no cap (runs are recorded, not limited)" in page
    browser.shot("01-start")

    # the budget shares: a few digits, inside their boxes and the form's column (issue 34 item 7)
    browser.tab("Budget")
    time.sleep(1.0)
    shares = [i for i in browser.inputs() if i[0].startswith("0.3")]
    assert [i[0] for i in shares] == ["0.333"] * 3, browser.inputs()
    assert all(scroll <= client for _, scroll, client, _, _ in shares), shares
    lefts = sorted((left, right) for *_, left, right in shares)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(lefts)), lefts  # no overlap
    assert lefts[-1][1] <= 450, lefts  # within the form's column (440 px)
    browser.shot("01b-budget-tab")
    browser.tab("Data")

    browser.click("Check settings")
    page = browser.wait_for("Settings are valid")
    assert "the release would spend eps = 1, delta = 6.67e-05 (5 data passes)" in page
    assert not ledger_path.exists() or not Ledger(ledger_path).reservations()  # spends nothing

    browser.click("Run release")
    page = browser.wait_for("Released #1", timeout=400)
    deadline = time.monotonic() + 60
    while len(browser.images()) < 3 and time.monotonic() < deadline:  # PVE, scores, loading
        time.sleep(0.5)
    assert len(browser.images()) >= 3
    page = browser.wait_for("Loading directions")
    for caption in ("Scree / PVE", "Scores and biplot", "Loading directions",
                    "Download report.html", "This session's releases"):
        assert caption in page
    spent = Ledger(ledger_path).spent(dataset_id)
    assert spent is not None and spent.basic_eps == pytest.approx(1.0)
    assert f"Budget before this run -- Ledger: dataset {dataset_id} -- spent: nothing" in page
    assert f"Budget after this run -- Ledger: dataset {dataset_id} -- spent: {spent.describe()}" \
        in page
    # the release's intervals (issue 33 item 2): each value, its interval, the noise marker
    from dppca_dask.results.interval_fields import COVERS

    assert "Intervals: signal or noise" in page and "indistinguishable from noise" in page
    assert COVERS in page
    assert "Remaining: no cap" in page
    browser.tab("Intervals")
    time.sleep(1.0)
    browser.shot("02b-intervals")
    browser.tab("Figures")
    browser.shot("02-released")
    entry = _ledger(store)
    assert [r["status"] for r in entry["reservations"]] == ["released"]
    (run,) = runs.iterdir()
    assert {"report.html", "scree_pve.png", "pca_biplot.png", "pca.zarr"} <= {
        p.name for p in run.iterdir()}
    assert entry["reservations"][0]["output"] == str(run.resolve())

    # the custodian caps the dataset at what it has spent: the next release does not fit
    tight = Ledger(ledger_path).spent(dataset_id, delta=1e-4)
    assert tight is not None
    cap = f"{tight.tight_eps * 1.0001:.6g}"
    _cli("budget", "cap", store, "--eps", cap, "--delta", "1e-4")
    browser.click("Refresh ledger")
    page = browser.wait_for(f"cap: eps = {cap}, delta = 0.0001")
    left = re.search(r"Remaining: eps = ([0-9.e+-]+) at delta = 0.0001 \(of the cap's eps = "
                     + re.escape(f"{float(cap):.4g})"), page)
    assert left is not None, page
    assert float(left.group(1)) == pytest.approx(float(cap) - tight.tight_eps, rel=1e-3)
    browser.click("Run release")
    page = browser.wait_for("Refused: dataset", timeout=120)
    assert "past the custodian's cap" in page and "No data was read." in page
    browser.shot("03-refused")
    # the refusal wraps within its box and the window (issue 34 item 7)
    boxes = browser.boxes("Refused: dataset")
    assert boxes and all(scroll <= client + 1 and right <= edge + 1
                         for scroll, client, right, edge in boxes), boxes
    entry = _ledger(store)
    assert [r["status"] for r in entry["reservations"]] == ["released"]  # nothing reserved
    assert len(list(runs.iterdir())) == 1
    assert Ledger(ledger_path).spent(dataset_id, delta=1e-4) == tight  # the refusal spent nothing


def test_app__command_without_panel_is_one_line(monkeypatch):
    from dppca_dask import app

    monkeypatch.setattr(app, "panel_available", lambda: False)
    out = CliRunner().invoke(main, ["app"])
    assert out.exit_code == 1
    assert out.output.strip().splitlines() == [
        'Error: The app needs Panel, which is not installed: pip install -e ".[app]" '
        '(or pip install "dppca_dask[app]").']


def test_app__package_and_cli_import_without_panel():
    code = ("import sys, dppca_dask, dppca_dask.cli, dppca_dask.app, dppca_dask.app.settings, "
            "dppca_dask.app.state; assert 'panel' not in sys.modules, 'panel imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_app__form_errors_are_the_cli_messages(tmp_path):
    from dppca_dask.app.catalogue import AppConfig, dataset_choices
    from dppca_dask.app.settings import FormValues, check, run_settings
    from dppca_dask.io.datasets import write_demo_dataset

    store = write_demo_dataset(tmp_path / "gau.zarr", n_per_group=20)
    app = AppConfig(demo=store, output_directory=str(tmp_path / "runs"))
    (choice,) = dataset_choices(app)
    assert choice.group == "group" and choice.C_clip == 150

    def both(**values):
        """The app's message and `dppca-dask plan`'s on the same settings as a YAML file."""
        settings = run_settings(FormValues(**values), choice, app, str(tmp_path / "runs" / "r"))
        config = tmp_path / "run.yaml"
        config.write_text(yaml.safe_dump(settings))
        out = CliRunner().invoke(main, ["plan", str(config)])
        cli = out.output.strip().splitlines()[-1] if out.exit_code else None
        return check(settings, app, cli_message).error, cli

    good = {"controls": {"clipped": {"C_clip": 150}}}
    assert both(**good) == (None, None)
    cases = [({**good, "eps": -1}, "config key 'privacy.eps' must be a float"),
             ({**good, "k": 50}, "'pca.k' config key"),
             ({**good, "axes": [1, 1]}, "axes"),
             ({}, "pca.scree_control.clipped.C_clip (or --set")]
    for values, expected in cases:
        app_error, cli_error = both(**values)
        assert app_error is not None and expected in app_error
        assert cli_error == f"Error: {app_error}"
    app_error, _ = both(**good, non_private=True)
    assert app_error.startswith("Non-private reference panels are not allowed by this deployment")


def test_convert_upload__same_bytes_keep_their_store_and_ledger_account(tmp_path):
    from dppca_dask.app.catalogue import (
        convert_upload,
        guess_group_column,
        numeric_columns,
        read_upload_frame,
    )
    from dppca_dask.io.datasets import make_gau
    from dppca_dask.io.identity import resolve_dataset

    frame = make_gau(5, rng=3).rename(columns={"group": "site"})
    frame["cluster"] = [1, 2] * 12 + [1]
    data = frame.to_csv(index=False).encode()
    seen = read_upload_frame("survey.csv", data)
    group = guess_group_column(seen)
    assert group == "cluster"  # a group-like name wins over the first non-numeric column
    columns = numeric_columns(seen, group)
    assert columns == [f"V{j}" for j in range(1, 21)]
    first = convert_upload("survey.csv", data, tmp_path, columns=columns, group=group)
    again = convert_upload("survey.csv", data, tmp_path, columns=columns, group=group)
    other = convert_upload("survey.csv", data, tmp_path, columns=columns[:5], group=group)
    assert first == again and first.path != other.path and first.group == "group"
    ids = {resolve_dataset(c.path, "X").dataset_id for c in (first, again, other)}
    assert len(ids) == 2
    with pytest.raises(DPPCAError, match="must be a .csv, .parquet or .pq file"):
        read_upload_frame("survey.xlsx", data)
