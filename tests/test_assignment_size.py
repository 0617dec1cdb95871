"""The assignment's sizes: `size: assignment` in the workflow config (or $TUNELAB_SIZE)
expands every sweep with its `dataset.assignment_rows`, and the run's results, reports and
logs go below `assignment/`, apart from the quick ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tunelab.run import pipeline
from tunelab.sweep import spec

SWEEP = """\
name: sized
engines: [sqlite]
dataset: {{rows: 3000, {extra}seed: 5}}
knobs:
  buffer_pool: [10, 1000]
workloads:
  - type: scan
cache: cold
repetitions: 2
"""


def write(tmp_path: Path, extra: str = "assignment_rows: 5000, ") -> Path:
    (tmp_path / "sweeps").mkdir(exist_ok=True)
    path = tmp_path / "sweeps" / "sized.yaml"
    path.write_text(SWEEP.format(extra=extra))
    return path


def rows(path: Path, **kw) -> set[int]:
    points, errors = spec.expand(path, "sqlite", **kw)
    assert errors == [], [str(e) for e in errors]
    return {p.dataset.rows for p in points}


def test_the_assignment_size_takes_the_sweeps_assignment_rows(tmp_path, monkeypatch):
    monkeypatch.delenv(spec.SIZE_ENV, raising=False)
    path = write(tmp_path)
    assert rows(path) == rows(path, size="quick") == {3000}
    assert rows(path, size="assignment") == {5000}
    monkeypatch.setenv(spec.SIZE_ENV, "assignment")  # what the workflow sets for its jobs
    assert rows(path) == {5000}
    # Point ids do not change: the size is in the data set's key and the run's directories.
    ids = {s: [p.point_id for p in spec.expand(path, size=s)[0]] for s in spec.SIZES}
    assert ids["quick"] == ids["assignment"]


def test_a_sweep_without_assignment_rows_keeps_its_rows(tmp_path):
    path = write(tmp_path, extra="")
    assert rows(path, size="assignment") == {3000}


def test_a_bad_size_or_assignment_rows_is_one_line(tmp_path, monkeypatch):
    path = write(tmp_path)
    monkeypatch.setenv(spec.SIZE_ENV, "huge")
    (error,) = spec.expand(path, "sqlite")[1]
    assert (
        str(error) == f"{path}: TUNELAB_SIZE='huge' is not a data-set size (allowed: quick, "
        "assignment)"
    )
    monkeypatch.delenv(spec.SIZE_ENV)
    path = write(tmp_path, extra="assignment_rows: 10, ")
    (error,) = spec.expand(path, "sqlite")[1]
    assert str(error) == f"{path}: dataset.assignment_rows: 10 out of range (allowed: >= 100)"


def test_the_default_pack_scans_the_assignments_million_rows():
    pattern = str(REPO / "workflows" / "sweeps" / "*.yaml")
    for engine in ("sqlite", "mariadb", "db2"):
        quick = pipeline.plan(pattern, engine)
        big = pipeline.plan(pattern, engine, size="assignment")
        assert set(quick.sweeps) == set(big.sweeps)
        for name, points in big.sweeps.items():
            before, after = quick.sweeps[name][0].dataset.rows, points[0].dataset.rows
            # 400,000-row tables become 1,000,000; the 100,000-row insert sweeps stay, and so
            # do the sweeps that are not the assignment's.
            mine = name not in ("buffer-pool-io-rate", "pool-simulation")
            want = {400_000: 1_000_000}.get(before, before) if mine else before
            assert after == want, (engine, name, before, after)
            assert [p.point_id for p in points] == quick.point_ids(name)


def test_the_front_door_refuses_a_bad_size_in_one_line(tmp_path):
    write(tmp_path)
    base = [
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--config",
        "sweeps=sweeps/*.yaml",
    ]
    with pytest.raises(pipeline.RunArgsInvalid, match="config size: 'huge' not allowed"):
        pipeline.resolve_run([*base, "size=huge"])
    assert pipeline.resolve_run([*base, "size=assignment"]).size == "assignment"
    assert pipeline.resolve_run(base).size == "quick"
    proc = subprocess.run(
        [sys.executable, "-m", "tunelab.run.pipeline", *base, "size=huge"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr == "config size: 'huge' not allowed (allowed: quick, assignment)\n"


def dry_run(workdir: Path, *config: str) -> str:
    """The jobs' files as a dry run lists them (its output without the profile's quiet)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop(spec.SIZE_ENV, None)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-n",
        "--quiet",
        "progress",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--profile",
        str(REPO / "workflows" / "profile"),
        "--config",
        "sweeps=sweeps/*.yaml",
        "calibrate=off",
        *config,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_a_dry_run_at_the_assignment_size_has_its_data_and_its_own_directories(tmp_path):
    write(tmp_path)
    quick = dry_run(tmp_path)
    big = dry_run(tmp_path, "size=assignment")
    assert "data/accounts-v1-r3000-s5.csv" in quick and "r5000" not in quick
    assert "data/accounts-v1-r5000-s5.csv" in big and "r3000" not in big
    assert "results/sqlite/sized/" in quick and "/assignment/" not in quick
    for where in ("results", "reports", "logs"):
        assert f"{where}/assignment/sqlite/sized" in big, where
    assert "results/sqlite/sized/" not in big.replace("results/assignment/sqlite", "")
    assert "reports/assignment/index.html" in big


def test_other_engines_reports_never_include_another_sizes(tmp_path):
    for name in (
        "mariadb/a.html",
        "sqlite/b.html",
        "assignment/index.html",
        "assignment/db2/c.html",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    assert pipeline.reports_of_other_engines(tmp_path, "sqlite") == [
        str(tmp_path / "mariadb/a.html")
    ]
    assert pipeline.sized_dir("results", "quick") == "results"
    assert pipeline.sized_dir("results", "assignment") == "results/assignment"
