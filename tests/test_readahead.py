"""os_read_ahead: the kernel's read-ahead of an engine's data files, on a device of the lab's own.

The knob must change the engine's reads: a cold scan with read-ahead off reaches the device as
many small requests, with it on as few large ones (the loop device's own counters,
/sys/block/<loop>/stat), on every engine that runs here. It must change nothing else: every
block device's read_ahead_kb on the host is the same before and after, also after a killed
point and ``tunelab recover``. A host that cannot give a point a device is refused at
validation, in one line naming the engine and the reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tunelab.engines.base import IndexPlan
from tunelab.engines.readahead import NAME
from tunelab.host import blockdev, containers, ownership
from tunelab.run import recovery
from tunelab.store import dataset
from tunelab.sweep import spec

REPO = Path(__file__).resolve().parents[1]
PREFETCH = REPO / "workflows" / "sweeps" / "scan-vs-prefetch.yaml"
ROWS = 100_000
SEED = 3
OFF, ON = 0, 1024

no_device = blockdev.unavailable_reason()
needs_device = pytest.mark.skipif(no_device is not None, reason=f"no device here: {no_device}")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNELAB_")}
    return {**env, "PYTHONPATH": str(REPO / "src")}  # the child owns its run


def _without_sys_admin(*argv: str) -> subprocess.CompletedProcess:
    """``tunelab argv`` in a process that lacks CAP_SYS_ADMIN (a container without
    privileges): root or not, it can attach no loop device and mount nothing."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs setpriv (util-linux) and root to drop a capability")
    cmd = [
        "setpriv",
        "--inh-caps=-sys_admin",
        "--bounding-set=-sys_admin",
        sys.executable,
        "-m",
        "tunelab.cli",
        *argv,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=REPO, timeout=120)


# -- a host that forbids it -------------------------------------------------------------------
def test_a_host_without_loop_devices_refuses_the_knob_in_one_line():
    done = _without_sys_admin("validate", str(PREFETCH))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{PREFETCH}: knobs.os_read_ahead: sqlite cannot set")
    assert "CAP_SYS_ADMIN" in lines[0] and "(allowed: " in lines[0]


def test_the_pack_on_such_a_host_skips_the_sweep_saying_why():
    done = _without_sys_admin(
        "validate", "--skip-other-engines", "--engine", "postgres", str(PREFETCH)
    )
    assert done.returncode == 0, done.stderr
    assert "skipped (postgres cannot set the kernel's read-ahead on this host" in done.stdout


def test_every_engine_that_runs_the_prefetch_sweep_sets_little_and_much_prefetch():
    for engine in ("sqlite", "mariadb", "postgres", "db2"):
        points, errors = spec.expand(PREFETCH, engine)
        if engine == "db2" or no_device is None:
            assert not errors, errors
        swept = {p.knobs.get(NAME) for p in points}
        if engine != "db2" and points:
            assert swept == {0, 16, 128, 1024}, engine
        if engine == "mariadb" and points:
            assert {p.knobs["direct_io"] for p in points} == {False}  # O_DIRECT skips it


# -- the knob changes the engine's reads --------------------------------------------------------
def _cold_scan(eng) -> dict[str, float]:
    state = eng.make_cold()
    assert state.achieved == "cold", state
    conn = eng.connect()
    try:
        before = eng.counters([conn])
        cur = conn.cursor()
        cur.execute("SELECT * FROM accounts")
        eng.dialect.fetch(cur)
        conn.commit()
        after = eng.counters([conn])
    finally:
        conn.close()
    return {k: after[k] - before.get(k, 0.0) for k in after}


def _requests_off_and_on(eng, knobs: dict, data_dir: Path) -> dict[int, dict[str, float]]:
    source = dataset.Source(dataset.Dataset(ROWS, SEED), data_dir)
    eng.provision({**knobs, NAME: OFF})
    eng.create_table("accounts", IndexPlan("none", ()))
    eng.bulk_load("accounts", source)
    eng.create_index("accounts", IndexPlan("none", ()))
    out = {}
    for kb in (OFF, ON, OFF):  # back to off: the setting changes in place, both ways
        eng.provision({**knobs, NAME: kb})
        applied = eng.applied_knobs()
        assert applied[NAME] == kb
        assert applied["os_read_ahead_device"].startswith("a loop device over a file")
        assert "direct I/O on" in applied["os_read_ahead_device"]
        assert eng.disk.device.read_ahead() == kb
        out[kb] = _cold_scan(eng)
    return out


