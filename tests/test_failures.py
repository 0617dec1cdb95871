"""Failures a user can cause or meet, through real `tunelab` processes: each ends with one
line saying what happened and what to do, exit code 2 for bad input and 1 for failures, the
traceback only where stderr is a log, and nothing valid lost."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tunelab.sweep import spec

TUNELAB = [sys.executable, "-m", "tunelab.cli"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # A private bench lock: these runs need not wait for (or hold up) other measurements.
    env = {**os.environ, "TUNELAB_LOCK_DIR": str(tmp_path / "lock"), **extra}
    env.pop("TUNELAB_DEBUG", None)
    # As a user's shell runs it: unbuffered, one big write to a closed pipe is cut short
    # without any error (Python's text layer ignores a partial write).
    env.pop("PYTHONUNBUFFERED", None)
    return env


def _tunelab(tmp_path: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TUNELAB, *args], capture_output=True, text=True, env=_env(tmp_path), timeout=300, **kw
    )


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def _only_point(path: Path) -> spec.Point:
    points, errors = spec.expand(path)
    assert not errors, errors
    return points[0]


# -- output cut short by a closed pipe ------------------------------------------------------
def _piped_into_head(tmp_path: Path, command: str) -> subprocess.CompletedProcess:
    """``command | head -1`` in bash without pipefail; the first command's status after."""
    script = f'{command} | head -1; echo "status=${{PIPESTATUS[0]}}" >&2'
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=_env(tmp_path), timeout=300
    )


def test_plan_into_head_ends_quietly(write_sweep, tmp_path):
    # 400 points: far more than a pipe holds, so the writer surely meets the closed pipe.
    sweep = write_sweep(
        """
        name: many
        dataset: {rows: 1000, seed: 1}
        knobs:
          page_size: [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
          buffer_pool: [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200, 1300,
                        1400, 1500, 1600, 1700, 1800, 1900, 2000, 2100, 2200, 2300, 2400, 2500]
        workloads: [{type: scan}]
        cache: both
        repetitions: 1
        """
    )
    cmd = " ".join([*TUNELAB, "plan", str(sweep)])
    done = _piped_into_head(tmp_path, cmd)
    assert done.stdout.startswith('{"access"') and done.stdout.count("\n") == 1
    assert done.stderr == "status=141\n"  # no traceback, no "Exception ignored"


def test_bpsim_csv_into_head_ends_quietly(tmp_path):
    trace = tmp_path / "t.npy"
    np.save(trace, np.arange(30_000, dtype=np.uint32))  # a curve of 30,000 rows
    cmd = " ".join([*TUNELAB, "bpsim", str(trace), "--csv"])
    done = _piped_into_head(tmp_path, cmd)
    assert done.stdout == "pool_pages,hits,misses,hit_ratio\n"
    assert done.stderr == "status=141\n"


# -- bad traces --------------------------------------------------------------------------
def _junk_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pages.npy", b"not an array")


def _truncated_npz(path: Path) -> None:
    np.savez_compressed(path, pages=np.arange(5000, dtype=np.uint32))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


BAD_TRACES = {
    "empty.npz": (lambda p: p.write_bytes(b""), "empty file (0 bytes)"),
    "empty.npy": (lambda p: p.write_bytes(b""), "empty file (0 bytes)"),
    "junk.npz": (lambda p: p.write_text("hello\n"), "not a zip archive"),
    "junk.npy": (lambda p: p.write_text("hello\n"), "not a NumPy array file"),
    "junkzip.npz": (_junk_zip, "pages in the archive is not a NumPy array"),
    "cut.npz": (_truncated_npz, "not a readable .npz trace"),
    "empty.txt": (lambda p: p.write_text(""), "trace has no references"),
    "comments.txt": (lambda p: p.write_text("# duration_s=1\n\n"), "trace has no references"),
    "none.npy": (lambda p: np.save(p, np.zeros(0, np.uint32)), "trace has no references"),
    "float.npy": (lambda p: np.save(p, np.array([1.5, 2.5])), "one-dimensional integer array"),
    "square.npy": (lambda p: np.save(p, np.zeros((3, 3), np.uint32)), "got uint32 with shape"),
    "text.npz": (lambda p: np.savez(p, pages=np.array(["a"])), "one-dimensional integer"),
    "flags.npz": (
        lambda p: np.savez(p, pages=np.arange(2, dtype=np.uint32), prefetch=np.array(["x", "y"])),
        "prefetch flags must be integers 0 or 1",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_TRACES))
