"""The suite's xdist groups hold with the installed pytest and pytest-xdist.

`pytest` runs on several processes (pyproject.toml: ``-n auto --dist loadgroup``), and the tests
that start real scheduler/worker processes or time releases share one ``xdist_group`` so that
they never run beside each other. pytest 9.2 broke that silently (pytest-xdist#1386): the
groups were ignored and those tests ran side by side. This test runs a two-process pytest on a
tiny module of one group and checks that one worker ran all of it.
"""

from __future__ import annotations

import re
import subprocess
import sys

MODULE = '''
import pytest

pytestmark = pytest.mark.xdist_group("together")


@pytest.mark.parametrize("i", range(6))
def test_member(i):
    pass
'''


def test_xdist_group__runs_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(MODULE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the project's addopts
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", str(tmp_path / "test_grouped.py")],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = re.findall(r"\[(gw\d+)\].*PASSED", done.stdout)
    assert len(workers) == 6, done.stdout
    assert len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}:\n{done.stdout}"
