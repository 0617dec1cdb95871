"""Noise on the host: where the client and the engine run, and what else competed for the
CPUs while a workload was timed.

CPU placement: ``plan_cpus`` splits the CPUs this process may use between the measuring
client (one CPU, a quarter of them on larger hosts) and the engine (the rest), so that
neither preempts the other; ``pin_client`` binds the measuring process to its share and
records what it got. A host with fewer than two usable CPUs gets no split.

Interference: ``watch`` reads the kernel's counters just before and just after one timed
section (never inside it) and gives the row's ``noise_*`` columns: CPU time stolen by the
hypervisor, the time the client's and the engine's threads waited for a CPU, the CPU time
the engine's threads used, their involuntary context switches, the other runnable tasks,
the CPU pressure stall time, and ``noise_interfered``. Counters the host does not expose
come out NaN, never as an error.

CPU speed: ``watch`` also times a fixed piece of CPU work (``cpu_reference``, about 3 ms)
just before and just after the section, on the client's CPU: ``noise_cpu_probe_s``, their
geometric mean. On a virtual machine whose CPU is shared with other guests (a busy sibling
thread steals no time the guest can see, yet slows every instruction) the client's speed
changes by up to 2x within minutes; the probe tracks it (``analysis.hostspeed``). Where a server
engine has CPUs of its own the same work is timed there too (``noise_engine_cpu_probe_s``), in
a thread pinned to them, for the engine's own CPU seconds (``noise_engine_cpu_s``).
"""

from __future__ import annotations

import hashlib
import math
import os
import resource
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path

PROC = Path("/proc")

# A repetition counts as measured under interference when, during its timed section:
STEAL_LIMIT = 0.01  # the hypervisor took more than 1 % of the CPUs' time, or
WAIT_LIMIT = 0.05  # the client's threads waited for a CPU more than 5 % of the section.
# Other runnable tasks are recorded, not marked: a server engine's traffic through a published
# port runs through Docker's port proxy, runnable at every round trip, and a task on another
# CPU takes nothing from the client; one on the client's CPU shows as the client's wait.

_first_affinity: tuple[int, ...] | None = None

# The CPU reference: hashing (compiled code over memory) and a bytecode loop (the client's own
# kind of work), about 3 ms on a 2.2 GHz virtual core.
_REFERENCE_BYTES = b"\x5a" * 2**20
_REFERENCE_LOOP = 40_000


def cpu_reference() -> float:
    """Seconds this CPU takes for a fixed piece of work: the same work every time, so that its
    time follows the CPU's speed (a shared core, frequency, another guest)."""
    t0 = time.perf_counter()
    hashlib.sha256(_REFERENCE_BYTES).digest()
    total = 0
    for i in range(_REFERENCE_LOOP):
        total += i
    return time.perf_counter() - t0


def cpu_reference_on(cpus: Iterable[int]) -> float:
    """``cpu_reference`` timed on ``cpus`` (a thread pinned there: a server engine's CPUs);
    NaN where the thread cannot be placed."""
    out = [math.nan]

    def probe() -> None:
        with suppress(OSError):
            os.sched_setaffinity(0, set(cpus))  # this thread only
            out[0] = cpu_reference()

    worker = threading.Thread(target=probe, name="tunelab-cpu-reference")
    worker.start()
    worker.join()
    return out[0]


def usable_cpus() -> tuple[int, ...]:
    """The CPUs this process could run on when first asked: pinning the client later does not
    shrink the set a later plan splits."""
    global _first_affinity
    if _first_affinity is None:
        _first_affinity = tuple(sorted(os.sched_getaffinity(0)))
    return _first_affinity


def cpulist(cpus: Iterable[int]) -> str:
    """CPUs in the kernel's and Docker's list format: ``0-3,6``; "" for none."""
    out: list[str] = []
    run: list[int] = []
    for cpu in sorted(set(cpus)):
        if run and cpu != run[-1] + 1:
            out.append(_span(run))
            run = []
        run.append(cpu)
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def parse_cpulist(text: str) -> tuple[int, ...]:
    """The inverse of ``cpulist`` ("" or text that is no list: no CPUs)."""
    cpus: set[int] = set()
    for part in (text or "").split(","):
        first, _, last = part.strip().partition("-")
        try:
            cpus.update(range(int(first), int(last or first) + 1))
        except ValueError:
            return ()
    return tuple(sorted(cpus))


