"""Noise control: the CPU placement of client and engine, the interference read around a
timed section (against a real competing process, and on a made-up /proc), and what the
report's Methods say of it."""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pandas as pd
import pytest

from tunelab.host import noise
from tunelab.report import methods
from tunelab.report.data import ReportData

USABLE = sorted(os.sched_getaffinity(0))
needs_two_cpus = pytest.mark.skipif(len(USABLE) < 2, reason="the host has one usable CPU")


# -- placement ---------------------------------------------------------------------------------
@pytest.mark.parametrize("usable", [[0, 1], [2, 3, 5], list(range(16)), [4]])
def test_plan_gives_client_and_engine_disjoint_cpus_where_there_are_two(usable):
    p = noise.plan_cpus(usable)
    assert p.usable == tuple(usable)
    if len(usable) < 2:
        assert not p.split and p.engine_cpuset is None
        return
    assert p.split and not set(p.client) & set(p.engine)
    assert set(p.client) | set(p.engine) == set(usable)
    assert len(p.engine) >= len(p.client) >= 1
    assert noise.parse_cpulist(p.engine_cpuset) == p.engine


def test_cpu_lists_read_back_as_written():
    for cpus in [(0,), (0, 1, 2, 5), (1, 3, 4, 5, 9), ()]:
        assert noise.parse_cpulist(noise.cpulist(cpus)) == cpus
    assert noise.cpulist([3, 0, 1, 2, 7]) == "0-3,7"
    assert noise.parse_cpulist("not a list") == ()


@needs_two_cpus
def test_pin_client_binds_every_thread_and_records_it():
    placement = noise.plan_cpus()
    started = threading.Event()
    stop = threading.Event()
    seen: dict[str, set[int]] = {}

    def before() -> None:  # a thread that existed before the pinning
        started.set()
        stop.wait(10)
        seen["before"] = os.sched_getaffinity(0)

    early = threading.Thread(target=before)
    early.start()
    started.wait(10)
    try:
        pinned = noise.pin_client(placement)
        later = threading.Thread(target=lambda: seen.update(later=os.sched_getaffinity(0)))
        later.start()
        later.join()
        stop.set()
        early.join()
        assert os.sched_getaffinity(0) == set(placement.client)
        assert seen == {"before": set(placement.client), "later": set(placement.client)}
        assert pinned.pinned == placement.client
        assert pinned.columns() == {"cpus_client": noise.cpulist(placement.client)}
    finally:
        stop.set()
        noise.unpin_client(placement)
    assert os.sched_getaffinity(0) == set(USABLE)


@needs_two_cpus
def test_a_server_engine_measured_in_the_tests_process_pins_it(tmp_path):
    """As a sweep's measuring process does (tunelab.measure.runner), for good: the next test must
    find the CPUs given back (conftest)."""
    from tunelab.measure import runner

    placement = runner.placement("mariadb")
    assert os.sched_getaffinity(0) == set(placement.client) != set(USABLE)


@needs_two_cpus
def test_the_next_test_and_what_it_starts_have_every_cpu_again():
    assert os.sched_getaffinity(0) == set(USABLE)
    show = "import os; print(sorted(os.sched_getaffinity(0)))"
    child = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, check=True)
    assert child.stdout.strip() == str(USABLE)


# -- interference around a timed section ----------------------------------------------------------
def _busy(seconds: float) -> dict:
    with noise.watch([]) as w:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    return w.columns()


