"""The documentation site: built from ``docs/`` with warnings as errors, its pages opened in a real
browser, its local links followed; and the README front door that points into it.

The build runs ``python -m sphinx -W --keep-going -b html docs <tmp>`` in a subprocess (the
``docs`` packages are in the test extra), once per session, into the test's temporary
directory: nothing is written into the checkout. The browser part drives Debian's chromium
through its chromedriver with Selenium, as ``tests/test_app.py`` does (paths given, nothing
downloaded); without them it skips, naming what is missing, unless ``CI_REQUIRE_APP=1``
(``.ci/run``, which installs the browser) makes that a failure. Screenshots are saved under the
temporary directory (and copied to ``$DOCS_TEST_ARTEFACTS`` when set).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import click
import pytest

import dppca_dask
from dppca_dask.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = pytest.mark.xdist_group("docs")  # `pytest -n`: one worker builds the site once


# ------------------------------------------------------------------ the README front door


def test_readme_is_a_front_door() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the guide lives in docs/"
    for command in ("pip install -e . && dppca-dask demo", 'pip install -e ".[test]" && pytest',
                    "sphinx-build -W"):
        assert command in text, command
    # the Python example is runnable code, ten-odd lines
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert blocks and 5 <= len(blocks[0].splitlines()) <= 15, blocks
    # it links the guide's pages, and every relative link resolves in the checkout (on GitHub)
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    for page in ("docs/guide/getting-started.md", "docs/reference/api.rst",
                 "docs/reference/cli.rst", "docs/privacy.md", "docs/HELPERS.md",
                 "docs/performance.md", "docs/guide/deployment.md"):
        assert page in local, f"README.md does not link {page}"
    missing = [t for t in local if not (ROOT / unquote(t)).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


@pytest.mark.slow
def test_readme_example_runs(tmp_path: Path, ledger_path: Path) -> None:
    """The README's Python example, as written, in a fresh process: it releases, records the
    spend in the (test's) persistent ledger and writes its figure and store."""
    code = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)[0]
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "MPLBACKEND": "Agg"},
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "DP PCA Summary" in proc.stdout
    assert f"Recorded in: the budget ledger {ledger_path}" in proc.stdout, proc.stdout[-800:]
    assert (tmp_path / "biplot.png").stat().st_size > 10_000
    assert (tmp_path / "pca.zarr").is_dir()


def test_every_docs_page_is_a_source() -> None:
    """Every markdown file under docs/ is a page of the site (-W fails on one outside every
    toctree; the glob toctrees in index.md take new top-level pages, design notes and specs)."""
    index = (DOCS / "index.md").read_text()
    for glob in (":glob:\n\n*\n", ":glob:\n\ndesign/*\n", ":glob:\n\nspec/*\n"):
        assert glob in index, glob


# ------------------------------------------------------------------ the build


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs-site")
    html, doctrees = out / "html", out / "doctrees"
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(doctrees), str(DOCS), str(html)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env, check=False)
    seconds = time.monotonic() - start
    assert proc.returncode == 0, (f"sphinx-build -W failed (exit {proc.returncode}):\n"
                                  f"{proc.stderr[-6000:]}\n{proc.stdout[-2000:]}")
    assert "WARNING" not in proc.stderr, proc.stderr
    print(f"docs site built in {seconds:.1f} s")
    return html