@dataclass(frozen=True)
class Placement:
    """How the usable CPUs are split; ``client``/``engine`` empty: not split (one CPU)."""

    usable: tuple[int, ...]
    client: tuple[int, ...] = ()
    engine: tuple[int, ...] = ()
    # The client's affinity read back by pin_client (None: not pinned by this process).
    pinned: tuple[int, ...] | None = field(default=None, compare=False)

    @property
    def split(self) -> bool:
        return bool(self.client and self.engine)

    @property
    def engine_cpuset(self) -> str | None:
        """What a container engine's cpuset is set to (None: leave it unrestricted)."""
        return cpulist(self.engine) if self.split else None

    def columns(self) -> dict[str, str]:
        """``cpus_client``: the CPUs the measuring process could run on (its affinity once
        pinned, else the usable set)."""
        return {"cpus_client": cpulist(self.pinned if self.pinned is not None else self.usable)}


def plan_cpus(usable: Iterable[int] | None = None) -> Placement:
    """The client gets the highest-numbered usable CPU (a quarter of them, from the top, on
    hosts with eight or more: its worker threads may need more than one), the engine the
    others; with fewer than two usable CPUs, no split. ``usable`` defaults to
    ``usable_cpus()``."""
    cpus = tuple(sorted(set(usable_cpus() if usable is None else usable)))
    if len(cpus) < 2:
        return Placement(cpus)
    n_client = max(1, len(cpus) // 4) if len(cpus) >= 8 else 1
    return Placement(cpus, client=cpus[-n_client:], engine=cpus[:-n_client])


def _tasks(pid: int | str, proc: Path = PROC) -> list[Path]:
    try:
        return [proc / str(pid) / "task" / t for t in os.listdir(proc / str(pid) / "task")]
    except OSError:
        return []


def _set_affinity(cpus: Iterable[int], proc: Path = PROC) -> None:
    # Every thread of the process: os.sched_setaffinity(0, ...) binds only the calling one.
    cpus = set(cpus)
    for task in _tasks("self", proc):
        with suppress(OSError, ValueError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), cpus)
    os.sched_setaffinity(0, cpus)


def pin_client(placement: Placement) -> Placement:
    """Bind the measuring process (every thread, and those it starts later) to the client's
    CPUs; the returned placement records the affinity read back. Not split, or refused by
    the host: the affinity stays as it was, and is what gets recorded."""
    if placement.split:
        with suppress(OSError):
            _set_affinity(placement.client)
    return replace(placement, pinned=tuple(sorted(os.sched_getaffinity(0))))


def unpin_client(placement: Placement) -> None:
    """Give the process its usable CPUs back (after measuring)."""
    with suppress(OSError):
        _set_affinity(placement.usable)


# -- an engine's processes -------------------------------------------------------------------
def alive(pid: int | None, proc: Path = PROC) -> bool:
    return pid is not None and (proc / str(pid)).exists()


def in_cgroup_of(pid: int, container_id: str, proc: Path = PROC) -> bool:
    """Whether ``pid``, as this host's /proc numbers it, is in the container's cgroup: a PID
    the container engine reports from another PID namespace may name another process here."""
    return bool(container_id) and container_id in _read(proc / str(pid) / "cgroup")


def descendants(pid: int, proc: Path = PROC, limit: int = 512) -> list[int]:
    """``pid`` and its descendants, from its threads' ``children`` lists (only ``pid`` where
    the kernel has no such lists)."""
    seen, todo = [pid], [pid]
    while todo and len(seen) < limit:
        for task in _tasks(todo.pop(), proc):
            for child in _read(task / "children").split():
                if child.isdigit() and int(child) not in seen:
                    seen.append(int(child))
                    todo.append(int(child))
    return seen


# -- the counters read around a timed section ------------------------------------------------
@dataclass
class _Reading:
    at: float  # time.perf_counter()
    cpu_total: float = math.nan  # jiffies over all CPUs
    steal: float = math.nan
    procs_running: float = math.nan
    pressure_us: float = math.nan  # /proc/pressure/cpu "some" total
    client_invol: float = math.nan
    ours_running: int = 0  # our own and the engine's tasks in state R
    engine_invol: dict[str, float] = field(default_factory=dict)  # task -> count
    client_wait: dict[str, float] = field(default_factory=dict)  # task -> run-queue wait, ns
    engine_wait: dict[str, float] = field(default_factory=dict)
    engine_run: dict[str, float] = field(default_factory=dict)  # task -> time on a CPU, ns


def _read(path: Path) -> str:
    try:
        with open(path, "rb", buffering=0) as f:
            return f.read(1 << 16).decode("ascii", "replace")
    except OSError:
        return ""


