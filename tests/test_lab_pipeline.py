"""The CI pipeline (`.ci/lab-pipeline`, the steps `.github/workflows/lab.yml` runs) run here
as a script on a small real SQLite sweep: without a baseline it measures and says so; against
a baseline of its own results it exits 0 with the comparison's table in the job summary;
against a baseline in which one point was faster it exits 1, the alarm measured again and
repeated; a file compare did not write is never overwritten. And `--confirm` drops an alarm
that does not repeat when the point is measured again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO, workflow_failure
from tunelab import cli

pytestmark = pytest.mark.slow

SWEEP = """\
name: tiny
description: two pool sizes, a warm scan
dataset: {rows: 200000, seed: 11}
knobs:
  buffer_pool: [16, 2000]
workloads:
  - type: scan
cache: warm
repetitions: 4
"""
TIME_COLUMNS = ("elapsed_s", "noise_client_cpu_s")


def pipeline(work: Path, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, str]:
    """`.ci/lab-pipeline --directory WORK ARGS... --cores 2 --config sweeps=... calibrate=off`
    with a job summary file: (the process, the summary's text)."""
    summary = tmp_path / f"summary-{len(list(tmp_path.glob('summary-*')))}.md"
    summary.write_text("")
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary)}
    done = subprocess.run(
        [
            str(REPO / ".ci" / "lab-pipeline"),
            "--directory",
            str(work),
            *args,
            "--cores",
            "2",
            "--config",
            "sweeps=sweeps/*.yaml",
            "calibrate=off",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return done, summary.read_text()


@pytest.fixture(scope="module")
def first(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess, str]:
    """The pipeline's first run: no baseline yet."""
    work = tmp_path_factory.mktemp("ci")
    (work / "sweeps").mkdir()
    (work / "sweeps" / "tiny.yaml").write_text(SWEEP)
    done, summary = pipeline(
        work, tmp_path_factory.mktemp("summary"), "--baseline", str(work / "no-baseline")
    )
    assert done.returncode == 0, workflow_failure(work, done)
    return work, done, summary


def rows(work: Path) -> pd.DataFrame:
    return pd.read_csv(work / "results" / "sqlite" / "tiny.csv", low_memory=False)


def baseline_of(work: Path, to: Path, faster: float = 1.0) -> Path:
    """A copy of the run's results, the 16-page point's times divided by ``faster``: tenfold
    where a change must be caught, far past what four repetitions can hide (one slow
    repetition spread that point by 77 %, and a twofold change went unseen); the table is
    large enough that a tenth of its scan stays above the comparison's 1 ms floor."""
    shutil.copytree(work / "results", to / "results")
    frame = rows(work)
    hit = frame["knob_buffer_pool"] == 16
    for col in TIME_COLUMNS:
        frame.loc[hit, col] = frame.loc[hit, col] / faster
    frame.loc[hit, "throughput_rows_s"] = frame.loc[hit, "throughput_rows_s"] * faster
    frame.to_csv(to / "results" / "sqlite" / "tiny.csv", index=False)
    return to / "results"


def test_without_a_baseline_it_measures_and_says_nothing_was_compared(first):
    work, done, summary = first
    assert len(rows(work)) == 8  # two points, four repetitions each
    assert (work / "reports" / "index.html").is_file()
    assert "No baseline" in summary and "nothing compared" in summary
    assert not (work / "reports" / "compare.md").exists()


def test_against_its_own_results_it_exits_0_with_the_table_in_the_summary(first, tmp_path):
    work, _, _ = first
    baseline = baseline_of(work, tmp_path / "same")
    done, summary = pipeline(work, tmp_path, "--baseline", str(baseline))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "measuring" in done.stderr and "compare: exit 0" in done.stderr
    assert "no regression: exit 0" in summary and "### sqlite/tiny" in summary
    points = set(rows(work)["point_id"])
    table = [line for line in summary.splitlines() if line.startswith("| buffer_pool")]
    assert {line.split(" | ")[0][2:] for line in table} == points
    doc = json.loads((work / "reports" / "compare.json").read_text())
    assert doc["exit"] == 0 and doc["procedure"] == "bh" and doc["generator"] == "tunelab compare"
    assert {r["point"] for s in doc["sweeps"] for r in s["rows"]} == points
    assert 'id="compare-0"' in (work / "reports" / "compare.html").read_text()


def test_against_a_faster_baseline_it_exits_1_the_alarm_confirmed(first, tmp_path):
    work, _, _ = first
    baseline = baseline_of(work, tmp_path / "faster", faster=10.0)
    done, summary = pipeline(work, tmp_path, "--baseline", str(baseline), "--confirm")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "worse: exit 1" in summary and "**worse**" in summary
    doc = json.loads((work / "reports" / "compare.json").read_text())
    assert doc["exit"] == 1
    slow = rows(work).loc[rows(work)["knob_buffer_pool"] == 16, "point_id"].iloc[0]
    assert [
        r["verdict"]
        for s in doc["sweeps"]
        for r in s["rows"]
        if r["point"] == slow and r.get("metric") == "elapsed_s"
    ] == ["worse"]
    confirmed = doc["confirmation"]
    assert confirmed["points"] == 2 and confirmed["repetitions"] == 8  # the block, again
    assert any(k.startswith(f"sqlite/tiny/{slow}|") for k in confirmed["repeated"])


def test_a_file_compare_did_not_write_is_left_alone(first, tmp_path):
    work, _, _ = first
    baseline = baseline_of(work, tmp_path / "same")
    mine = work / "reports" / "compare.md"
    mine.write_text("# my notes\n")
    try:
        done, summary = pipeline(work, tmp_path, "--baseline", str(baseline))
        assert done.returncode == 2, done.stdout + done.stderr
        assert mine.read_text() == "# my notes\n"
        errors = [line for line in done.stderr.splitlines() if "--markdown" in line]
        assert errors and "not written by tunelab compare" in errors[0]
        assert summary == ""
    finally:
        mine.unlink()


def test_an_alarm_that_does_not_repeat_when_measured_again_is_dropped(
    first, tmp_path, monkeypatch, capsys
):
    """NEW's 16-page point made ten times as slow in its rows (as a disturbed run leaves it):
    flagged worse, then measured again as it really is, not again: exit 0."""
    work, _, _ = first
    old = tmp_path / "old"
    shutil.copytree(work / "results", old)
    disturbed = baseline_of(work, tmp_path / "disturbed", faster=0.1)
    monkeypatch.chdir(work)  # the rows name their sweep file from the run's directory
    capsys.readouterr()
    args = [
        "compare",
        str(old),
        str(disturbed),
        "--no-record",
        "--html",
        str(tmp_path / "c.html"),
        "--json",
        str(tmp_path / "c.json"),
    ]
    assert cli.main(args) == 1
    assert (
        cli.main(
            [
                *args,
                "--confirm",
                "--workdir",
                str(work / ".tunelab"),
                "--data-dir",
                str(work / "data"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert any("worse once, not when measured again" in line for line in out), out
    assert out[-1].startswith("confirm: 2 point(s) measured again") and "0 of " in out[-1]
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["exit"] == 0 and doc["confirmation"]["repeated"] == []
