"""The run's job server (tunelab.jobserver): a workflow job's `tunelab` command runs in a
child forked by the server, with the job's streams, directory, environment and exit code;
signals reach the child; a job that dies takes its child with it; no server means the
command runs as before."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tunelab.host import jobs, ownership
from tunelab.jobserver import client, control
from tunelab.run import pipeline
from tunelab.sweep import spec

TUNELAB = shutil.which("tunelab", path=str(Path(sys.executable).parent))
SWEEP = """
name: served
dataset: {rows: %d, seed: 3}
knobs: {buffer_pool: [100]}
workloads: [{type: scan}]
cache: warm
repetitions: %d
"""


@pytest.fixture
def server(tmp_path):
    """A job server owned by this test process, and the environment that names it."""
    sock = tmp_path / "run" / control.SOCKET_NAME
    sock.parent.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunelab.jobserver", str(sock), "--owner", str(os.getpid())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not sock.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the job server did not start listening"
        time.sleep(0.05)
    env = {
        **os.environ,
        jobs.JOB_SERVER_ENV: str(sock),
        "TUNELAB_LOCK_DIR": str(tmp_path / "lock"),
        "TUNELAB_JOB_LOG": str(tmp_path / "jobs.jsonl"),
    }
    yield proc, env
    proc.terminate()
    proc.wait(timeout=30)


def _point(write_sweep, reps: int, rows: int = 20000) -> tuple[Path, str]:
    sweep = write_sweep(SWEEP % (rows, reps))
    points, errors = spec.expand(sweep)
    assert not errors
    return sweep, points[0].point_id


def _run_point(tmp_path: Path, sweep: Path, point: str, env: dict, **kw) -> subprocess.Popen:
    out = tmp_path / "results" / f"{point}.csv"
    args = [
        TUNELAB,
        "run-point",
        str(sweep),
        point,
        "--out",
        str(out),
        "--workdir",
        str(tmp_path / "work"),
        "--data-dir",
        str(tmp_path / "data"),
    ]
    return subprocess.Popen(args, env=env, cwd=tmp_path, text=True, **kw)


def _spans(tmp_path: Path) -> list[dict]:
    log = tmp_path / "jobs.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_a_served_job_runs_in_a_child_of_the_server(write_sweep, tmp_path, server):
    proc, env = server
    sweep, point = _point(write_sweep, 2)
    job = _run_point(tmp_path, sweep, point, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert (tmp_path / "results" / f"{point}.csv").exists()
    assert (tmp_path / "results" / f"{point}.check.json").exists()
    spans = _spans(tmp_path)
    assert [s["job"].split()[0] for s in spans] == ["run-point"]
    # the measurement held the lock in another process than the job's: the server's child
    assert spans[0]["pid"] not in (job.pid, proc.pid)
    assert proc.poll() is None  # the server serves on


def test_exit_code_and_stderr_come_back_to_the_job(write_sweep, tmp_path, server):
    _, env = server
    sweep, _ = _point(write_sweep, 1)
    job = _run_point(tmp_path, sweep, "no-such-point", env, stderr=subprocess.PIPE)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 2
    assert f"{sweep}: no point with id 'no-such-point'" in err
    assert _spans(tmp_path) == []  # bad input: nothing took the bench lock


def test_sigterm_to_the_job_stops_its_child(write_sweep, tmp_path, server):
    proc, env = server
    sweep, point = _point(write_sweep, 100, 200_000)  # long enough to be stopped meanwhile
    job = _run_point(tmp_path, sweep, point, env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (tmp_path / "work" / "points" / point).exists():
        assert job.poll() is None, job.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    children = _children(proc.pid)
    assert len(children) == 1
    job.send_signal(signal.SIGTERM)
    job.wait(timeout=60)
    assert job.returncode == 128 + signal.SIGTERM
    deadline = time.monotonic() + 30
    while _children(proc.pid):
        assert time.monotonic() < deadline, "the child runs on after its job was stopped"
        time.sleep(0.1)
    assert not (tmp_path / "results" / f"{point}.check.json").exists()


def _ignores(pid: int, signum: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    raise AssertionError(f"no SigIgn line for pid {pid}")


@pytest.mark.parametrize("ignored", [False, True])
def test_a_child_ignores_sigint_as_its_job_was_started(write_sweep, tmp_path, server, ignored):
    """A job started with SIGINT ignored (a script's background job, cron) runs a child that
    ignores it too, as the command would in its own process; otherwise SIGINT stops it."""
    proc, env = server
    sweep, point = _point(write_sweep, 100, 200_000)  # long enough to be signalled meanwhile

    def start_ignoring() -> None:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    job = _run_point(tmp_path, sweep, point, env, stderr=subprocess.PIPE, preexec_fn=start_ignoring)
    deadline = time.monotonic() + 60
    while not (tmp_path / "work" / "points" / point).exists():
        assert job.poll() is None, job.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    [child] = _children(proc.pid)
    assert _ignores(child, signal.SIGINT) is ignored
    job.send_signal(signal.SIGINT)
    if ignored:
        time.sleep(1)
        assert job.poll() is None  # it measures on
        job.send_signal(signal.SIGTERM)
    job.wait(timeout=60)
    expected = 128 + signal.SIGTERM if ignored else 130
    assert job.returncode == expected, job.stderr.read()


@pytest.mark.parametrize("pause", [0.0, 0.3])
def test_a_killed_job_takes_its_child_along(write_sweep, tmp_path, server, pause):
    """Killed right after the fork (before the child has its own signal handlers) or once
    it runs the point."""
    proc, env = server
    sweep, point = _point(write_sweep, 100, 200_000)
    job = _run_point(tmp_path, sweep, point, env)
    deadline = time.monotonic() + 60
    while not _children(proc.pid):
        assert job.poll() is None
        assert time.monotonic() < deadline
    time.sleep(pause)
    job.kill()
    job.wait(timeout=30)
    deadline = time.monotonic() + 60
    while _children(proc.pid):
        assert time.monotonic() < deadline, "the child of a killed job runs on"
        time.sleep(0.1)
    assert not (tmp_path / "results" / f"{point}.check.json").exists()


def test_without_a_server_the_command_runs_itself(write_sweep, tmp_path):
    sweep, point = _point(write_sweep, 1)
    env = {
        **os.environ,
        jobs.JOB_SERVER_ENV: str(tmp_path / "gone.sock"),
        "TUNELAB_LOCK_DIR": str(tmp_path / "lock"),
        "TUNELAB_JOB_LOG": str(tmp_path / "jobs.jsonl"),
    }
    job = _run_point(tmp_path, sweep, point, env, stderr=subprocess.PIPE)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    assert [s["pid"] for s in _spans(tmp_path)] == [job.pid]


def test_the_server_ends_with_its_owner(tmp_path):
    owner = subprocess.Popen(["sleep", "60"])
    sock = tmp_path / control.SOCKET_NAME
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunelab.jobserver", str(sock), "--owner", str(owner.pid)]
    )
    deadline = time.monotonic() + 60
    while not sock.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    owner.kill()
    owner.wait()
    assert proc.wait(timeout=30) == 0
    assert not sock.exists()


def test_sigterm_ends_an_idle_server(tmp_path):
    """The server waits with no timeout: the signal itself must wake it (a run's end waits
    for it)."""
    sock = tmp_path / control.SOCKET_NAME
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunelab.jobserver", str(sock), "--owner", str(os.getpid())]
    )
    deadline = time.monotonic() + 60
    while not sock.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert not sock.exists()


def _standby(tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tunelab.jobserver", "--standby", "--owner", str(os.getpid())],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "TUNELAB_LOCK_DIR": str(tmp_path / "lock")},
    )


def _a_point_is_served(tmp_path: Path, write_sweep, proc: subprocess.Popen, sock: Path) -> None:
    """Once the server listens on ``sock``, a point's job runs in a child it forks."""
    deadline = time.monotonic() + 60
    while not sock.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the server did not start listening"
        time.sleep(0.05)
    env = {
        **os.environ,
        jobs.JOB_SERVER_ENV: str(sock),
        "TUNELAB_LOCK_DIR": str(tmp_path / "lock"),
        "TUNELAB_JOB_LOG": str(tmp_path / "jobs.jsonl"),
    }
    sweep, point = _point(write_sweep, reps=1, rows=2000)
    job = _run_point(tmp_path, sweep, point, env, stderr=subprocess.PIPE)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    served = [s for s in _spans(tmp_path) if s["job"].startswith("run-point")]
    assert len(served) == 1 and served[0]["pid"] != job.pid  # measured by a forked child


def test_a_standby_server_given_no_run_ends_having_bound_nothing(tmp_path):
    """Prestarted at parse time, in a dry run or a lint: its input closes with no run."""
    proc = _standby(tmp_path)
    _, err = proc.communicate(b"", timeout=60)
    assert proc.returncode == 0, err
    assert not list(tmp_path.rglob("*.sock"))


def test_a_standby_server_serves_the_run_it_is_given(tmp_path, write_sweep):
    proc = _standby(tmp_path)
    sock, log = tmp_path / "run" / control.SOCKET_NAME, tmp_path / "run" / "jobserver.log"
    sock.parent.mkdir()
    proc.stdin.write(f"{json.dumps(str(sock))}\n{json.dumps(str(log))}\n".encode())
    proc.stdin.close()
    _a_point_is_served(tmp_path, write_sweep, proc, sock)
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert log.exists() and not sock.exists()


@pytest.mark.parametrize("elsewhere", [False, True], ids=["checkout", "directory-option"])
def test_a_server_lab_started_is_adopted_by_the_workflow(
    tmp_path, write_sweep, monkeypatch, elsewhere
):
    """`./lab run` starts the standby server before its checks and names it in STANDBY_ENV
    (its pid, and the inherited descriptor of its input); the workflow's ``prestart`` takes
    it over, ``start`` gives it the run (two lines: `lab` still holds the pipe open), a job
    runs in it, ``stop`` ends it. With ``--directory`` the workflow runs elsewhere than the
    checkout the server started in, its work directory given relative to its own."""
    read_end, write_end = os.pipe()
    lab_copy = os.dup(write_end)  # what `lab` keeps open for the whole run
    proc = subprocess.Popen(
        [sys.executable, "-m", "tunelab.jobserver", "--standby", "--owner", str(os.getpid())],
        stdin=read_end,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "TUNELAB_LOCK_DIR": str(tmp_path / "lock")},
    )
    os.close(read_end)
    monkeypatch.setenv(jobs.STANDBY_ENV, f"{proc.pid}:{write_end}")
    monkeypatch.setattr(control, "_server", None)
    monkeypatch.delenv(jobs.JOB_SERVER_ENV, raising=False)
    try:
        control.prestart()
        assert isinstance(control._server, control._Adopted)
        assert jobs.STANDBY_ENV not in os.environ  # the run's jobs do not see it
        assert not os.get_inheritable(write_end)
        if elsewhere:
            (tmp_path / "elsewhere").mkdir()
            monkeypatch.chdir(tmp_path / "elsewhere")
        control.start("adopted", "work" if elsewhere else str(tmp_path / "work"))
        sock = Path(os.environ[jobs.JOB_SERVER_ENV])
        _a_point_is_served(tmp_path, write_sweep, proc, sock)
        control.stop()
        assert proc.wait(timeout=30) == 0
        assert not sock.exists()
    finally:
        os.close(lab_copy)
        proc.kill()
        proc.wait()