def test_watch_sees_a_process_competing_for_the_same_cpu():
    cpu = USABLE[-1]
    burner = (
        f"import os, sys; os.sched_setaffinity(0, {{{cpu}}}); print('on', flush=True)\n"
        "while True: pass"
    )
    os.sched_setaffinity(0, {cpu})
    try:
        alone, shared = [], []
        for _ in range(3):  # alternated, so that the host's other load falls on both
            alone.append(_busy(0.3))
            proc = subprocess.Popen([sys.executable, "-c", burner], stdout=subprocess.PIPE)
            try:
                assert proc.stdout.readline().strip() == b"on"
                shared.append(_busy(0.3))
            finally:
                proc.kill()
                proc.wait()
    finally:
        os.sched_setaffinity(0, set(USABLE))
    # The competitor kept the busy loop waiting for its CPU, and was runnable at both ends.
    waits = [statistics.median(r["noise_client_wait_share"] for r in rs) for rs in (alone, shared)]
    assert waits[1] > max(waits[0], noise.WAIT_LIMIT)
    assert all(r["noise_interfered"] for r in shared)
    if not math.isnan(shared[0]["noise_other_runnable"]):
        assert min(r["noise_other_runnable"] for r in shared) >= 1
    assert all(r["noise_client_invol_cs"] > 0 for r in shared)
    assert all(math.isnan(r["noise_engine_invol_cs"]) for r in shared)  # no engine process


def test_watch_never_reads_inside_the_section(tmp_path):
    reads: list[float] = []
    real = noise.Watch.read

    def counted(self):
        reads.append(time.perf_counter())
        return real(self)

    noise.Watch.read = counted
    try:
        with noise.watch([]):
            t0 = time.perf_counter()
            time.sleep(0.01)
            t1 = time.perf_counter()
    finally:
        noise.Watch.read = real
    assert len(reads) == 2 and reads[0] < t0 and reads[1] > t1


def _status(state: str, invol: int) -> str:
    return f"Name:\tx\nState:\t{state} (x)\nnonvoluntary_ctxt_switches:\t{invol}\n"


def _stat(user: int, idle: int, steal: int, running: int) -> str:
    return (
        f"cpu  {user} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n"
        f"ctxt 1\nprocs_running {running}\nprocs_blocked 0\n"
    )


def test_watch_computes_the_columns_from_proc(tmp_path):
    engine = tmp_path / "4242" / "task"
    for tid in ("4242", "4243"):
        (engine / tid).mkdir(parents=True)
    (tmp_path / "pressure").mkdir()

    def write(stat, statuses, waits, runs, pressure: int) -> None:
        (tmp_path / "stat").write_text(stat)
        for tid, text, wait, run in zip(("4242", "4243"), statuses, waits, runs, strict=True):
            (engine / tid / "status").write_text(text)
            (engine / tid / "schedstat").write_text(f"{run} {wait} 4\n")
        (tmp_path / "pressure" / "cpu").write_text(f"some avg10=0 total={pressure}\n")

    before = [_status("S", 10), _status("R", 5)]
    write(_stat(100, 800, 0, 2), before, [0, 10**6], [123, 10**9], 1_000)
    placement = noise.Placement((0, 1), client=(1,), engine=(0,), pinned=(1,))
    with noise.watch([4242], placement, proc=tmp_path) as w:
        after = [_status("S", 17), _status("S", 9)]
        runs = [123 + 2 * 10**7, 10**9 + 5 * 10**6]
        write(_stat(400, 1500, 100, 4), after, [3 * 10**6, 2 * 10**6], runs, 51_000)
        time.sleep(0.05)
    cols = w.columns()
    section = w.after.at - w.before.at
    assert cols["noise_steal_share"] == pytest.approx(100 / (300 + 700 + 100))
    assert cols["noise_engine_invol_cs"] == (17 - 10) + (9 - 5)
    assert cols["noise_engine_wait_share"] == pytest.approx((3 + 1) * 1e-3 / section)
    assert cols["noise_engine_cpu_s"] == pytest.approx(0.020 + 0.005)
    assert math.isnan(cols["noise_client_wait_share"])  # no /proc/self in this /proc
    # procs_running less the engine's runnable tasks (1 before, 0 after): 1 before, 4 after
    assert cols["noise_other_runnable"] == 4
    assert cols["noise_cpu_pressure"] == pytest.approx(50_000 / 1e6 / section)
    assert cols["noise_interfered"] is True
    assert cols["noise_client_invol_cs"] >= 0


