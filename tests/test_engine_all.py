"""`./lab run --config engine=LIST`: each engine in turn, one that cannot run here skipped
with its reason, and the index saying what happened to each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

SWEEP = """\
name: tiny-all
description: two pool sizes, a warm scan
dataset: {rows: 3000, seed: 11}
knobs:
  buffer_pool: [10, 1000]
workloads:
  - type: scan
cache: warm
repetitions: 2
"""


def _db2_runs_here() -> bool:
    tunelab = Path(sys.executable).parent / "tunelab"
    done = subprocess.run([str(tunelab), "preflight", "db2"], capture_output=True, text=True)
    return done.returncode == 0


def run_sqlite_and_db2(tmp_path: Path) -> subprocess.CompletedProcess:
    """`./lab run --config engine=sqlite,db2` of the sweeps in ``tmp_path``."""
    return subprocess.run(
        [
            str(REPO / "lab"),
            "run",
            "--directory",
            str(tmp_path),
            "--cores",
            "2",
            "--config",
            "engine=sqlite,db2",
            f"sweeps={tmp_path / 'sweeps'}/*.yaml",
            "calibrate=off",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_an_engine_list_runs_each_engine_and_skips_one_that_cannot_run_here(tmp_path):
    if _db2_runs_here():
        pytest.skip("the DB2 image is here: this test needs an engine that cannot run")
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "tiny-all.yaml").write_text(SWEEP)
    done = run_sqlite_and_db2(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "skipping db2:" in done.stderr
    status = (tmp_path / "reports" / "engines-run.tsv").read_text().splitlines()
    assert status[0] == "sqlite\tran\t" and status[1].startswith("db2\tskipped\t")
    index = (tmp_path / "reports" / "index.html").read_text()
    assert "<strong>sqlite</strong> ran" in index and "<strong>db2</strong> skipped" in index
    assert 'id="matrix"' not in index  # the sweep states no claims: no matrix rows
    page = tmp_path / "reports" / "engines" / "tiny-all.html"
    assert page.is_file() and "db2, " in page.read_text()  # says why db2 has no rows


def test_a_cross_engine_page_that_cannot_be_made_fails_the_run_saying_why(tmp_path):
    """The page's path is taken by a folder: the index rule of the engine's run and the index
    of the list both fail, each in one line naming the sweep and the cause."""
    if _db2_runs_here():
        pytest.skip("the DB2 image is here: this test needs an engine that cannot run")
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "tiny-all.yaml").write_text(SWEEP)
    (tmp_path / "reports" / "engines" / "tiny-all.html").mkdir(parents=True)
    done = run_sqlite_and_db2(tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    cause = "tunelab index: error: cross-engine page not made: tiny-all: rows of sqlite: "
    assert f"logs/index.log: {cause}IsADirectoryError" in done.stderr  # the engine's run
    last = done.stderr.strip().splitlines()[-2:]
    assert last[0].startswith(f"{cause}IsADirectoryError"), last  # the list's index
    assert "failed: the index" in last[1] and "done:" not in done.stderr
    assert "<strong>sqlite</strong> failed" in (tmp_path / "reports" / "index.html").read_text()