def _check_effect(found: dict[int, dict[str, float]], page_kib: int) -> None:
    off, on = found[OFF], found[ON]
    for c in (off, on):
        assert c["dev_read_bytes"] > ROWS * 50  # the table came from the device
    # Off: about a request per page the engine asked for; on: requests of many pages.
    assert off["dev_read_requests"] > 5 * on["dev_read_requests"], (off, on)
    assert off["dev_read_bytes"] / off["dev_read_requests"] <= 4 * page_kib * 1024
    assert on["dev_read_bytes"] / on["dev_read_requests"] >= 64 * 1024


@pytest.fixture
def host_read_ahead():
    """Every block device's read_ahead_kb before the test; after it, each device that
    existed before must have it unchanged (the lab's loop devices given theirs back too)."""
    before = blockdev.all_read_ahead()
    yield before
    after = blockdev.all_read_ahead()
    assert {d: after.get(d) for d in before} == before


def _no_device_under(path: Path) -> None:
    assert blockdev.loops_backed_under(path) == []
    assert not list(blockdev.records_under(path))
    assert str(path.resolve()) not in Path("/proc/self/mountinfo").read_text()


@needs_device
def test_sqlite_scan_without_read_ahead_sends_many_more_smaller_requests(tmp_path, host_read_ahead):
    from tunelab.engines.sqlite import SQLiteEngine

    eng = SQLiteEngine(tmp_path / "w" / "engine", "t")
    try:
        found = _requests_off_and_on(eng, {"page_size": 4096, "buffer_pool": 2000}, tmp_path / "d")
        assert eng.path.parent == eng.disk.mountpoint and os.path.ismount(eng.path.parent)
    finally:
        eng.teardown()
    _check_effect(found, 4)
    _no_device_under(tmp_path / "w")


def _server(engine_cls, base: Path):
    reason = containers.docker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from tunelab.engines.images import ensure_image

    try:
        image = ensure_image(engine_cls.info.name, engine_cls.info.image)
    except containers.ContainerError as exc:
        pytest.skip(f"no {engine_cls.info.name} image: {exc}")
    eng = engine_cls(base / "points" / "pt" / "engine", f"test-{uuid.uuid4().hex[:8]}")
    eng.image = image
    return eng


@needs_device
@pytest.mark.docker
def test_postgres_scan_without_read_ahead_sends_many_more_smaller_requests(
    tmp_path, host_read_ahead
):
    from tunelab.engines.postgres import PostgresEngine

    eng = _server(PostgresEngine, tmp_path)
    try:
        found = _requests_off_and_on(eng, {"buffer_pool": 2048}, tmp_path / "d")
    finally:
        eng.teardown()
    _check_effect(found, 8)
    _no_device_under(tmp_path)


@needs_device
@pytest.mark.docker
def test_mariadb_scan_without_read_ahead_sends_many_more_smaller_requests(
    tmp_path, host_read_ahead
):
    from tunelab.engines.mariadb import MariaDBEngine

    eng = _server(MariaDBEngine, tmp_path)
    knobs = {"buffer_pool": 8 * 64, "direct_io": False, "read_ahead_threshold": 0}
    try:
        found = _requests_off_and_on(eng, knobs, tmp_path / "d")
    finally:
        eng.teardown()
    _check_effect(found, 16)
    _no_device_under(tmp_path)


