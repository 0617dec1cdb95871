"""The workflow's control of its run's job server, called from the Snakefile alone (nothing
else in the package names the server): ``prestart`` starts its imports at parse time, or
adopts the one `./lab run` started (``tunelab.host.jobs.STANDBY_ENV``); ``start`` gives it the
run and names its socket to the jobs (``tunelab.host.jobs.JOB_SERVER_ENV``); ``release`` ends one
given no run; ``stop`` ends it at the workflow's end. ``on_start`` and ``on_end`` are the
Snakefile's hooks.
"""

from __future__ import annotations

import _signal
import os
import sys

from tunelab.host import jobs

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

    from tunelab.run.workflow import Run

SOCKET_NAME = "jobs.sock"
_SUN_PATH_MAX = 107  # sockaddr_un holds 108 bytes with the final NUL

_server: subprocess.Popen | _Adopted | None = None


def socket_path(run_dir: Path) -> Path | None:
    """Where the run's server listens; None when the path is too long for a Unix socket."""
    from pathlib import Path

    path = Path(run_dir).resolve() / SOCKET_NAME
    return path if len(os.fsencode(path)) <= _SUN_PATH_MAX else None


class _Adopted:
    """A standby server this process did not start (``STANDBY_ENV``), held as a Popen is:
    its standard input, and its end awaited through a pidfd (it is not our child)."""

    def __init__(self, pid: int, fd: int) -> None:
        os.set_inheritable(fd, False)  # the run's jobs never hold it
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.stdin = open(fd, "wb", buffering=0)  # noqa: SIM115 (held until start)

    def terminate(self) -> None:
        os.kill(self.pid, _signal.SIGTERM)

    def kill(self) -> None:
        os.kill(self.pid, _signal.SIGKILL)

    def wait(self, timeout: float) -> None:
        import select
        import subprocess

        try:
            if not select.select([self.pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
        finally:
            os.close(self.pidfd)
            self.pidfd = -1


def _adopt() -> _Adopted | None:
    """The standby server named by ``STANDBY_ENV`` (taken out of the environment), if it
    is there and running."""
    pid, _, fd = os.environ.pop(jobs.STANDBY_ENV, "").partition(":")
    try:
        return _Adopted(int(pid), int(fd))
    except (ValueError, OSError):
        return None


def prestart() -> None:
    """Start the server's imports now, before the run is known (as the workflow sets up its
    run, main process of a local run): they take a second, which the plan, Snakemake's
    parse and DAG then hide; or take the server `./lab run` started before its checks, its
    imports under way already. ``start`` gives it the run; a process that ends without
    ``start`` (a dry run, a lint) closes its standard input, and the server ends having
    bound nothing."""
    global _server
    import subprocess

    if _server is not None:
        return
    _server = _adopt()
    if _server is not None:
        return
    cmd = [sys.executable, "-m", jobs.SERVER_MODULE, "--standby", "--owner", str(os.getpid())]
    # Its own process group: the terminal's Ctrl-C reaches the jobs, which pass it on, never
    # twice. Still in the run's session: what kills the session kills it too.
    _server = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        process_group=0,
    )


def start(run_id: str, workdir: str) -> None:
    """Give the run to its server (the Snakefile's ``onstart``, main process of a local run),
    started by ``prestart`` or now, and name its socket to the jobs. Without one, jobs run as
    their own processes."""
    global _server
    import json
    from pathlib import Path

    # Absolute: the server's directory is the one `./lab` started it in, the checkout, not
    # the workflow's (``--directory``), and a relative log path there does not exist.
    run_dir = Path(workdir).resolve() / "runs" / run_id
    path = socket_path(run_dir)
    if path is None:
        release()
        return
    from tunelab.host import ownership

    # Made (stamped as the lab's) and claimed as the points claim it: `tunelab recover` then
    # knows whose run this is.
    ownership.claim(run_dir, ownership.Owner.current(Path(workdir).resolve()))
    log = run_dir / "jobserver.log"
    prestart()  # unless the run's setup did
    try:
        # Where to listen and log, one line each; then its input closes.
        _server.stdin.write(f"{json.dumps(str(path))}\n{json.dumps(str(log))}\n".encode())
        _server.stdin.close()
    except OSError:  # it has ended already: the jobs run as their own processes
        _server = None
        return
    os.environ[jobs.JOB_SERVER_ENV] = str(path)


def release() -> None:
    """No run for a prestarted server (a cluster run's jobs run elsewhere): it ends."""
    global _server
    if _server is not None:
        import contextlib

        with contextlib.suppress(OSError):
            _server.stdin.close()
            if isinstance(_server, _Adopted):  # `./lab run` holds its input open still
                _server.terminate()
        _server = None


def stop() -> None:
    """Stop the run's server (at the workflow's end); it waits for jobs still running."""
    global _server
    import contextlib

    os.environ.pop(jobs.JOB_SERVER_ENV, None)
    if _server is None:
        return
    with contextlib.suppress(ProcessLookupError):
        _server.terminate()
    import subprocess

    try:
        _server.wait(timeout=120)
    except subprocess.TimeoutExpired:
        _server.kill()
    _server = None


def on_start(run: Run, local: bool) -> None:
    """The workflow's start (``onstart``): a local run's main process gives the run to its
    server, whose jobs then start warm; anywhere else (a cluster run) the server ends."""
    if local:
        start(run.id, run.workdir)
    else:
        release()


def on_end(run: Run, failed: bool = False) -> None:
    """The workflow's end (``onsuccess``, ``onerror``): the run's clean-up, in its server
    while it is up (no job runs now); after a failure the server stops first, since it waits
    for the jobs still ending."""
    from tunelab.jobserver import client
    from tunelab.run import pipeline

    if failed:
        stop()
    pipeline.clean_run(run.id, run.workdir, submit=client.submit)
    stop()
    pipeline.release_timers()