def _stat(text: str, reading: _Reading) -> None:
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = [float(x) for x in line.split()[1:] if x.isdigit()]
            # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time
            # is already counted in user and nice
            if len(fields) >= 8:
                reading.cpu_total = sum(fields[:8])
                reading.steal = fields[7]
        elif line.startswith("procs_running "):
            value = line.split()[1]
            reading.procs_running = float(value) if value.isdigit() else math.nan


def _pressure(text: str) -> float:
    for line in text.splitlines():
        if line.startswith("some "):
            for item in line.split()[1:]:
                key, _, value = item.partition("=")
                if key == "total" and value.isdigit():
                    return float(value)
    return math.nan


def _task_status(text: str) -> tuple[bool, float]:
    """(runnable, involuntary context switches) from a task's status file."""
    running, invol = False, math.nan
    for line in text.splitlines():
        if line.startswith("State:"):
            running = line.split()[1:2] == ["R"]
        elif line.startswith("nonvoluntary_ctxt_switches:"):
            value = line.split()[1]
            invol = float(value) if value.isdigit() else math.nan
    return running, invol


def _wait_ns(text: str) -> float:
    """Time the task spent runnable but waiting for a CPU (schedstat's second field)."""
    fields = text.split()
    return float(fields[1]) if len(fields) >= 2 and fields[1].isdigit() else math.nan


def _run_ns(text: str) -> float:
    """Time the task spent on a CPU (schedstat's first field)."""
    fields = text.split()
    return float(fields[0]) if fields and fields[0].isdigit() else math.nan


def _delta(before: dict[str, float], after: dict[str, float]) -> float:
    """Summed over the tasks present at both ends (NaN: none)."""
    both = set(before) & set(after)
    return sum(after[t] - before[t] for t in both) if both else math.nan


class Watch:
    """The counters around one timed section (see ``watch``); ``columns()`` once it ended."""

    def __init__(self, engine_pids: list[int], placement: Placement | None, proc: Path) -> None:
        self.proc = proc
        self.engine_pids = list(engine_pids)
        # Listed and opened once, before: the same files are read again at the end (a read
        # from offset 0 of an open /proc file is a fresh reading, without a path lookup).
        self._own = _tasks("self", proc)
        self._engine = [t for pid in self.engine_pids for t in _tasks(pid, proc)]
        self._fds: dict[Path, int | None] = {}
        self.before: _Reading | None = None
        self.after: _Reading | None = None
        self.cpu_before = self.cpu_after = math.nan
        self.process_cpu = math.nan  # CPU seconds of the measuring process in the section
        self.engine_cpus = placement.engine if placement is not None and placement.split else ()
        self.engine_cpu_before = self.engine_cpu_after = math.nan

    def _read(self, path: Path) -> str:
        if path not in self._fds:
            try:
                self._fds[path] = os.open(path, os.O_RDONLY)
            except OSError:
                self._fds[path] = None
        fd = self._fds[path]
        if fd is None:
            return ""
        try:
            return os.pread(fd, 1 << 16, 0).decode("ascii", "replace")
        except OSError:
            return ""

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)
        self._fds.clear()

    def read(self) -> _Reading:
        r = _Reading(at=time.perf_counter())
        with suppress(OSError, AttributeError):
            r.client_invol = float(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)
        for task in self._own:
            r.ours_running += _task_status(self._read(task / "status"))[0]
            if not math.isnan(wait := _wait_ns(self._read(task / "schedstat"))):
                r.client_wait[str(task)] = wait
        for task in self._engine:
            running, invol = _task_status(self._read(task / "status"))
            r.ours_running += running
            if not math.isnan(invol):
                r.engine_invol[str(task)] = invol
            schedstat = self._read(task / "schedstat")
            if not math.isnan(wait := _wait_ns(schedstat)):
                r.engine_wait[str(task)] = wait
            if not math.isnan(run := _run_ns(schedstat)):
                r.engine_run[str(task)] = run
        r.pressure_us = _pressure(self._read(self.proc / "pressure" / "cpu"))
        _stat(self._read(self.proc / "stat"), r)  # last: procs_running closest to the section
        r.at = (r.at + time.perf_counter()) / 2
        return r

    def columns(self) -> dict[str, float | bool]:
        return columns([self])


def _total(values: list[float]) -> float:
    """The sum of what was measured (NaN: nothing was)."""
    known = [v for v in values if not math.isnan(v)]
    return sum(known) if known else math.nan


def _geometric_mean(values: list[float]) -> float:
    if not all(v > 0 for v in values):  # NaN too: a probe not taken
        return math.nan
    return math.exp(sum(map(math.log, values)) / len(values))


