"""Nothing runs beside a timed section: the host-wide bench lock (tunelab.host.benchlock) with real
processes, then a whole SQLite pack through Snakemake with two cores and its job log."""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tunelab.host import benchlock, ownership
from tunelab.run import recovery

# A clean child (no lock state copied by fork) that imports this module: the workflow's
# helpers are imported where they are used, so that stays quick.
SPAWN = multiprocessing.get_context("spawn")


def _hold(kind: str, job: str, held, release) -> None:
    with getattr(benchlock, kind)(job):
        held.set()
        release.wait(60)


@contextlib.contextmanager
def holder(kind: str, job: str):
    """A process that takes the lock ``kind`` as ``job`` and keeps it until the block ends
    (or ``release`` is set); ``held`` is set once it has the lock."""
    held, release = SPAWN.Event(), SPAWN.Event()
    proc = SPAWN.Process(target=_hold, args=(kind, job, held, release))
    proc.start()
    try:
        yield held, release
    finally:
        release.set()
        proc.join(30)
        assert proc.exitcode == 0


@pytest.fixture
def lock_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TUNELAB_LOCK_DIR", str(tmp_path / "lock"))
    monkeypatch.setenv("TUNELAB_JOB_LOG", str(tmp_path / "logs" / "jobs.jsonl"))
    return tmp_path


def spans(log: Path) -> list[dict]:
    """The job log's spans by start (each is written when its lock is released)."""
    found = [json.loads(line) for line in log.read_text().splitlines()]
    return sorted(found, key=lambda s: s["start_ns"])


def overlap(a: dict, b: dict) -> bool:
    return a["start_ns"] < b["end_ns"] and b["start_ns"] < a["end_ns"]


def test_an_exclusive_holder_blocks_a_shared_one_and_the_other_way_round(lock_env):
    with holder("exclusive", "measure") as (measuring, stop_measuring):
        assert measuring.wait(30)
        assert benchlock.held_exclusively()
        with holder("shared", "report") as (reporting, stop_reporting):
            assert not reporting.wait(0.5)
            stop_measuring.set()
            assert reporting.wait(30)
            assert not benchlock.held_exclusively()
            with holder("exclusive", "measure again") as (measuring_again, _):
                assert not measuring_again.wait(0.5)
                stop_reporting.set()
                assert measuring_again.wait(30)
    first, report, second = spans(lock_env / "logs" / "jobs.jsonl")
    assert [s["kind"] for s in (first, report, second)] == ["exclusive", "shared", "exclusive"]
    assert first["end_ns"] <= report["start_ns"] and report["end_ns"] <= second["start_ns"]
    assert not benchlock.held_exclusively()


def test_two_shared_holders_run_together_and_both_record_their_span(lock_env):
    with holder("shared", "merge") as (a, _), holder("shared", "datagen") as (b, _):
        assert a.wait(30) and b.wait(30)
        assert not benchlock.held_exclusively()
    datagen, merge = sorted(spans(lock_env / "logs" / "jobs.jsonl"), key=lambda s: s["job"])
    assert (datagen["job"], merge["job"]) == ("datagen", "merge")
    assert {merge["kind"], datagen["kind"]} == {"shared"}
    assert merge["pid"] != datagen["pid"] and overlap(merge, datagen)


def test_the_lock_file_can_be_locked_by_every_user(lock_env):
    with benchlock.shared("probe"):
        pass
    assert benchlock.lock_path() == lock_env / "lock" / benchlock.LOCK_NAME
    assert benchlock.lock_path().stat().st_mode & 0o777 == 0o666