def test_bad_trace_is_one_line_and_exit_2(tmp_path, name):
    make, what = BAD_TRACES[name]
    path = tmp_path / name
    make(path)
    done = _tunelab(tmp_path, "bpsim", str(path))
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"{path}: " in done.stderr and what in done.stderr


# -- the one line of an unexpected failure --------------------------------------------------
def test_unexpected_failure_traceback_in_log_one_line_last(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    done = _tunelab(tmp_path, "datagen", "accounts-v1-r10-s1", "--data-dir", str(not_a_dir))
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback")  # stderr is not a terminal: it is a log
    last = _last_line(done.stderr)
    assert last.startswith("tunelab datagen: ") and "Error: " in last
    assert last.endswith("(full traceback in the log)")


def test_unexpected_failure_on_a_terminal_is_one_line(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    main_fd, term_fd = pty.openpty()
    try:
        proc = subprocess.run(
            [*TUNELAB, "datagen", "accounts-v1-r10-s1", "--data-dir", str(not_a_dir)],
            stdout=subprocess.DEVNULL,
            stderr=term_fd,
            env=_env(tmp_path),
            timeout=120,
        )
        os.close(term_fd)
        term_fd = -1
        out = b""
        while True:
            try:
                chunk = os.read(main_fd, 4096)
            except OSError:  # the terminal's other end closed: all read
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(main_fd)
        if term_fd >= 0:
            os.close(term_fd)
    text = out.decode().replace("\r\n", "\n")
    assert proc.returncode == 1
    assert "Traceback" not in text
    assert text.count("\n") == 1 and text.startswith("tunelab datagen: ")
    assert "TUNELAB_DEBUG=1" in text


def test_docker_unreachable_is_one_line(write_sweep, tmp_path):
    sweep = write_sweep(
        """
        name: nodocker
        engines: [mariadb]
        dataset: {rows: 1000, seed: 2}
        knobs: {buffer_pool: [640]}
        workloads: [{type: scan}]
        cache: warm
        repetitions: 1
        """
    )
    point = _only_point(sweep).point_id
    socket_path = tmp_path / "no-docker.sock"
    for run_id in ([], ["--run-id", f"test-{uuid.uuid4().hex[:8]}"]):
        done = subprocess.run(
            [
                *TUNELAB,
                "run-point",
                str(sweep),
                point,
                "--engine",
                "mariadb",
                "--out",
                str(tmp_path / "r" / "p.csv"),
                "--workdir",
                str(tmp_path / "w"),
                "--data-dir",
                str(tmp_path / "d"),
                *run_id,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=_env(tmp_path, DOCKER_HOST=f"unix://{socket_path}"),
        )
        assert done.returncode == 1, done.stderr
        last = _last_line(done.stderr)
        assert "Docker engine not reachable" in last, done.stderr
        assert not last.startswith(("Traceback", " ")), last
        assert not (tmp_path / "r" / "p.csv").exists()


# -- a full disk ---------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 512 KiB tmpfs: too small for the point's database."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_is_one_line_and_keeps_what_was_there(write_sweep, tmp_path, small_disk):
    sweep = write_sweep(
        """
        name: full
        dataset: {rows: 20000, seed: 9}
        knobs: {buffer_pool: [100]}
        workloads: [{type: scan}]
        cache: warm
        repetitions: 2
        """
    )
    point = _only_point(sweep).point_id
    results = small_disk / "results"
    results.mkdir()
    earlier = results / "earlier-point.csv"  # a finished point: must survive
    earlier.write_text("point_id,rep,elapsed_s\nearlier,0,0.5\n")
    out = results / f"{point}.csv"
    done = _tunelab(
        tmp_path,
        "run-point",
        str(sweep),
        point,
        "--out",
        str(out),
        "--workdir",
        str(small_disk / "work"),
        "--data-dir",
        str(tmp_path / "data"),
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout
    last = _last_line(done.stderr)
    assert last.startswith("tunelab run-point: disk full"), done.stderr
    assert last.endswith("free space and run again; finished points are kept")
    assert earlier.read_text() == "point_id,rep,elapsed_s\nearlier,0,0.5\n"
    assert not out.exists()  # nothing was measured: no result file, not an empty one
    assert not [p.name for p in results.iterdir() if p.name.endswith(".tmp")]


def test_bpsim_out_on_a_full_disk_is_a_failure_not_bad_input(tmp_path, small_disk):
    trace = tmp_path / "t.npy"
    np.save(trace, np.arange(30_000, dtype=np.uint32))
    fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:  # leave no room at all
        while os.write(fd, b"x" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    curve = small_disk / "curve.csv"
    done = _tunelab(tmp_path, "bpsim", str(trace), "--out", str(curve))
    assert done.returncode == 1, done.stderr
    assert _last_line(done.stderr) == (
        f"tunelab bpsim: disk full writing {curve}: free space and run again; "
        "finished points are kept"
    )
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]  # no temp file left


# -- Ctrl-C during a MariaDB point ------------------------------------------------------------
@pytest.fixture
def mariadb_image():
    from tunelab import engines
    from tunelab.engines.images import ensure_image
    from tunelab.host import containers

    reason = containers.docker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    try:
        return ensure_image("mariadb", engines.info("mariadb").image, build=False)
    except containers.ContainerError as exc:
        pytest.skip(str(exc))


def _mariadb_sweep(write_sweep, cache: str) -> tuple[Path, str]:
    sweep = write_sweep(
        f"""
        name: interrupted
        engines: [mariadb]
        dataset: {{rows: 2000, seed: 4}}
        knobs: {{buffer_pool: [704]}}
        workloads: [{{type: scan}}]
        cache: {cache}
        repetitions: 3
        """
    )
    points, errors = spec.expand(sweep, "mariadb")
    assert not errors, errors
    return sweep, points[0].point_id


def _start_point(tmp_path: Path, sweep: Path, point: str, *extra: str) -> subprocess.Popen:
    from tunelab.store import dataset

    dataset.materialise(_only_point(sweep).dataset, tmp_path / "data")  # no wait for data
    return subprocess.Popen(
        [
            *TUNELAB,
            "run-point",
            str(sweep),
            point,
            "--engine",
            "mariadb",
            "--out",
            str(tmp_path / "results" / "p.csv"),
            "--workdir",
            str(tmp_path / "work"),
            "--data-dir",
            str(tmp_path / "data"),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
    )


def _interrupted(proc: subprocess.Popen) -> tuple[float, str]:
    """Send SIGINT; how long the point took to end, and its stderr."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return time.monotonic() - t0, err


@pytest.mark.docker
def test_sigint_while_the_server_starts(write_sweep, tmp_path, mariadb_image):
    from docker.errors import NotFound

    from tunelab.host import containers

    sweep, point = _mariadb_sweep(write_sweep, "warm")
    api = containers.client()
    before = {c.id for c in api.containers.list(all=True, filters={"label": "tunelab=1"})}
    proc = _start_point(tmp_path, sweep, point)
    mine = None
    deadline = time.monotonic() + 120
    while mine is None and proc.poll() is None and time.monotonic() < deadline:
        for c in api.containers.list(filters={"label": f"{containers.POINT_LABEL}={point}"}):
            if c.id not in before:  # running: its server is starting up
                mine = c
        time.sleep(0.02)
    if mine is None:
        proc.kill()
        pytest.fail(f"no container came up: {proc.communicate()[1]}")
    took, err = _interrupted(proc)
    assert proc.returncode == 130, err
    assert _last_line(err) == "interrupted"
    assert "Traceback" not in err
    assert took < 10
    with pytest.raises(NotFound):
        api.containers.get(mine.id)


@pytest.mark.docker
def test_sigint_while_a_kept_server_restarts(write_sweep, tmp_path, mariadb_image):
    """The kept server of a workflow run is stopped for a cold repetition: an interrupt
    then must not wait for it to answer (it used to, 15 s, and report "Connection refused")."""
    from tunelab.host import containers
    from tunelab.run import recovery

    sweep, point = _mariadb_sweep(write_sweep, "cold")
    run_id = f"test-{uuid.uuid4().hex[:8]}"
    api = containers.client()
    try:
        since = int(time.time()) - 1
        proc = _start_point(tmp_path, sweep, point, "--run-id", run_id)
        events = api.events(
            since=since,
            until=int(time.time()) + 120,
            decode=True,
            # docker stop signals the container as does a restart in place (SIGUSR1)
            filters={"event": "kill", "label": f"{containers.RUN_LABEL}={run_id}"},
        )
        for _ in events:  # the first stop of the server: the cold restart has begun
            break
        events.close()
        assert proc.poll() is None, proc.communicate()[1]
        took, err = _interrupted(proc)
        assert proc.returncode == 130, err
        assert _last_line(err) == "interrupted"
        assert took < 10, err
    finally:
        recovery.clean(run_id)