def test_watch_gives_nan_where_proc_lacks_the_counters(tmp_path):
    for proc in (tmp_path / "empty", tmp_path / "old"):
        proc.mkdir()
    (tmp_path / "old" / "stat").write_text("cpu  1 2 3 4\nprocs_running x\n")  # no steal field
    (tmp_path / "old" / "7" / "task" / "7").mkdir(parents=True)
    (tmp_path / "old" / "7" / "task" / "7" / "status").write_text("Name:\tx\n")
    for proc in (tmp_path / "empty", tmp_path / "old"):
        with noise.watch([7, 99999], proc=proc) as w:
            pass
        cols = w.columns()
        assert set(cols) == set(noise.NOISE_COLUMNS)
        counters = set(noise.NOISE_COLUMNS) - {"noise_interfered", "noise_client_invol_cs"}
        for name in counters - {"noise_cpu_probe_s", "noise_client_cpu_s"}:  # not from /proc
            assert math.isnan(cols[name]), name
        assert cols["noise_interfered"] is False
        assert cols["noise_client_invol_cs"] >= 0  # from getrusage, not /proc


def test_engine_processes_are_found_through_children_lists(tmp_path):
    tree = {10: {10: "11 12", 14: ""}, 11: {11: "13"}, 12: {12: ""}, 13: {13: ""}}
    for pid, tasks in tree.items():
        for tid, children in tasks.items():
            (tmp_path / str(pid) / "task" / str(tid)).mkdir(parents=True)
            (tmp_path / str(pid) / "task" / str(tid) / "children").write_text(children)
    (tmp_path / "10" / "cgroup").write_text("0::/system.slice/docker-abc123.scope\n")
    assert sorted(noise.descendants(10, proc=tmp_path)) == [10, 11, 12, 13]
    assert noise.in_cgroup_of(10, "abc123", proc=tmp_path)
    assert not noise.in_cgroup_of(10, "def456", proc=tmp_path)
    assert not noise.in_cgroup_of(11, "abc123", proc=tmp_path)  # no cgroup file


def test_an_embedded_engine_has_no_processes_of_its_own(tmp_path):
    from tunelab import engines

    eng = engines.create("sqlite", tmp_path / "engine", "t")
    assert eng.pids() == []
    assert eng.cpu_columns() == {"cpus_engine": "client", "client_route": "in process"}


# -- a container's CPUs ----------------------------------------------------------------------------
@pytest.mark.docker
@needs_two_cpus
def test_container_runs_on_the_engine_cpus_and_its_processes_are_found(image):
    from tunelab.host import containers
    from tunelab.run import recovery

    run_id = f"test-{uuid.uuid4().hex[:8]}"
    engine_cpus = noise.plan_cpus().engine_cpuset
    spec = containers.ContainerSpec(
        image=image,
        port=3306,
        command=["sh", "-c", "echo up; sleep 300"],
        ready_log="^up$",
        cpuset=engine_cpus,
    )
    try:
        rc = containers.start(spec, run_id, "p1", keep_key="k")
        assert rc.cpuset == engine_cpus
        pid = rc.host_pid()
        if pid is not None and noise.in_cgroup_of(pid, rc.id):
            assert os.sched_getaffinity(pid) == set(noise.parse_cpulist(engine_cpus))
            assert pid in noise.descendants(pid)
        # A later point placed otherwise moves the kept container to its engine CPUs.
        spec.cpuset = noise.cpulist(USABLE[-1:])
        assert containers.attach(spec, run_id, "k").cpuset == spec.cpuset
        rc.remove()
        # CPUs the Docker engine has not: the container starts, on any CPU.
        spec.cpuset = noise.cpulist([max(USABLE) + 64])
        rc = containers.start(spec, run_id, "p2")
        assert rc.cpuset == ""
        rc.remove()
    finally:
        recovery.clean(run_id)


@pytest.mark.parametrize("name", ["mariadb", "postgres", "db2"])
def test_a_server_engine_asks_for_the_engine_cpus_of_its_placement(name, tmp_path):
    from tunelab import engines

    eng = engines.create(name, tmp_path / "engine", "t")
    eng.image = "unused"  # the spec names it; nothing starts here
    assert eng.placed_spec().cpuset is None  # not placed: any CPU, as before
    eng.placement = noise.plan_cpus([0, 1, 2])
    assert eng.placed_spec().cpuset == noise.cpulist(eng.placement.engine)
    assert eng.pids() == []  # not started


