"""`tunelab progress`: one line per finished point of a real run, from its job log."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO
from tunelab.run import pipeline, progress

SWEEP = """\
name: tiny
description: two pool sizes, scan, cold and warm
engines: [sqlite]
dataset: {rows: 3000, seed: 11}
knobs:
  buffer_pool: [10, 1000]
workloads:
  - type: scan
cache: both
repetitions: 2
"""
LINE = re.compile(
    r"^\[lab\] (\d+)/(\d+) (\S+) (\S+): median (\S+) s over (\d+) reps?(?: · ~(.+) left)?$"
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TUNELAB_JOB_LOG"}
    return {**env, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def _args(workdir: Path) -> list[str]:
    return [
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--profile",
        str(REPO / "workflows" / "profile"),
        "--config",
        f"sweeps={workdir / 'sweeps'}/*.yaml",
        "calibrate=off",
    ]


def _snakemake(workdir: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "snakemake", *_args(workdir), *extra]
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env()
    )


def _follow(*args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "tunelab.cli", "progress", *args]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )


def _ready(proc: subprocess.Popen) -> None:
    """Wait until it follows: it catches SIGTERM once it has found the log's end."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:  # it has just ended
            break
        caught = next(ln for ln in status.splitlines() if ln.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & 1 << (signal.SIGTERM - 1):
            return
        time.sleep(0.05)
    raise AssertionError("tunelab progress did not start following the log")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A real run followed by `tunelab progress`, after an earlier run measured one point
    (its sweep, in rounds, whose rows went once that point had its file)."""
    work = tmp_path_factory.mktemp("progress")
    (work / "sweeps").mkdir()
    (work / "sweeps" / "tiny.yaml").write_text(SWEEP)
    args = _args(work)
    assert pipeline.count_pending(args) == 4
    # as a stopped `./lab run` counts, from the fields it kept (here in another directory)
    fields = work / "fields"
    fields.write_bytes("".join(f"{f}\0" for f in pipeline.run_fields(args)).encode())
    counted = subprocess.run(
        [sys.executable, "-m", "tunelab.run.pipeline", "--count-pending-from", str(fields)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        check=True,
    )
    assert counted.stdout == "4\n", counted.stderr
    earlier = sorted(p.point_id for p in _points(work))[0]
    first = _snakemake(work, "--cores", "1", f"results/sqlite/tiny/{earlier}.csv")
    assert first.wait(timeout=600) == 0, first.stderr.read()[-3000:]
    log = work / "logs" / "jobs.jsonl"
    assert f"point-results results/sqlite/tiny/{earlier}.csv" in log.read_text()
    helper = subprocess.run(
        [sys.executable, "-m", "tunelab.run.pipeline", "--for-run", *args],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    options = helper.stdout.split("\0")[:-1]
    # the sweep is measured again in rounds, so every point of it gets its file anew
    assert options[:4] == ["--total", "4", "--job-log", str(log)]
    snake = _snakemake(work, "--cores", "2")
    follower = _follow(*options, "--pid", str(snake.pid))
    _ready(follower)
    _, snake_err = snake.communicate(timeout=900)
    assert snake.returncode == 0, snake_err[-3000:]
    out, err = follower.communicate(timeout=60)
    return work, earlier, follower.returncode, out, err


def _points(work: Path):
    from tunelab.sweep import spec

    points, errors = spec.expand(work / "sweeps" / "tiny.yaml", "sqlite")
    assert not errors
    return points


@pytest.mark.slow
def test_one_line_per_point_with_its_median_and_the_points_left(run):
    work, earlier, code, out, err = run
    assert code == 0 and out == ""
    lines = err.splitlines()
    found = [LINE.match(line) for line in lines]
    assert all(found), lines
    merged = pd.read_csv(work / "results" / "sqlite" / "tiny.csv")
    medians = merged.groupby("point_id")["elapsed_s"].median()
    reps = merged.groupby("point_id").size()
    points = [m[4] for m in found]
    # every point this run measured, once: the earlier run's point too (its sweep again)
    assert sorted(points) == sorted(medians.index) and earlier in points
    assert [int(m[1]) for m in found] == [1, 2, 3, 4]
    assert {int(m[2]) for m in found} == {4}
    left = [int(m[2]) - int(m[1]) for m in found]
    assert left == sorted(left, reverse=True) and left[-1] == 0
    for m in found:
        assert m[3] == "tiny"
        assert float(m[5]) == pytest.approx(medians[m[4]], rel=5e-3)
        assert int(m[6]) == reps[m[4]] == 2
    # an estimate while points are left, none after the last one
    assert all(m[7] for m in found[:-1]) and found[-1][7] is None


def _span(job: str, pid: int, start: int, end: int) -> str:
    return (
        json.dumps({"job": job, "kind": "exclusive", "pid": pid, "start_ns": start, "end_ns": end})
        + "\n"
    )


@pytest.mark.slow
def test_a_cut_last_line_and_a_failed_point_are_no_crash(run, tmp_path):
    work, earlier, *_ = run
    log = work / "logs" / "jobs.jsonl"
    before = log.read_bytes()
    try:
        sleeper = subprocess.Popen(["sleep", "120"])
        follower = _follow(
            "--job-log",
            str(log),
            "--pid",
            str(sleeper.pid),
            "--total",
            "2",
            "--directory",
            str(work),
        )
        _ready(follower)  # it reads from the end it found
        point = f"results/sqlite/tiny/{earlier}.csv"
        missing = "results/sqlite/tiny/gone.csv"
        (work / "logs" / "sqlite" / "tiny" / "gone.log").write_text("EngineError: boom\n")
        with open(log, "a") as f:
            f.write(_span(f"point-results {point}", 1 << 30, 1_000_000_000, 3_000_000_000))
            f.write(_span(f"point-results {missing}", 1 << 30, 3_000_000_000, 4_000_000_000))
            f.write('{"job": "point-results results/sqlite/tiny/x.csv", "kind": "exc')  # cut
        sleeper.kill()  # the run ends
        sleeper.wait()
        out, err = follower.communicate(timeout=30)
    finally:
        log.write_bytes(before)
    assert follower.returncode == 0, err
    assert "Traceback" not in err
    median = pd.read_csv(work / point)["elapsed_s"].median()
    first, second = err.splitlines()
    assert first.startswith(f"[lab] 1/2 tiny {earlier}: median ")
    assert float(first.split("median ")[1].split()[0]) == pytest.approx(median, rel=5e-3)
    assert first.endswith("· ~2 s left")  # 2 s for the first point, one point left
    assert second == f"[lab] 2/2 tiny gone: failed (see {work}/logs/sqlite/tiny/gone.log)"


def test_the_process_gone_ends_it_with_exit_0(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    start = time.monotonic()
    follower = _follow("--job-log", str(tmp_path / "none.jsonl"), "--pid", str(gone.pid))
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 0 and out == "" and err == ""
    assert time.monotonic() - start < 10


def test_sigterm_reads_the_log_once_more_and_ends_with_exit_0(tmp_path):
    log = tmp_path / "jobs.jsonl"
    log.write_text(_span("point-results results/old.csv", 1 << 30, 0, 1))  # an earlier run
    follower = _follow(
        "--job-log",
        str(log),
        "--pid",
        str(os.getpid()),
        "--total",
        "1",
        "--directory",
        str(tmp_path),
    )
    _ready(follower)
    with open(log, "a") as f:
        f.write(_span("point-results results/sqlite/s/p.csv", 1 << 30, 0, 1))
    follower.send_signal(signal.SIGTERM)
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 0
    assert err.splitlines() == ["[lab] 1/1 s p: failed"]


def test_job_log_reader_keeps_a_partial_line_until_it_is_complete(tmp_path):
    log = tmp_path / "jobs.jsonl"
    log.write_text(_span("merge results/old.csv", 1, 0, 1))
    reader = progress.JobLog(log)
    line = _span("point-results results/a.csv", 1, 0, 1)
    with open(log, "a") as f:
        f.write(line[:20])
    assert reader.read() == []
    with open(log, "a") as f:
        f.write(line[20:])
    assert [s["job"] for s in reader.read()] == ["point-results results/a.csv"]
    with open(log, "a") as f:
        f.write("not json\n" + line[:30])
    assert reader.read(final=True) == []


def test_time_left_counts_the_sweep_measured_before_its_points_files(tmp_path):
    """A sweep is measured whole (60 s), then its points' files come in a second: two of
    four points done after 61 s of the run, so the other two take about a minute more."""
    sec = 1_000_000_000
    p = progress.Progress(total=4, directory=tmp_path)
    p.add({"job": "run-sweep results/sqlite/s/rounds.csv.gz", "start_ns": 0, "end_ns": 60 * sec})
    for i in range(2):
        p.add(
            {
                "job": f"point-results results/sqlite/s/p{i}.csv",
                "pid": 1 << 30,
                "start_ns": (60 + i) * sec,
                "end_ns": (60 + i) * sec + sec // 2,
            }
        )
    lines = p.settle(final=True)
    assert lines[0].startswith("1/4 s p0: failed") and lines[1].startswith("2/4 s p1: failed")
    # 61.5 s for the two points of the batch: each line counts both, not only those before it
    assert lines[0].endswith("· ~2 min left")  # 3 left x 31 s
    assert lines[1].endswith("· ~1 min left")  # 2 left x 31 s


def test_time_left_of_a_large_batch_falls_steadily_from_a_sensible_start(tmp_path):
    """Sixty points arrive at once after a ten-minute sweep, with sixty more to come: the
    first line says about ten minutes, not the whole sweep's time per point left."""
    sec = 1_000_000_000
    p = progress.Progress(total=120, directory=tmp_path)
    p.add({"job": "run-sweep results/sqlite/s/rounds.csv.gz", "start_ns": 0, "end_ns": 600 * sec})
    for i in range(60):
        p.add(
            {
                "job": f"point-results results/sqlite/s/p{i}.csv",
                "pid": 1 << 30,
                "start_ns": 600 * sec,
                "end_ns": 600 * sec + 1,
            }
        )
    lines = p.settle(final=True)
    assert lines[0].endswith("· ~20 min left")  # 119 points left at 10 s each
    assert lines[-1].endswith("· ~10 min left")


def test_time_left_reads_as_seconds_minutes_or_hours():
    assert progress.fmt_left(12.4) == "~12 s left"
    assert progress.fmt_left(720) == "~12 min left"
    assert progress.fmt_left(3900) == "~1 h 5 min left"


def test_the_workflow_writes_the_options_its_plan_gives(tmp_path):
    """`./lab run` names a file (RUN_FILE_ENV); the Snakefile writes there the options that
    reading its arguments apart (--for-run) gives, from the plan it made anyway."""
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "tiny.yaml").write_text(SWEEP)
    run_file = tmp_path / "progress.json"
    env = {**_env(), progress.RUN_FILE_ENV: str(run_file)}
    cmd = [sys.executable, "-m", "snakemake", *_args(tmp_path), "-n"]
    subprocess.run(cmd, env=env, capture_output=True, check=True, timeout=600)
    helper = subprocess.run(
        [sys.executable, "-m", "tunelab.run.pipeline", "--for-run", *_args(tmp_path)],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    written = json.loads(run_file.read_text())
    assert written == helper.stdout.split("\0")[:-1]
    assert written[:2] == ["--total", "4"]


def test_a_run_file_never_written_ends_with_the_run(tmp_path):
    """A run that stops before its plan (invalid arguments) writes none: the follower ends
    with the process it follows, exit 0, saying nothing."""
    waiting = subprocess.Popen(["sleep", "1"])
    follower = _follow("--run-file", str(tmp_path / "never.json"), "--pid", str(waiting.pid))
    out, err = follower.communicate(timeout=30)
    waiting.wait()
    assert follower.returncode == 0 and out == "" and err == ""
