"""`./lab report`: every page again from stored results alone, as a CI pipeline that keeps
`results/` (and its checkout's sweep files) but not `data/`, `.snakemake/` or `reports/`
renders them: nothing measured, every page written, the same bytes every time; rows that
are missing or fail verification are named on one line, exit 1, and nothing is rendered."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, workflow_failure

pytestmark = pytest.mark.slow

SWEEP = """\
name: tiny
description: two pool sizes, a warm scan
dataset: {rows: 3000, seed: 11}
knobs:
  buffer_pool: [10, 1000]
workloads:
  - type: scan
cache: warm
repetitions: 2
"""
PAGES = (
    "sqlite/tiny.html",
    "sqlite/tiny.verdicts.json",
    "engines/tiny.html",
    "shared-pools.html",
    "index.html",
)


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    """A run's directory after a real SQLite sweep (`./lab run`, sweep files named relative
    to it, as the default pack's are)."""
    work = tmp_path_factory.mktemp("measured")
    (work / "sweeps").mkdir()
    (work / "sweeps" / "tiny.yaml").write_text(SWEEP)
    done = subprocess.run(
        [
            str(REPO / "lab"),
            "run",
            "--directory",
            str(work),
            "--cores",
            "2",
            "--config",
            "sweeps=sweeps/*.yaml",
            "calibrate=off",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, workflow_failure(work, done)
    return work


def kept(pack: Path, to: Path) -> Path:
    """What a CI pipeline keeps of the run: its results, and its checkout's sweep files."""
    for name in ("results", "sweeps"):
        shutil.copytree(pack / name, to / name)
    return to


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def lab_report(work: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """`./lab report --directory WORK` where a `docker` command would leave a mark and the
    Docker engine's socket is nowhere: no container can start unseen."""
    shims = tmp_path / "shims"
    shims.mkdir(exist_ok=True)
    docker = shims / "docker"
    docker.write_text(f'#!/bin/sh\ntouch "{tmp_path}/docker-called"\nexit 1\n')
    docker.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{shims}:{os.environ['PATH']}",
        "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
    }
    return subprocess.run(
        [str(REPO / "lab"), "report", "--directory", str(work)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_stored_results_render_every_page_measuring_nothing_the_same_every_time(pack, tmp_path):
    work = kept(pack, tmp_path / "ci")
    rows = digests(work / "results")
    first = lab_report(work, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert digests(work / "results") == rows  # no new rows, nothing merged again
    for made in ("data", ".snakemake", ".tunelab", "logs"):  # no data set, no engine
        assert not (work / made).exists(), made
    assert not (tmp_path / "docker-called").exists()
    pages = digests(work / "reports")
    assert sorted(pages) == sorted(PAGES)
    assert 'href="sqlite/tiny.html"' in (work / "reports" / "index.html").read_text()
    # The pages the run itself rendered, byte for byte.
    assert pages == {p: d for p, d in digests(pack / "reports").items() if p in pages}
    again = lab_report(work, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert digests(work / "reports") == pages


def _tamper_point(results: Path) -> str:
    point = sorted((results / "sqlite" / "tiny").glob("buffer_pool-10_*.csv"))[0]
    text = point.read_text()
    point.write_text(text.replace(",warm,", ",cold,", 1))
    return f"{point.relative_to(results.parent)}: changed after it was written"


def _tamper_merged(results: Path) -> str:
    merged = results / "sqlite" / "tiny.csv"
    lines = merged.read_text().splitlines(keepends=True)
    merged.write_text("".join([lines[0], *lines[2:]]))  # a repetition dropped
    return "results/sqlite/tiny.csv: changed after the merge"


def _unmerged(results: Path) -> str:
    (results / "sqlite" / "tiny.csv").unlink()
    return "results/sqlite/tiny.csv: missing (2 point file(s) in results/sqlite/tiny/ not merged)"


def _no_point_files(results: Path) -> str:
    shutil.rmtree(results / "sqlite" / "tiny")
    return "results/sqlite/tiny/: no point files: nothing verifies results/sqlite/tiny.csv"


def _no_results(results: Path) -> str:
    shutil.rmtree(results / "sqlite")
    return f"{results}: no stored results"


@pytest.mark.parametrize(
    "damage", [_tamper_point, _tamper_merged, _unmerged, _no_point_files, _no_results]
)
def test_missing_or_tampered_rows_are_one_line_and_nothing_is_rendered(pack, tmp_path, damage):
    work = kept(pack, tmp_path / "ci")
    said = damage(work / "results")
    done = lab_report(work, tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"tunelab report-all: {said}"), lines
    assert lines[0].endswith("; nothing rendered"), lines
    assert not (work / "reports").exists()