# -- the report's Methods -----------------------------------------------------------------------
def _data(frame: pd.DataFrame) -> ReportData:
    return ReportData(
        results=frame,
        sweep={},
        results_csv="",
        sweep_file="",
        name="t",
        engine="sqlite",
        dims=[],
        groups=[],
    )


def _rows(n: int = 12) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "point_id": [f"p{i % 2}" for i in range(n)],
            "rep": [i // 2 for i in range(n)],
            "elapsed_s": np.linspace(1.0, 2.0, n),
            "engine": "sqlite",
        }
    )


def test_methods_say_how_noisy_the_host_was(tmp_path):
    rows = _rows()
    rng = np.random.default_rng(7)
    rows["noise_interfered"] = rng.random(len(rows)) < 0.3
    rows["noise_steal_share"] = rng.random(len(rows)) * 0.02
    rows["cpus_client"] = "1"
    rows["cpus_engine"] = "0"
    rows.to_csv(tmp_path / "rows.csv", index=False)  # read back as a report would
    protocol = methods.methods_text(_data(pd.read_csv(tmp_path / "rows.csv")))[1]
    hit = int(rows["noise_interfered"].sum())
    assert f"{hit} of {len(rows)} repetitions" in protocol
    median = float(rows["noise_steal_share"].median())
    assert (
        f"median {100 * median:.1f} %, at most {100 * rows['noise_steal_share'].max():.1f} %"
        in (protocol)
    )
    assert "The measuring process ran on CPU 1, the engine's processes on CPU 0." in protocol

    rows["cpus_engine"] = "client"
    protocol = methods.methods_text(_data(rows))[1]
    assert "The measuring process ran on CPU 1, the engine inside it." in protocol


def test_methods_say_nothing_of_noise_for_rows_without_its_columns():
    text = " ".join(methods.methods_text(_data(_rows())))
    assert "interference" not in text and "measuring process ran on" not in text


def test_a_server_engines_cpus_get_the_cpu_reference_too(tmp_path):
    usable = tuple(sorted(os.sched_getaffinity(0)))
    if len(usable) < 2:
        pytest.skip("one usable CPU: no CPUs of the engine's own")
    placement = noise.Placement(usable, client=usable[-1:], engine=usable[:1])
    with noise.watch([], placement, proc=tmp_path) as w:
        pass
    cols = w.columns()
    assert 0 < cols["noise_engine_cpu_probe_s"] < 1
    assert 0 < cols["noise_cpu_probe_s"] < 1
    assert tuple(sorted(os.sched_getaffinity(0))) == usable  # only the probe's thread moved
    with noise.watch([], noise.Placement(usable), proc=tmp_path) as w:  # not split
        pass
    assert math.isnan(w.columns()["noise_engine_cpu_probe_s"])


def test_the_client_cpu_time_of_the_section_is_its_own(tmp_path):
    with noise.watch([], proc=tmp_path) as busy:
        noise.cpu_reference()
        noise.cpu_reference()
    with noise.watch([], proc=tmp_path) as idle:
        time.sleep(0.05)
    worked, slept = busy.columns()["noise_client_cpu_s"], idle.columns()["noise_client_cpu_s"]
    assert worked > 0.001 and slept < 0.02  # the probes around the section are not counted


def test_the_engine_cpu_time_of_the_section_is_its_processes(tmp_path):
    """Real /proc: a busy engine process shows its CPU seconds, an idle one next to none."""
    import subprocess
    import sys

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        with noise.watch([busy.pid]) as on_busy:
            time.sleep(0.3)
        with noise.watch([idle.pid]) as on_idle:
            time.sleep(0.3)
    finally:
        busy.kill()
        idle.kill()
        busy.wait()
        idle.wait()
    assert on_busy.columns()["noise_engine_cpu_s"] > 0.05  # it had at least a share of a CPU
    assert on_idle.columns()["noise_engine_cpu_s"] < 0.01