def columns(watches: list[Watch]) -> dict[str, float | bool]:
    """The counters of a timed section, once it ended; of several (a cold read's statements,
    each timed after an eviction of its own) as of one section made of them: seconds and
    counts summed, shares of their summed time, the probes' geometric mean, the most other
    runnable tasks."""
    ends = [(w.before, w.after) for w in watches]
    if not ends or any(b is None or a is None for b, a in ends):
        raise RuntimeError("the watched section has not ended")
    section_s = sum(max(a.at - b.at, 1e-9) for b, a in ends)

    def tasks(name: str) -> float:  # summed over each section's tasks present at both ends
        return _total([_delta(getattr(b, name), getattr(a, name)) for b, a in ends])

    total = sum(a.cpu_total - b.cpu_total for b, a in ends)
    steal = sum(a.steal - b.steal for b, a in ends) / total if total > 0 else math.nan
    client_wait = tasks("client_wait") / 1e9 / section_s
    readings = [r for pair in ends for r in pair if not math.isnan(r.procs_running)]
    others = max((r.procs_running - r.ours_running for r in readings), default=math.nan)
    pressure = sum(a.pressure_us - b.pressure_us for b, a in ends) / 1e6 / section_s
    interfered = bool(steal > STEAL_LIMIT or client_wait > WAIT_LIMIT)
    probes = [p for w in watches for p in (w.cpu_before, w.cpu_after)]
    engine_probes = [p for w in watches for p in (w.engine_cpu_before, w.engine_cpu_after)]
    return {
        "noise_cpu_probe_s": _geometric_mean(probes),
        "noise_client_cpu_s": sum(w.process_cpu for w in watches),
        "noise_engine_cpu_s": tasks("engine_run") / 1e9,
        "noise_engine_cpu_probe_s": _geometric_mean(engine_probes),
        "noise_steal_share": steal,
        "noise_client_wait_share": client_wait,
        "noise_engine_wait_share": tasks("engine_wait") / 1e9 / section_s,
        "noise_client_invol_cs": sum(a.client_invol - b.client_invol for b, a in ends),
        "noise_engine_invol_cs": tasks("engine_invol"),
        "noise_other_runnable": max(others, 0.0) if not math.isnan(others) else math.nan,
        "noise_cpu_pressure": pressure,
        "noise_interfered": interfered,
    }


@contextmanager
def watch(
    engine_pids: list[int], placement: Placement | None = None, proc: Path = PROC
) -> Iterator[Watch]:
    """Read the counters on entering and on leaving: put the timed section, and nothing else,
    inside. ``engine_pids``: the engine's host processes (``Engine.pids()``, listed before
    entering); ``placement``: where the client and the engine run (None: they may use every
    CPU of the host, so any other runnable task counts as interference)."""
    w = Watch(engine_pids, placement, proc)
    if w.engine_cpus:
        w.engine_cpu_before = cpu_reference_on(w.engine_cpus)
    w.cpu_before = cpu_reference()
    w.before = w.read()
    w.process_cpu = time.process_time()
    try:
        yield w
    finally:
        w.process_cpu = time.process_time() - w.process_cpu
        w.after = w.read()
        w.cpu_after = cpu_reference()
        if w.engine_cpus:
            w.engine_cpu_after = cpu_reference_on(w.engine_cpus)
        w.close()


# Placement.columns, Engine.cpu_columns
PLACEMENT_COLUMNS = ("cpus_client", "cpus_engine", "client_route")
NOISE_COLUMNS = (
    "noise_cpu_probe_s",  # the CPU reference's seconds around the section (geometric mean)
    "noise_engine_cpu_probe_s",  # the same on a server engine's CPUs
    "noise_client_cpu_s",  # CPU seconds (user + system) of the measuring process in the section
    # CPU seconds of the engine's processes' threads (those alive at both ends) in the section
    "noise_engine_cpu_s",
    "noise_steal_share",  # share of the CPUs' time the hypervisor stole during the section
    # seconds the client's threads (those alive at both ends) waited for a CPU, per second
    "noise_client_wait_share",
    "noise_engine_wait_share",  # the same, summed over the engine's processes' threads
    "noise_client_invol_cs",  # involuntary context switches of the measuring process
    "noise_engine_invol_cs",  # the same, summed over the engine's processes' threads
    "noise_other_runnable",  # most runnable tasks not ours, at the section's start or end
    "noise_cpu_pressure",  # CPU pressure stall ("some") seconds per second of the section
    "noise_interfered",  # measured under interference: see STEAL_LIMIT and WAIT_LIMIT
)