def test_a_socket_path_too_long_means_no_server(tmp_path):
    deep = tmp_path / ("d" * 120)
    assert control.socket_path(deep) is None
    assert control.socket_path(tmp_path) == tmp_path.resolve() / control.SOCKET_NAME


TEMPLATE = """# %% tags=["parameters"]
x = 1

# %%
import os

from ipykernel.connect import get_connection_info

info = get_connection_info(unpack=True)
print(os.getppid(), x, info["transport"], os.path.dirname(info["ip"]))
"""


def _kernel_parent(tmp_path: Path) -> list[str]:
    """The kernel's parent and parameter; that it listened on Unix sockets (no TCP port to
    race for), and that their folder is gone once the report is done."""
    from tunelab.report import render

    template = tmp_path / "template.py"
    template.write_text(TEMPLATE)
    nb = render.execute(template, {"x": 2})
    parent, x, transport, folder = nb.cells[-1].outputs[0]["text"].split()
    assert transport == "ipc" and not Path(folder).exists()
    return [parent, x]


def test_a_killed_reports_socket_folder_is_removed_by_the_next_report(tmp_path, monkeypatch):
    from tunelab.report import render

    short = Path(tempfile.mkdtemp(prefix="tl", dir="/tmp"))  # a temp dir the kernel uses
    monkeypatch.setenv("TMPDIR", str(short))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    gone = subprocess.Popen(["true"])
    gone.wait()
    orphan = short / f"{render.KERNEL_FOLDER}{gone.pid}-x"
    live = short / f"{render.KERNEL_FOLDER}{os.getpid()}-y"
    try:
        for folder in (orphan, live):
            folder.mkdir()
            (folder / "k-1").touch()
        monkeypatch.delenv(jobs.JOB_SERVER_ENV, raising=False)
        assert _kernel_parent(tmp_path) == [str(os.getpid()), "2"]
        assert not orphan.exists() and live.exists()
    finally:
        shutil.rmtree(short)