def test_without_a_chosen_directory_the_first_writable_system_one_holds_the_lock(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("TUNELAB_LOCK_DIR", raising=False)
    monkeypatch.setattr(benchlock, "SYSTEM_LOCK_DIRS", (str(tmp_path / "none"), str(tmp_path)))
    assert benchlock.lock_path() == tmp_path / benchlock.LOCK_NAME
    monkeypatch.setattr(benchlock, "SYSTEM_LOCK_DIRS", (str(tmp_path / "none"),))
    assert benchlock.lock_path().parent == Path(tempfile.gettempdir())


def test_a_nested_hold_does_not_wait_on_its_own_process(lock_env):
    with benchlock.exclusive("measure"), benchlock.shared("inside"):
        pass
    waits_on_itself = pytest.raises(RuntimeError, match="holds the bench lock shared")
    with benchlock.shared("report"), waits_on_itself, benchlock.exclusive("measure"):
        pass
    assert [s["job"] for s in spans(lock_env / "logs" / "jobs.jsonl")] == ["measure", "report"]


def test_clean_leaves_engine_data_alone_while_a_measurement_holds_the_lock(lock_env):
    work = lock_env / "work"
    ownership.make_dir(work / "points" / "p1")
    with holder("exclusive", "measure") as (measuring, _):
        assert measuring.wait(30)
        assert "left alone" in recovery._clean_workdir(work)
        assert (work / "points").exists()
    assert "removed engine data" in recovery._clean_workdir(work)
    assert not (work / "points").exists()


def test_job_names_say_the_command_and_what_it_writes():
    assert benchlock.job_name(["merge", "a.csv", "b.csv", "--out", "m.csv"]) == "merge m.csv"
    assert benchlock.job_name(["report", "--out=r.html"]) == "report r.html"
    assert benchlock.job_name(["datagen", "k-v1-r1-s1", "--data-dir", "d"]) == "datagen k-v1-r1-s1"
    assert benchlock.job_name(["index"]) == "index"


# The whole workflow. Two sweeps on two data sets; calibration off.
SWEEP = """\
name: {name}
description: three pool sizes, one workload
engines: [sqlite]
dataset: {{rows: 20000, seed: {seed}}}
knobs:
  buffer_pool: [10, 100, 1000]
workloads:
  - type: {workload}
{extra}cache: cold
repetitions: 2
"""


def _blocked_waiters(lock: Path) -> int:
    """Processes waiting for ``lock`` now. Matched by inode alone: on overlay file systems
    /proc/locks names the underlying device, not the one stat() reports."""
    ino = str(lock.stat().st_ino)
    return sum(
        1
        for line in Path("/proc/locks").read_text().splitlines()
        if "->" in line and any(f.split(":")[-1] == ino for f in line.split() if f.count(":") == 2)
    )


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    """The run's directory. A stand-in measurement holds the lock as the run starts, so both
    data sets' generations (and the job server's first imports) wait and then hold it
    together: the shared-with-shared overlap is
    then certain rather than left to process start-up times."""
    from test_workflow_e2e import snakemake

    work = tmp_path_factory.mktemp("pack")
    (work / "sweeps").mkdir()
    sweeps = [("scans", 21, "scan", ""), ("lookups", 22, "multipoint", "    queries: 2\n")]
    for name, seed, workload, extra in sweeps:
        text = SWEEP.format(name=name, seed=seed, workload=workload, extra=extra)
        (work / "sweeps" / f"{name}.yaml").write_text(text)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TUNELAB_LOCK_DIR", str(work / "lock"))
        mp.delenv("TUNELAB_JOB_LOG", raising=False)  # the Snakefile's default, logs/jobs.jsonl
        done: list = []
        with benchlock.exclusive("stand-in measurement"):
            run = threading.Thread(target=lambda: done.append(snakemake(work, "--cores", "2")))
            run.start()
            deadline = time.monotonic() + 300
            # Three wait: both data generations and the run's job server, whose first
            # imports never run beside a measurement either.
            while _blocked_waiters(benchlock.lock_path()) < 3 and run.is_alive():
                assert time.monotonic() < deadline, "the data generations never waited"
                time.sleep(0.05)
        run.join()
    proc = done[0]
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work


@pytest.mark.slow
def test_no_job_runs_beside_a_timed_section(pack):
    import pandas as pd

    log = spans(pack / "logs" / "jobs.jsonl")
    exclusive = [s for s in log if s["kind"] == "exclusive"]
    shared = [s for s in log if s["kind"] == "shared"]
    rows = pd.concat(
        pd.read_csv(pack / "results" / "sqlite" / f"{n}.csv") for n in ("scans", "lookups")
    )
    timed = [
        {"start_ns": a, "end_ns": b} for a, b in zip(rows["timed_start_ns"], rows["timed_end_ns"])
    ]

    # (a) every kind of job recorded its span: two measurements (a sweep each), the rest shared
    commands = {s["job"].split()[0] for s in shared}
    assert [s["job"].split()[0] for s in exclusive] == ["run-sweep"] * 2
    assert {"datagen", "merge", "report", "index"} <= commands
    assert len(rows) == 6 * 2 and len(timed) == 12
    # the clocks agree: every timed section lies inside its measurement's hold
    for t in timed:
        assert any(e["start_ns"] <= t["start_ns"] and t["end_ns"] <= e["end_ns"] for e in exclusive)
    # (b) measurements ran alone: beside no other measurement and no shared job
    assert not any(overlap(a, b) for a, b in itertools.combinations(exclusive, 2))
    assert not any(overlap(s, e) for s in shared for e in exclusive)
    # (c) so no shared job ran beside any timed section
    assert not any(overlap(s, t) for s in shared for t in timed)
    # (d) and shared jobs did run in parallel (the two data sets, released together)
    datagens = [s for s in shared if s["job"].startswith("datagen")]
    assert len(datagens) == 2 and overlap(*datagens)


@pytest.mark.slow
def test_two_checkouts_on_one_host_never_measure_at_once(tmp_path):
    """Two runs in two directories (two checkouts: their own workdir, results and logs),
    started together with the lock's default place: their timed sections never overlap."""
    import pandas as pd
    from test_workflow_e2e import snakemake

    checkouts = [tmp_path / "one", tmp_path / "two"]
    for n, work in enumerate(checkouts):
        (work / "sweeps").mkdir(parents=True)
        text = SWEEP.format(name=f"scans{n}", seed=31 + n, workload="scan", extra="")
        (work / "sweeps" / f"scans{n}.yaml").write_text(text)
    done: dict = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TUNELAB_LOCK_DIR", raising=False)  # host-wide: /run/lock or /var/lock
        mp.delenv("TUNELAB_JOB_LOG", raising=False)
        runs = [
            threading.Thread(target=lambda w=w: done.update({w: snakemake(w, "--cores", "2")}))
            for w in checkouts
        ]
        for run in runs:
            run.start()
        for run in runs:
            run.join()
    for work in checkouts:
        assert done[work].returncode == 0, done[work].stderr[-3000:]
    held = {
        w: [s for s in spans(w / "logs" / "jobs.jsonl") if s["kind"] == "exclusive"]
        for w in checkouts
    }
    timed = {}
    for n, work in enumerate(checkouts):
        rows = pd.read_csv(work / "results" / "sqlite" / f"scans{n}.csv")
        timed[work] = [
            {"start_ns": a, "end_ns": b}
            for a, b in zip(rows["timed_start_ns"], rows["timed_end_ns"])
        ]
        assert len(held[work]) == 1 and len(timed[work]) == 6  # one sweep, in rounds
    one, two = checkouts
    # the two runs did run at the same time (their jobs' spans interleave) ...
    every = {w: spans(w / "logs" / "jobs.jsonl") for w in checkouts}
    first_end = min(max(s["end_ns"] for s in every[w]) for w in checkouts)
    last_start = max(min(s["start_ns"] for s in every[w]) for w in checkouts)
    assert last_start < first_end, "the runs did not overlap: nothing was shown"
    # ... yet no measurement of one overlapped a measurement or timed section of the other
    assert not any(overlap(a, b) for a in held[one] for b in held[two])
    assert not any(overlap(a, b) for a in timed[one] for b in timed[two])


@pytest.mark.parametrize("target", ["a file", "nothing"])
def test_a_link_at_the_locks_path_is_not_followed(lock_env, target):
    """In a shared directory (/run/lock) another user may put a link where the lock goes:
    the lab opens no file through it, creates none where it points, and says so."""
    theirs = lock_env / "theirs"
    if target == "a file":
        theirs.write_text("another's file\n")
        theirs.chmod(0o600)
    (lock_env / "lock").mkdir()
    benchlock.lock_path().symlink_to(theirs)
    for hold in (benchlock.exclusive, benchlock.shared):
        with pytest.raises(benchlock.LockError, match="is a link"), hold("measure"):
            pass
    with pytest.raises(benchlock.LockError):
        benchlock.held_exclusively()
    if target == "a file":
        assert theirs.read_text() == "another's file\n" and theirs.stat().st_mode & 0o777 == 0o600
    else:
        assert not theirs.exists()


def test_the_job_log_is_not_written_through_a_link(lock_env):
    theirs = lock_env / "theirs"
    theirs.write_text("another's file\n")
    (lock_env / "logs").mkdir()
    (lock_env / "logs" / "jobs.jsonl").symlink_to(theirs)
    with pytest.raises(OSError), benchlock.shared("report"):
        pass
    assert theirs.read_text() == "another's file\n"
