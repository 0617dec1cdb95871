"""A stop while a command starts (Python still importing): Snakemake as `./lab run` starts it
(tunelab.run.snakemake_cli) and the `tunelab` command end with 130 and no traceback; the wrapper
is Snakemake's own command line, and `tunelab recover` knows it as Snakemake."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunelab.host import ownership
from tunelab.host.ownership import Proc
from tunelab.run import recovery

WRAPPER = [sys.executable, "-m", "tunelab.run.snakemake_cli"]


def test_it_is_snakemakes_command_line():
    plain = subprocess.run(
        [Path(sys.executable).parent / "snakemake", "--version"], capture_output=True, text=True
    )
    done = subprocess.run([*WRAPPER, "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == plain.stdout != "", done.stderr
    bad = subprocess.run([*WRAPPER, "--no-such-option"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.splitlines()[-1].startswith("snakemake: error")


COMMANDS = {
    "snakemake": [*WRAPPER, "--version"],
    "tunelab": [str(Path(sys.executable).parent / "tunelab"), "engines"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_stop_while_it_starts_ends_it_with_130_and_no_traceback(command):
    """SIGINT at moments over the command's start, while it imports its modules (plain
    `snakemake`, and `tunelab` before, printed a traceback of some sixty lines then). Not
    covered: the interpreter's own first ~50 ms, before any code of the lab's runs."""
    hit = 0
    for delay in (0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7):
        proc = subprocess.Popen(
            COMMANDS[command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        if proc.returncode == 0:  # it had finished
            continue
        hit += 1
        # -SIGINT: it came as the interpreter ended, after Python had put back the default
        assert proc.returncode in (130, -signal.SIGINT), (delay, out, err)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err)
    assert hit, "every start finished before its stop"


@pytest.mark.parametrize("module", ["tunelab.run.labstart", "tunelab.run.snakemake_cli"])
def test_recover_knows_it_as_snakemake(module, tmp_path):
    started = Proc(1, (sys.executable, "-m", module, "--", "--profile", "p"), tmp_path)
    assert recovery.is_snakemake(started)
    assert recovery.lock_holders(tmp_path, [started]) == [started]
    other = Proc(2, (sys.executable, "-m", "tunelab.cli", "--profile", "p"), tmp_path)
    assert not recovery.is_snakemake(other)
    assert recovery.lock_holders(tmp_path, [other]) == []


# A scheduler whose main thread holds its lock (finishing a failed job) when SIGTERM comes.
HELD_LOCK = """
import os, signal, threading
from snakemake.scheduling.job_scheduler import JobScheduler
from tunelab.run import snakemake_cli
if PATCHED:
    snakemake_cli.patch_scheduler()
s = object.__new__(JobScheduler)
s._lock, s._open_jobs, s._user_kill = threading.Lock(), threading.Semaphore(0), None
signal.signal(signal.SIGTERM, s.exit_gracefully)
with s._lock:
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(100):  # Python runs the handler between two of these
        pass
assert s._user_kill == "graceful" and s._open_jobs.acquire(blocking=False)
print("stopped")
"""


@pytest.mark.parametrize("patched", [True, False], ids=["lab", "snakemake-as-is"])
def test_sigterm_while_the_scheduler_holds_its_lock_stops_the_run(patched):
    """Snakemake's own handler takes the scheduler's lock, which its main thread already
    holds: the run waits on itself for good (seen once in the fault matrix: SIGTERM to a
    MariaDB run as its sweep started). The lab's handler sets the same flag and returns."""
    code = HELD_LOCK.replace("PATCHED", str(patched))
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        assert not patched, "the lab's handler waited on the lock its own thread holds"
        return
    assert patched, "Snakemake's own handler no longer waits: the lab's may go"
    assert done.returncode == 0 and done.stdout.strip() == "stopped", done.stderr


SWEEP = """name: started
engines: [sqlite]
dataset: {rows: 2000, seed: 5}
knobs: {buffer_pool: [100]}
workloads: [{type: scan}]
cache: warm
repetitions: 1
"""


def lab_run(tmp_path: Path, engine: str = "sqlite", repetitions: int = 1) -> list[str]:
    """`./lab run` of the one-point SWEEP in ``tmp_path`` (skipped without the lab's
    environment): its command line."""
    from test_input_safety import REPO, lab_installed

    if reason := lab_installed():
        pytest.skip(reason)
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "started.yaml").write_text(
        SWEEP.replace("repetitions: 1", f"repetitions: {repetitions}")
    )
    return [
        str(REPO / "lab"),
        "run",
        "--directory",
        str(tmp_path),
        "--config",
        f"sweeps={tmp_path}/sweeps/*.yaml",
        f"engine={engine}",
        "calibrate=off",
    ]