def test_a_report_kernel_is_forked_warm_by_the_server(tmp_path, server, monkeypatch):
    proc, env = server
    monkeypatch.setenv(jobs.JOB_SERVER_ENV, env[jobs.JOB_SERVER_ENV])
    assert _kernel_parent(tmp_path) == [str(proc.pid), "2"]
    assert proc.poll() is None


def test_without_a_server_the_kernel_is_ipykernels_own(tmp_path, monkeypatch):
    monkeypatch.delenv(jobs.JOB_SERVER_ENV, raising=False)
    assert _kernel_parent(tmp_path) == [str(os.getpid()), "2"]


def test_a_job_holds_none_of_the_servers_descriptors(write_sweep, tmp_path, server):
    """A forked job keeps the job's streams and nothing of the server's: not its socket, nor
    its selector, nor another job's connection (which would keep that job waiting, should
    the server die, until this one ended)."""
    proc, env = server
    sweep, point = _point(write_sweep, 100, 200_000)
    first = _run_point(tmp_path, sweep, point, env)
    deadline = time.monotonic() + 60
    while len(_children(proc.pid)) < 1:
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    args = [
        TUNELAB,
        "run-point",
        str(sweep),
        point,
        "--out",
        str(tmp_path / "second.csv"),
        "--workdir",
        str(tmp_path / "work2"),
        "--data-dir",
        str(tmp_path / "data"),
    ]
    second = subprocess.Popen(args, env=env, cwd=tmp_path)  # waits for the bench lock
    try:
        while len(_children(proc.pid)) < 2:
            assert second.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        child = max(_children(proc.pid))  # the later fork
        fd_dir = Path(f"/proc/{child}/fd")
        # Right after the fork the child still has the server's descriptors until it closes
        # them; the job then waits for the bench lock, far longer than this.
        settle = time.monotonic() + 5
        while True:
            links = {int(fd.name): os.readlink(fd) for fd in fd_dir.iterdir()}
            inherited = [
                t for fd, t in links.items() if fd > 2 and t.startswith(("socket:", "anon"))
            ]
            if not inherited or time.monotonic() > settle:
                break
            time.sleep(0.05)
        assert second.poll() is None  # still waiting: the descriptors seen are the job's own
        assert inherited == [], links
    finally:
        for job in (first, second):
            job.send_signal(signal.SIGTERM)
        for job in (first, second):
            job.wait(timeout=60)