class _Links(HTMLParser):
    """The ids of a page and the targets of its href/src attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id":
                self.ids.add(value)
            elif name in ("href", "src") and tag in ("a", "img", "link", "script"):
                self.targets.append(value)


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.mark.slow
def test_site_builds_and_every_local_link_resolves(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 25, [p.name for p in pages]
    parsed = {page: _parse(page) for page in pages}
    broken: list[str] = []
    checked = 0
    for page, links in parsed.items():
        for target in links.targets:
            parts = urlsplit(target)
            if parts.scheme or parts.netloc or target.startswith(("mailto:", "javascript:")):
                continue  # external: not this site's to check (and no network here)
            path = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            checked += 1
            if not path.is_file():
                broken.append(f"{page.relative_to(site)} -> {target} (no file)")
                continue
            if parts.fragment and path.suffix == ".html":
                ids = parsed[path].ids if path in parsed else _parse(path).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)} -> {target} (no id)")
    assert checked > 500, checked
    assert not broken, "broken internal links:\n" + "\n".join(broken[:50])


@pytest.mark.slow
def test_api_reference_documents_every_public_name(site: Path) -> None:
    api = _parse(site / "reference" / "api.html").ids
    public = [name for name in dppca_dask.__all__ if name != "__version__"]
    missing = [name for name in public if f"dppca_dask.{name}" not in api]
    assert not missing, f"not in the API reference: {missing}"
    modules = _parse(site / "reference" / "api-modules.html").ids
    import dppca_dask.sklearn as sk

    missing = [name for name in sk.__all__ if f"dppca_dask.sklearn.{name}" not in modules]
    assert not missing, f"not in the API reference: {missing}"
    for name in ("dppca_dask.covariance.maxent.maxent", "dppca_dask.report.html.write_report",
                 "dppca_dask.io.datasets.make_gau", "dppca_dask.privacy.composition.compose"):
        assert name in modules, name


def _commands(group: click.Group, prefix: str) -> list[str]:
    out = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        out.append(path)
        if isinstance(command, click.Group):
            out += _commands(command, path)
    return out


@pytest.mark.slow
def test_cli_reference_lists_every_command(site: Path) -> None:
    ids = _parse(site / "reference" / "cli.html").ids
    commands = _commands(main, "dppca-dask")
    assert "dppca-dask run" in commands and "dppca-dask budget show" in commands, commands
    missing = [c for c in commands if c.replace(" ", "-") not in ids]
    assert not missing, f"not in the CLI reference: {missing}"


# ------------------------------------------------------------------ in a real browser


def _browser_requirements() -> list[str]:
    missing = []
    if importlib.util.find_spec("selenium") is None:
        missing.append('selenium (pip install -e ".[test]")')
    if not CHROMIUM.exists():
        missing.append(f"chromium at {CHROMIUM} (apt-get install chromium)")
    if not CHROMEDRIVER.exists():
        missing.append(f"chromedriver at {CHROMEDRIVER} (apt-get install chromium-driver)")
    return missing


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    missing = _browser_requirements()
    if missing:
        reason = "the docs site's browser test needs " + ", ".join(missing)
        if os.environ.get("CI_REQUIRE_APP") == "1":
            pytest.fail(reason + " (CI_REQUIRE_APP=1)")
        pytest.skip(reason)
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never download a driver
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,1800", "--allow-file-access-from-files"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options,
                              service=webdriver.ChromeService(executable_path=str(CHROMEDRIVER)))
    driver.shots = tmp_path_factory.mktemp("docs-shots")  # type: ignore[attr-defined]
    yield driver
    driver.quit()
    artefacts = os.environ.get("DOCS_TEST_ARTEFACTS")
    if artefacts:
        shutil.copytree(driver.shots, artefacts, dirs_exist_ok=True)  # type: ignore[attr-defined]


_PAGE = """
const heads = [...document.querySelectorAll('h1, h2, h3, h4')].map(h => h.textContent.trim());
const names = [...document.querySelectorAll('dt.sig .sig-name')].map(n => n.textContent.trim());
const links = [...document.querySelectorAll('a[href]')].map(a => a.href);
const main = document.querySelector('article') || document.body;
return {title: document.title, heads: heads, names: names, links: links,
        text: main.innerText, width: main.getBoundingClientRect().width};
"""


def _open(driver, page: Path, shot: str) -> dict:  # type: ignore[no-untyped-def]
    driver.get(page.as_uri())
    info = driver.execute_script(_PAGE)
    driver.save_screenshot(str(driver.shots / f"{shot}.png"))
    assert info["width"] > 300, info["width"]  # the theme's CSS loaded: the article is laid out
    # every link to a file of the site, as the browser resolved it, exists
    broken = []
    for href in info["links"]:
        parts = urlsplit(href)
        if parts.scheme == "file" and not Path(unquote(parts.path)).is_file():
            broken.append(href)
    assert not broken, f"{page.name}: broken links {broken}"
    return info


@pytest.mark.slow
def test_pages_in_a_real_browser(site: Path, browser) -> None:  # type: ignore[no-untyped-def]
    index = _open(browser, site / "index.html", "index")
    assert index["title"].startswith("dppca_dask"), index["title"]
    assert "dppca-dask demo" in index["text"]
    for caption in ("User guide", "Reference"):
        sidebar = browser.find_element("css selector", ".sidebar-tree").text.lower()
        assert caption.lower() in sidebar, caption  # captions are upper-cased by the CSS

    api = _open(browser, site / "reference" / "api.html", "api")
    for name in ("dp_pca", "dp_loading", "dp_covariance", "privacy_control", "load_result",
                 "PCAResult", "DPPCAError"):
        assert name in api["names"], name
    assert any(h.startswith("Estimators") for h in api["heads"]), api["heads"]
    assert "parameters" in api["text"].lower()  # the numpydoc sections were rendered

    modules = _open(browser, site / "reference" / "api-modules.html", "api-modules")
    assert "DPPCA" in modules["names"] and "DPCovariance" in modules["names"], modules["names"]

    cli = _open(browser, site / "reference" / "cli.html", "cli")
    for command in ("run", "plan", "demo", "budget", "show", "inspect"):
        assert any(h.startswith(command) for h in cli["heads"]), (command, cli["heads"])
    assert "--overwrite" in cli["text"] and "--json" in cli["text"]

    guide = _open(browser, site / "guide" / "getting-started.html", "getting-started")
    assert any(h.startswith("Your first config") for h in guide["heads"]), guide["heads"]
    privacy = _open(browser, site / "guide" / "privacy-model.html", "privacy-model")
    assert "Laplace(2/ε)" in privacy["text"] and "one grid step below" in privacy["text"]