# -- a killed point ---------------------------------------------------------------------------
def _wait_for_device(under: Path, proc: subprocess.Popen, timeout_s: float = 300) -> str:
    """The loop device a running point attached below ``under``, once its read-ahead is set."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        for loop in blockdev.loops_backed_under(under):
            if blockdev.mounts_of(loop) and blockdev.read_ahead_kb(loop) == OFF:
                return loop
        time.sleep(0.05)
    raise AssertionError(f"no device appeared below {under}")


@needs_device
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_killed_point_leaves_its_device_to_recover_which_restores_everything(
    engine, tmp_path, write_sweep, host_read_ahead
):
    if engine != "sqlite" and (why := containers.docker_unavailable_reason()):
        pytest.skip(why)
    sweep = write_sweep(f"""
        name: killed
        engines: [{engine}]
        dataset: {{rows: 20000, seed: 4}}
        knobs: {{os_read_ahead: [{OFF}]}}
        workloads: [{{type: scan}}]
        cache: cold
        repetitions: 100
        """)
    points, errors = spec.expand(sweep, engine)
    assert not errors, errors
    work, checkout = tmp_path / "work", tmp_path / "checkout"
    checkout.mkdir()
    run = ["--run-id", f"killed{uuid.uuid4().hex[:6]}"] if engine != "sqlite" else []
    cmd = [
        sys.executable,
        "-m",
        "tunelab.cli",
        "run-point",
        str(sweep),
        points[0].point_id,
        "--out",
        str(tmp_path / "out.csv"),
        "--workdir",
        str(work),
        "--data-dir",
        str(tmp_path / "data"),
        "--engine",
        engine,
        *run,
    ]
    proc = subprocess.Popen(
        cmd, env=_env(), cwd=tmp_path, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        loop = _wait_for_device(work, proc)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # Killed: nothing of the point removed its device.
        assert blockdev.loops_backed_under(work) == [loop]
        assert blockdev.mounts_of(loop)
        said: list[str] = []
        recovery.recover(work, checkout, say=said.append)
        assert any(f"/dev/{loop}" in s for s in said), said
        _no_device_under(work)
        assert not list(work.rglob(blockdev.BACKING))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if run:
            recovery.clean(run[1])  # the test failed: leave no container either
        for loop in blockdev.loops_backed_under(work):  # nor a device
            subprocess.run(["umount", "-l", *map(str, blockdev.mounts_of(loop))], check=False)
            subprocess.run(["losetup", "-d", f"/dev/{loop}"], check=False)


@needs_device
def test_a_device_left_by_a_reboot_is_only_files_and_recover_deletes_them(tmp_path):
    """After a reboot nothing is attached: the record names a loop device that is free, or
    another program's; recover deletes the lab's files and detaches nothing."""
    root = tmp_path / "work" / "points" / "p" / "engine" / "sqlite-device"
    ownership.make_dir(root.parents[1])  # the point's folder, as runner.provisioned makes it
    dev = blockdev.create(root, tmp_path / "work" / "points" / "p" / "engine" / "sqlite", 64 << 20)
    blockdev._detach(dev.loop, str(dev.backing), dev.read_ahead_before_kb)  # as a reboot does
    assert blockdev.backing_file(dev.loop) is None
    # Another program's file, likely on the very loop device the record names.
    other = blockdev.create(tmp_path / "other", tmp_path / "other-mnt", 64 << 20)
    try:
        said: list[str] = []
        recovery.recover(tmp_path / "work", tmp_path, say=said.append)
        assert not root.exists()
        assert blockdev.backing_file(other.loop) == str(other.backing)  # not the lab's run's
    finally:
        blockdev.release(other.root)


def test_rows_derive_request_size_and_rate_from_the_devices_counters():
    from tunelab.measure import columns

    c = {
        "logical_reads": 100.0,
        "physical_reads": 100.0,
        "dev_read_requests": 25.0,
        "dev_read_bytes": 25 * 65536.0,
        "dev_read_ms": 3.0,
    }
    out = columns.derived(c, 0.5, 4096)
    assert out["dev_read_request_kib"] == 64
    assert out["dev_read_mb_s"] == 25 * 65536 / 0.5 / 1e6
    assert "dev_read_mb_s" not in columns.derived({"physical_reads": 1.0}, 0.5, 4096)
