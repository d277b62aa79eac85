"""``dppca-dask app --server URL``: the app against a real release service, in a real browser
(issue 35 item 5). The service (``dppca-dask serve``) and the app are subprocesses on
127.0.0.1 stopped by their PIDs; the page is driven in Debian's headless chromium as in
tests/test_app.py. The analyst's app holds no data: the datasets, plans, runs and ledger lines
come from the server, and the released files are downloaded into the app's output folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from tests.test_app import Browser, _browser_requirements, _free_port, _needs
from tests.test_service_server import Server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]


@pytest.fixture
def remote_app(tmp_path):
    """A release service over the demo data (alice may make one release), and the app of
    analyst alice against it; yields (browser, server, runs)."""
    _needs(_browser_requirements())
    from dppca_dask.io.datasets import write_demo_dataset

    store = write_demo_dataset(tmp_path / "gau.zarr")
    server = Server(tmp_path).write(store, max_running=1)
    settings = yaml.safe_load(server.file.read_text())
    settings["datasets"][0].update(cap={"eps": 10, "delta": 1e-4}, C_clip=150,
                                   analyst_cap={"eps": 1.0, "delta": 1e-4})
    server.file.write_text(yaml.safe_dump(settings))
    server.start()
    runs = tmp_path / "runs"
    (tmp_path / "app.yaml").write_text(f"output_directory: {runs}\ndemo: null\n")
    port = _free_port()
    env = {**os.environ, "DPPCA_TOKEN": server.token("alice")}
    log = (tmp_path / "app.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "dppca_dask.cli", "app", "--config",
                             str(tmp_path / "app.yaml"), "--port", str(port), "--server",
                             server.url], cwd=tmp_path, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/"
    shots = tmp_path / "screenshots"
    shots.mkdir()
    browser = None
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "app.log").read_text()
            try:
                with urllib.request.urlopen(url, timeout=5) as page:
                    assert page.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.5)
        browser = Browser(url, shots)
        yield browser, server, runs
    finally:
        if browser is not None:
            browser.driver.quit()
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
        log.close()
        print(f"app screenshots: {shots}")


def test_app__against_a_release_service_in_a_browser(remote_app):
    browser, server, runs = remote_app
    page = browser.wait_for("Run release (spends budget)", timeout=90)
    assert "gau (server)" in page and "5000 observations x 20 variables" in page
    assert f"release service {server.url}" in page and "spent: nothing" in page
    assert "Upload a CSV" not in page  # the server's catalogue only
    browser.shot("remote-01-start")

    browser.click("Check settings")
    page = browser.wait_for("Settings are valid")
    assert "(5 data passes)" in page
    assert server.ledger().reservations() == []  # the server's plan records nothing

    browser.click("Run release")
    page = browser.wait_for("Released #1", timeout=600)
    deadline = time.monotonic() + 60
    while len(browser.images()) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(browser.images()) >= 3
    page = browser.wait_for("Loading directions")
    assert "Pass 5 (on the server)" in page
    browser.shot("remote-02-released")
    (run,) = runs.iterdir()  # downloaded from the server
    assert {"report.html", "scree_pve.png", "pca_biplot.png", "pca.zarr", "summary.txt"} <= {
        p.name for p in run.iterdir()}
    (reservation,) = server.ledger().reservations()
    assert reservation.status == "released" and reservation.analyst == "alice"
    assert "(yours: basic composition eps = 1" in page

    # alice's own cap admits one release: the next is refused by the server, nothing reserved
    browser.click("Run release")
    page = browser.wait_for("past the analyst's cap", timeout=120)
    assert "No data was read" in page and "HTTP 409" in page
    browser.shot("remote-03-refused")
    assert [r.status for r in server.ledger().reservations()] == ["released"]
    assert len(list(runs.iterdir())) == 1
    server.stop()
