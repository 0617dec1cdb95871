"""Driving the real `./lab run` through faults, and checking it healed.

A run is started the way a user starts it, in a session of its own (so a fault can hit every
process of it at once, as a closed terminal or an OOM kill does), with a private temporary
directory (so what it leaves there can be counted). `healed()` is what the fault matrix asks
after every fault and one plain rerun: the rerun exited 0, every point holds exactly its
repetitions (none lost of those finished, none twice), every point file matches its check
file, nothing of the run is left behind (containers, networks, volumes, loop devices,
temporary files, locks, secrets, processes), and the host's read-ahead settings are as they
were.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tunelab.host import ownership
from tunelab.store import results

REPO = Path(__file__).resolve().parents[2]

SWEEP = """\
name: {name}
description: a sweep the fault matrix breaks and heals
engines: [{engine}]
dataset: {{rows: {rows}, seed: {seed}}}
knobs:
  buffer_pool: {pools}
workloads:
  - type: scan
cache: {cache}
repetitions: {reps}
"""


@dataclass
class Lab:
    """A checkout-like work directory with its own sweeps, and how to run the lab on it."""

    work: Path
    engine: str
    lock_dir: Path  # the bench lock's directory: one per host in real use, shared by cells
    sweeps: list[dict] = field(default_factory=list)
    extra_config: list[str] = field(default_factory=list)
    env_extra: dict[str, str] = field(default_factory=dict)
    results_dir: Path | None = None  # elsewhere than the work directory (a small disk)

    def __post_init__(self) -> None:
        (self.work / "sweeps").mkdir(parents=True, exist_ok=True)
        (self.work / "tmp").mkdir(exist_ok=True)
        for s in self.sweeps:
            self.write_sweep(s)

    def write_sweep(self, s: dict) -> Path:
        path = self.work / "sweeps" / f"{s['name']}.yaml"
        fields = {"cache": "cold", **s}
        path.write_text(SWEEP.format(engine=self.engine, **fields))
        return path

    @property
    def results(self) -> Path:
        return self.results_dir or self.work / "results"

    def args(self) -> list[str]:
        return [
            str(REPO / "lab"),
            "run",
            "--directory",
            str(self.work),
            "--config",
            f"sweeps={self.work / 'sweeps'}/*.yaml",
            f"engine={self.engine}",
            "calibrate=off",
            "shared_pools=off",
            *self.extra_config,
            *([f"results_dir={self.results_dir}"] if self.results_dir else []),
        ]

    def env(self) -> dict[str, str]:
        env = {
            **os.environ,
            "TUNELAB_LOCK_DIR": str(self.lock_dir),
            "TMPDIR": str(self.work / "tmp"),
            **self.env_extra,
        }
        for name in ("TUNELAB_JOB_LOG", "PYTHONUNBUFFERED", "TUNELAB_DEBUG"):
            env.pop(name, None)
        return env

    def start(self, sigint_ignored: bool = False) -> subprocess.Popen:
        """The run in a session of its own; ``sigint_ignored``: as a script's background job
        or cron starts it (POSIX), with SIGINT ignored for good."""
        log = (self.work / "lab.out").open("ab")
        log.write(f"\n=== run at {time.strftime('%H:%M:%S')}\n".encode())
        log.flush()
        ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
        return subprocess.Popen(
            self.args(),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env(),
            start_new_session=True,
            preexec_fn=ignore,
        )

    def run(self, timeout: float = 900) -> tuple[int, str]:
        """One plain run to its end: exit status and what it printed."""
        mark = self.out_size()
        proc = self.start()
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_session(proc)
            raise
        return code, self.out_since(mark)

    def out_size(self) -> int:
        path = self.work / "lab.out"
        return path.stat().st_size if path.exists() else 0

    def out_since(self, mark: int) -> str:
        return (self.work / "lab.out").read_bytes()[mark:].decode(errors="replace")


# -- the processes of a run ------------------------------------------------------------------
def session_members(sid: int, living: bool = False) -> list[int]:
    """The processes of a session; ``living``: not those that ended and wait to be reaped."""
    found = []
    # Not Path.glob("[0-9]*/stat"): its stat() of a process that just ended raises ESRCH.
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:  # the process ended meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[3]) == sid and not (living and fields[0] in "ZX"):  # 6: session, 3: state
            found.append(int(entry.name))
    return found


def commands_in(sid: int) -> list[str]:
    out = []
    for pid in session_members(sid):
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return out


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL every process of the run's session, again until none lives: one forked between
    the listing and the kills (Snakemake starting a job) would live on, and the next run would
    rightly find the checkout held by it."""
    deadline = time.monotonic() + 30
    while pids := session_members(proc.pid, living=True):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert time.monotonic() < deadline, f"still alive after SIGKILL: {pids}"
        time.sleep(0.01)
    proc.wait(30)


def wait_for_command(proc: subprocess.Popen, marker: str, timeout: float = 300) -> bool:
    """Wait until a process of the run's session runs ``marker``; False if the run ended."""
    deadline = time.monotonic() + timeout
    while not any(marker in c for c in commands_in(proc.pid)):
        if proc.poll() is not None:
            return False
        assert time.monotonic() < deadline, f"{marker} never started"
        time.sleep(0.02)
    return True


def wait_for_file(proc: subprocess.Popen, pattern: str, root: Path, timeout: float = 300) -> bool:
    """Wait until a file matching ``pattern`` exists below ``root``; False if the run ended."""
    deadline = time.monotonic() + timeout
    while not any(root.glob(pattern)):
        if proc.poll() is not None:
            return False
        assert time.monotonic() < deadline, f"no {pattern} under {root}"
        time.sleep(0.05)
    return True