@pytest.mark.slow
def test_a_stop_while_lab_run_reads_its_arguments_ends_it_in_one_line(tmp_path):
    """Ctrl-C in the first second of `./lab run`, while it reads the run's fields through
    Snakemake's argument parser (the fault matrix met a traceback there): 130, the lab's one
    line, no traceback."""
    argv = lab_run(tmp_path)
    for delay in (0.3, 0.6, 0.9):
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, (delay, out[-3000:])
        assert "Traceback" not in out and "KeyboardInterrupt" not in out, (delay, out[-3000:])
        last = re.sub(r"\x1b\[[0-9;]*m", "", out.strip().splitlines()[-1])
        assert last.startswith("[lab] stopped by SIGINT"), out[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("step", ["validating the run's", "sweep file(s) valid"])
def test_a_stop_in_the_steps_before_the_sweeps_ends_it_in_one_line(step, tmp_path):
    """Ctrl-C just after a start step's line, while the next step's Python imports
    (validation, the preflight, the recovery; the fault matrix met "Fatal Python error:
    init_import_site" and a traceback from the preflight): 130, the lab's one line, no
    traceback."""
    argv = lab_run(tmp_path)
    for delay in (0.0, 0.05, 0.1, 0.2, 0.3):
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if step in line:
                break
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        out = "".join(seen) + proc.communicate(timeout=120)[0]
        assert step in out, out[-3000:]
        if proc.returncode == 0:  # the run ended first (it had nothing to measure)
            continue
        assert proc.returncode == 130, (delay, out[-3000:])
        assert "Traceback" not in out and "Fatal Python error" not in out, (delay, out[-3000:])
        last = re.sub(r"\x1b\[[0-9;]*m", "", out.strip().splitlines()[-1])
        assert last.startswith("[lab] stopped by SIGINT"), out[-3000:]


def _sigint_ignored(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(re.search(r"^SigIgn:\s*([0-9a-f]+)", status, re.M).group(1), 16)
    return bool(mask & (1 << (signal.SIGINT - 1)))


@pytest.mark.slow
@pytest.mark.parametrize("ignored", [False, True], ids=["terminal", "sigint-ignored"])
def test_snakemake_takes_sigint_back_unless_the_lab_was_started_without_it(ignored, tmp_path):
    """The checks before the sweeps run with SIGINT ignored (tunelab.run.labstart); Snakemake,
    in the same process, gets it back where the lab was started from a terminal, and not
    where it was started with SIGINT ignored (cron, a script's `./lab run &`)."""
    argv = lab_run(tmp_path, repetitions=30)
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=ignore,
    )
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "Building DAG of jobs" in line:  # Snakemake's own work has begun
                break
        (snakemake,) = [
            p
            for p in ownership.processes()
            if "tunelab.run.labstart" in p.names() and os.getsid(p.pid) == proc.pid
        ]
        assert _sigint_ignored(snakemake.pid) == ignored, "".join(seen)[-3000:]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=120)


@pytest.mark.parametrize(
    ("before", "blank"), [("Using profile x.", True), ("done\n", False), ("", False)]
)
def test_the_labs_line_after_a_run_output_starts_a_line_of_its_own(before, blank, tmp_path):
    """A process stopped between a message and its newline (unbuffered Python writes them
    apart) left the lab's stop line glued to half a line; the lab's `fresh_line`, run on the
    run's output as the lab runs it, ends that line first, and adds no blank line."""
    from test_input_safety import REPO

    out = tmp_path / "out"
    out.write_text(before)
    lab = (REPO / "lab").read_text()
    helpers = "\n".join(
        line for line in lab.splitlines() if line.startswith(("say() {", "fresh_line() {"))
    )
    done = subprocess.run(
        ["bash", "-c", f'{helpers}\nfresh_line "$1"; say stopped', "-", out],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "stopped" in done.stderr, done.stderr
    assert done.stderr.startswith("\n") == blank, repr(done.stderr)


@pytest.mark.slow
def test_sigterm_to_a_run_of_every_engine_stops_the_engine_running_in_one_line(tmp_path):
    """`./lab run --config engine=all` runs each engine's `./lab run` in turn. A SIGTERM to
    the lab alone (`kill PID`, a CI runner's stop) stops the engine it is running too: 143,
    that run's one line naming the command typed, no next engine, nothing of the run left
    running."""
    argv = lab_run(tmp_path, engine="all", repetitions=30)
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "Building DAG of jobs" in line:  # the SQLite run's Snakemake has begun
                break
        proc.send_signal(signal.SIGTERM)
        out = "".join(seen) + proc.communicate(timeout=180)[0]
    finally:
        deadline = time.monotonic() + 10  # a job's last process may take a moment to end
        while (left := [p for p in ownership.processes() if _session(p.pid) == proc.pid]) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.2)
        if left:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, out[-3000:]
    assert left == [], [p.names() for p in left]
    last = re.sub(r"\x1b\[[0-9;]*m", "", out.strip().splitlines()[-1])
    assert last.startswith("[lab] stopped by SIGTERM"), out[-3000:]
    assert "engine=all" in last, last  # the command that goes on is the one the user typed
    assert "engine mariadb" not in out
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob(f"tunelab-lab.{proc.pid}.*"))


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:  # it ended meanwhile
        return None