def test_the_runs_clean_up_at_its_end_runs_in_its_job_server(tmp_path, server, monkeypatch):
    """At the workflow's end (no job runs) the run's clean-up is one more served command,
    not a new interpreter."""
    from tunelab.host import containers

    try:
        containers.client()
    except containers.ContainerError as exc:
        pytest.skip(f"the clean-up asks Docker for the run's containers: {exc}")
    _proc, env = server
    for name in (jobs.JOB_SERVER_ENV, "TUNELAB_LOCK_DIR", "TUNELAB_JOB_LOG"):
        monkeypatch.setenv(name, env[name])
    left = ownership.make_dir(tmp_path / "work" / "runs" / "r1" / "sqlite-tables")

    def no_new_process(*args, **kwargs):
        raise AssertionError(f"a new process was started: {args}")

    monkeypatch.setattr(pipeline.subprocess, "run", no_new_process)
    pipeline.clean_run("r1", str(tmp_path / "work"), submit=client.submit)
    assert not left.parent.exists()
    assert [s["job"] for s in _spans(tmp_path)] == ["clean"]


def test_the_workflows_end_cancels_snakemakes_pending_timers():
    """Snakemake's job rate limiter leaves a one-second timer thread behind; the interpreter
    would wait for it before it exits."""
    import threading

    fired: list[int] = []
    timer = threading.Timer(60, fired.append, [1])
    timer.start()
    pipeline.release_timers()
    timer.join(timeout=5)
    assert not timer.is_alive() and not fired