def sleep_into(proc: subprocess.Popen, seconds: float, while_running: str | None = None) -> bool:
    """Sleep while the run lives; False when it ended first. With ``while_running``, only
    while a process of the run's session runs that command: a kill then lands at its end at
    the latest, and not after the run (a report takes 2 s on one host, 0.7 s on another)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if while_running and not any(while_running in c for c in commands_in(proc.pid)):
            break
        time.sleep(0.02)
    return proc.poll() is None


# -- what a run measured ---------------------------------------------------------------------
def outcome(lab: Lab) -> dict[str, list[tuple[str, int]]]:
    """Per sweep: the (point, repetition) pairs of the merged results, after checking every
    point file against its check file and that no repetition is there twice."""
    found = {}
    for merged in sorted((lab.results / lab.engine).glob("*.csv")):
        for point in (lab.results / lab.engine / merged.stem).glob("*.csv"):
            if not point.name.endswith(".partial.csv"):
                assert results.verify_point(point).problem is None, point
        rows = pd.read_csv(merged)
        pairs = list(zip(rows["point_id"], rows["rep"]))
        assert len(pairs) == len(set(pairs)), f"{merged}: a repetition twice"
        found[merged.stem] = sorted(pairs)
    return found


def finished_points(lab: Lab) -> dict[Path, str]:
    """Every verified point file now, with its content's digest: what a fault must not lose
    or change."""
    kept = {}
    for csv in sorted((lab.results / lab.engine).glob("*/*.csv")):
        if results.check_path(csv).is_file() and results.verify_point(csv).problem is None:
            kept[csv] = hashlib.sha256(csv.read_bytes()).hexdigest()
    return kept


def kept_as_it_was(lab: Lab, before: dict[Path, str]) -> None:
    """Every point file finished before the fault is still there, unchanged."""
    for csv, digest in before.items():
        assert csv.is_file(), f"a finished point was lost: {csv}"
        assert hashlib.sha256(csv.read_bytes()).hexdigest() == digest, f"changed: {csv}"


# -- what a run may leave on the host --------------------------------------------------------
def read_ahead() -> dict[str, str]:
    """Every block device's read_ahead_kb except the loop devices (the lab's own come and go)."""
    found = {}
    for dev in sorted(Path("/sys/block").glob("*")):
        if dev.name.startswith("loop"):
            continue
        with contextlib.suppress(OSError):
            found[dev.name] = (dev / "queue" / "read_ahead_kb").read_text().strip()
    return found


def loops_under(root: Path) -> list[str]:
    """Loop devices whose backing file lies under ``root``."""
    if not shutil.which("losetup"):
        return []
    done = subprocess.run(
        ["losetup", "-a", "-O", "NAME,BACK-FILE", "--noheadings"], capture_output=True, text=True
    )
    return [ln for ln in done.stdout.splitlines() if str(root) in ln]


def docker_left(root: Path) -> list[str]:
    """The lab's containers, networks and volumes of runs in ``root``."""
    from tunelab.host import containers

    if containers.docker_unavailable_reason() is not None:
        return []
    c = containers.client()
    mine = str(root)
    ours = {"label": "tunelab=1"}
    left = [
        f"container {x.name}"
        for x in c.containers.list(all=True, filters=ours)
        if x.labels.get("tunelab.workdir", "").startswith(mine)
    ]
    for net in c.networks.list(filters={"label": "tunelab=1"}):
        if net.attrs.get("Labels", {}).get("tunelab.workdir", "").startswith(mine):
            left.append(f"network {net.name}")
    for vol in c.volumes.list(filters={"label": "tunelab=1"}):
        if (vol.attrs.get("Labels") or {}).get("tunelab.workdir", "").startswith(mine):
            left.append(f"volume {vol.name}")
    return left


def leftovers(lab: Lab) -> list[str]:
    """Whatever a finished run should not have left: one line each."""
    work = lab.work
    left = []
    for name in ("runs", "points"):  # engine data and run directories (secrets among them)
        left += [
            f".tunelab/{name}/{p.name}"
            for p in (work / ".tunelab" / name).glob("*")
            if p.name != ownership.STAMP
        ]
    left += [f"secret {p}" for p in work.rglob("secret")]
    locks = work / ".snakemake" / "locks"
    if locks.is_dir():
        left += [f"snakemake lock {p.name}" for p in locks.iterdir()]
    left += [f"temporary {p.relative_to(work)}" for p in (work / "tmp").iterdir()]
    left += [
        f"partial write {p.relative_to(work)}"
        for p in work.rglob(".*.tmp")
        if ".snakemake" not in p.parts
    ]
    left += [f"loop device {ln}" for ln in loops_under(work)]
    left += docker_left(work)
    for pid in Path("/proc").glob("[0-9]*"):  # no process of the run lives on
        try:
            cmd = (pid / "cmdline").read_bytes()
        except OSError:
            continue
        if str(work).encode() in cmd and b"pytest" not in cmd:
            left.append(f"process {pid.name}: {cmd[:120]!r}")
    return left


def healed(lab: Lab, expected: dict, host_before: dict[str, str], max_s: float = 900) -> float:
    """One plain rerun after a fault: asserts it healed (see the module's docstring) and
    returns how long the heal took."""
    t0 = time.monotonic()
    code, said = lab.run(max_s)
    took = time.monotonic() - t0
    assert code == 0, f"the plain rerun exited {code}:\n{said[-4000:]}"
    assert "Traceback" not in said, said[-4000:]
    assert outcome(lab) == expected
    assert (lab.work / "reports" / "index.html").is_file()
    assert (left := leftovers(lab)) == [], left
    assert read_ahead() == host_before
    return took


def last_lab_line(text: str) -> str:
    """The last line printed, without the lab's bold escape codes."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def seeded(*parts: object) -> random.Random:
    return random.Random("/".join(map(str, parts)))
