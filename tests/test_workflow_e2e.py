"""The whole lab on SQLite through Snakemake: sweep -> points -> results -> reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_report_render import number, tables_of

from tests.conftest import REPO, workflow_failure
from tunelab.analysis import figures

pytestmark = pytest.mark.slow

SWEEP = """\
name: tiny
description: two pool sizes, scan and multipoint, cold and warm
engines: [sqlite]
dataset: {rows: 3000, seed: 11}
knobs:
  buffer_pool: [10, 1000]
workloads:
  - type: scan
  - type: multipoint
    queries: 2
cache: both
repetitions: 2
"""


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--profile",
        str(REPO / "workflows" / "profile"),
        "--config",
        f"sweeps={workdir / 'sweeps'}/*.yaml",
        "calibrate=off",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    work = tmp_path_factory.mktemp("lab")
    (work / "sweeps").mkdir()
    (work / "sweeps" / "tiny.yaml").write_text(SWEEP)
    proc = snakemake(work, "--cores", "2")
    assert proc.returncode == 0, workflow_failure(work, proc)
    return work


def test_every_point_has_its_results_and_the_index_links_the_report(lab):
    points = sorted((lab / "results" / "sqlite" / "tiny").glob("*.csv"))
    assert len(points) == 2 * 2 * 2  # pools x workloads x cache states
    merged = pd.read_csv(lab / "results" / "sqlite" / "tiny.csv")
    assert len(merged) == 8 * 2
    index = (lab / "reports" / "index.html").read_text()
    assert 'href="sqlite/tiny.html"' in index


def test_timed_sections_never_overlap_even_with_two_cores(lab):
    rows = pd.read_csv(lab / "results" / "sqlite" / "tiny.csv").sort_values("timed_start_ns")
    starts, ends = rows["timed_start_ns"].to_numpy(), rows["timed_end_ns"].to_numpy()
    assert (starts[1:] >= ends[:-1]).all()


def test_report_numbers_are_the_medians_of_the_results(lab):
    """At one CPU speed, as every figure of the pages is (``figures.at_one_speed``)."""
    rows = figures.at_one_speed(pd.read_csv(lab / "results" / "sqlite" / "tiny.csv"))
    html = (lab / "reports" / "sqlite" / "tiny.html").read_text()
    table = tables_of(html)["summary"]
    header, body = table[0], table[1:]
    col = header.index("response time (s): median")
    keys = ["knob_buffer_pool", "workload", "cache_requested"]
    medians = rows.groupby(keys)["elapsed_s"].median()
    assert len(body) == len(medians)
    seen = set()
    for cells in body:
        key = next(k for k in medians.index if {str(k[0]), k[1], k[2]} <= set(cells))
        seen.add(key)
        assert number(cells[col]) == pytest.approx(medians[key], rel=5e-4)
    assert seen == set(medians.index)


def test_a_rerun_measures_nothing_again_and_renders_the_same_report(lab):
    points = sorted((lab / "results" / "sqlite" / "tiny").glob("*.csv"))
    stamps = [p.stat().st_mtime_ns for p in points]
    report = lab / "reports" / "sqlite" / "tiny.html"
    before = report.read_bytes()
    report.unlink()
    proc = snakemake(lab, "--cores", "2", "reports/sqlite/tiny.html", "reports/index.html")
    assert proc.returncode == 0, workflow_failure(lab, proc)
    assert "measure_point" not in proc.stdout + proc.stderr.split("Job stats")[-1][:400]
    assert [p.stat().st_mtime_ns for p in points] == stamps
    assert report.read_bytes() == before


def test_an_invalid_sweep_stops_the_workflow_before_anything_runs(tmp_path):
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "bad.yaml").write_text(SWEEP.replace("cache: both", "cache: hot"))
    proc = snakemake(tmp_path, "--cores", "1")
    assert proc.returncode != 0
    assert "bad.yaml: cache: 'hot' not allowed (allowed: cold, warm, both)" in proc.stderr
    assert not (tmp_path / "results").exists()


def test_provenance_counts_the_engine_starts_the_sweep_needed(lab):
    html = (lab / "reports" / "sqlite" / "tiny.html").read_text()
    provenance = dict((row[0], row[-1]) for row in tables_of(html)["provenance"] if row)
    # SQLite starts (a fresh database file) once per point, whatever the repetitions
    assert provenance["engine starts (whole sweep)"] == "8"
