"""The run's job server: one warm process, its imports done once (``PRELOAD``), that forks
a child per job's request. The child becomes the job (its streams, directory, environment
and signals), runs the command exactly as the command line would (``tunelab.cli.main``;
ipykernel's for a report's kernel) and its exit status goes back to the job. Each job is its
own process still: a point's state never outlives it, and the bench lock, results and logs
are the child's as before. A job that dies (kill -9) has its child stopped with SIGTERM,
which removes its containers as usual.

Run as ``python -m tunelab.jobserver SOCKET --owner PID`` (or ``--standby``: the socket and
log come on standard input once the imports are done); it ends when told to (SIGTERM) or
when its owner, the workflow's Snakemake, is gone.
"""

from __future__ import annotations

import os
import sys

from tunelab.host import jobs
from tunelab.jobserver.client import HEADER_SIZE, JOB_SIGNALS

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from pathlib import Path
    from typing import NoReturn

# What the server imports once, before it forks: the modules a job spends its start on, and
# what a report's kernel imports (IPython, seaborn and scipy: about 2.5 s of each report);
# the engines' modules too (the registry's, tunelab.engines).
PRELOAD = (
    "tunelab.cli",
    "tunelab.measure.runner",
    "tunelab.store.results",
    "tunelab.report.cli",
    "tunelab.run.check",
    "tunelab.run.recovery",
    "ipykernel.kernelapp",
    "tunelab.report.page.header_section",
    "tunelab.report.page.findings_section",
    "tunelab.report.page.figures_section",
    "tunelab.report.page.measured_section",
    "tunelab.report.page.times_section",
    "tunelab.report.page.io_section",
    "tunelab.report.page.optional_sections",
    "tunelab.report.methods",
    "tunelab.report.page.callouts",
    "tunelab.report.page.appendix",
    "tunelab.report.data",
    "tunelab.jobserver.kernel_manager",
)
_MAX_REQUEST = 16 << 20


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = conn.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionError("request cut short")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    import marshal
    import socket

    conn.settimeout(10)  # a job sends its request at once; never let one hang the server
    head, fds, _flags, _addr = socket.recv_fds(conn, HEADER_SIZE, 3)
    try:
        if len(head) < HEADER_SIZE:
            head += _recv_exact(conn, HEADER_SIZE - len(head))
        size = int.from_bytes(head, "big")
        if size > _MAX_REQUEST or len(fds) != 3:
            raise ValueError("malformed request")
        try:
            request = marshal.loads(_recv_exact(conn, size))
        except (EOFError, TypeError) as exc:
            raise ValueError("malformed request") from exc
        if not isinstance(request, dict) or not isinstance(request.get("argv"), list):
            raise ValueError("malformed request")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    conn.settimeout(None)
    return request, fds


def _run_child(request: dict, fds: list[int]) -> int:
    """In the forked child: become the job (streams, directory, environment, signals), run
    the command as `tunelab` would, and return its exit code."""
    import atexit
    import contextlib
    import io
    import signal
    import tempfile
    import traceback

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    for name, fd in (("stdout", 1), ("stderr", 2)):
        raw = io.FileIO(fd, "w", closefd=False)
        setattr(
            sys,
            name,
            io.TextIOWrapper(raw, line_buffering=raw.isatty() or fd == 2, write_through=fd == 2),
        )
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # the job's $TMPDIR, not the one the server's imports cached
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    for signum in request.get("ignored", ()):  # as the job was started
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_SIGNALS)  # held since the fork
    argv = [str(a) for a in request["argv"]]
    sys.argv = ["tunelab", *argv]
    code: int = 1
    try:
        if argv[0] == jobs.KERNEL:
            from ipykernel import kernelapp

            # A report's kernel is never debugged: without debugpy (an import that fails),
            # ipykernel starts no debugger (0.12 s of each kernel's start).
            sys.modules.setdefault("debugpy", None)  # type: ignore[arg-type]
            kernelapp.launch_new_instance(argv=argv[1:])
            code = 0
        else:
            from tunelab import cli

            code = cli.main(argv)
    except SystemExit as exc:  # SIGTERM becomes one (containers' safety net)
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()  # what the command registered: its containers' removal
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
    return code


class _Child:
    """A forked job: its job's connection, and a descriptor that becomes readable when it
    exits."""

    def __init__(self, conn: socket.socket, pidfd: int) -> None:
        self.conn = conn
        self.pidfd = pidfd
        self.job_alive = True


def _status(wait_status: int) -> int:
    if os.WIFSIGNALED(wait_status):
        return 128 + os.WTERMSIG(wait_status)
    return os.waitstatus_to_exitcode(wait_status)


def _await_run() -> tuple[Path, Path] | None:
    """A standby server's socket and log, one JSON line each on its standard input (from
    ``start``); None when the input ends first (the workflow had no run for it)."""
    import json
    from pathlib import Path

    # Two lines, not the whole input: `./lab run` holds its end open until the run is over.
    lines = [sys.stdin.buffer.readline(), sys.stdin.buffer.readline()]
    if not all(line.endswith(b"\n") for line in lines):
        return None
    return Path(json.loads(lines[0])), Path(json.loads(lines[1]))


def serve(path: Path | None, owner: int) -> None:
    """Fork a child per request until told to stop (SIGTERM) or the owner (the workflow's
    Snakemake) is gone; then let the running children end. Without ``path`` (standby), its
    socket and log come on standard input once the imports are done."""
    import contextlib
    import gc
    import importlib
    import selectors
    import signal
    import socket

    from tunelab import engines
    from tunelab.host import benchlock

    # What a job would import first (an engine's missing driver is fine), never beside a
    # measurement: the host-wide bench lock, shared, as every untimed job.
    with benchlock.shared("jobserver preload"):
        for name in PRELOAD:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        for name in engines.names():
            with contextlib.suppress(ImportError):
                engines.engine_class(name)
        # The code's commit, which every result row records: git once here, not per job
        # (the jobs run the code loaded here, so it is the commit they measure with).
        from tunelab.host import provenance

        provenance.git_commit()
        provenance.machine()  # and the host's facts (its CPU name runs `uname -p`)
        # What each job would build first: the CLI's parser, the report page's templates.
        # One that fails here fails in the job that needs it, where it is reported.
        with contextlib.suppress(Exception):
            importlib.import_module("tunelab.cli").build_parser()
        with contextlib.suppress(Exception):
            importlib.import_module("tunelab.report.render").warm_exporter()
        # What is loaded now lives as long as the server: out of the garbage collector's
        # reach, a child's collection skips it (a report kernel's exit, IPython's reset,
        # took 0.1 s collecting the preloaded modules) and touches none of its pages.
        gc.collect()
        gc.freeze()
    if path is None:
        given = _await_run()
        if given is None:
            return
        path, log = given
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        for target in (1, 2):
            os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    # A SIGTERM also writes to this pipe, which wakes the wait below at once: a run's end
    # does not wait out its timeout.
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    sys.stdout.flush()
    sys.stderr.flush()

    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket is its owner's alone
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_umask)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, ("accept", None))
    sel.register(wake_r, selectors.EVENT_READ, ("signal", None))
    owner_fd: int | None = None
    try:
        owner_fd = os.pidfd_open(owner)
        sel.register(owner_fd, selectors.EVENT_READ, ("owner", None))
    except (OSError, AttributeError):
        stopping.append(True)  # the owner is gone already
    children: dict[int, _Child] = {}
    stopped_children: set[int] = set()  # sent SIGTERM once: a second would cut its cleanup

    def stop_child(pid: int) -> None:
        if pid not in stopped_children:
            stopped_children.add(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    while True:
        if stopping:
            if listener.fileno() >= 0:
                sel.unregister(listener)
                listener.close()
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            if not children:
                return
            for pid in children:  # told to stop, or the workflow is gone: so are its jobs
                stop_child(pid)
        for key, _ in sel.select():  # woken by a job, an exit, a signal or the owner
            what, pid = key.data
            if what == "accept":
                conn, _ = listener.accept()
                try:
                    request, fds = _read_request(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                # The child inherits the server's SIGTERM handler, which only marks the
                # server as stopping: a job killed right after the fork would have its
                # child's SIGTERM swallowed and the point measured to its end. Held back
                # until the child has its own handlers (``_run_child``).
                signal.pthread_sigmask(signal.SIG_BLOCK, JOB_SIGNALS)
                try:
                    pid = os.fork()
                except OSError:  # no process to be had: the job runs itself (no pid sent)
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_SIGNALS)
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                if pid != 0:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_SIGNALS)
                if pid == 0:
                    code = 1
                    try:
                        # The job's descriptors only: a copy of another job's connection
                        # would keep that job waiting on a server that is gone.
                        sel.close()
                        signal.set_wakeup_fd(-1)
                        for fd in (listener, conn, *(c.conn for c in children.values())):
                            fd.close()
                        for fd in (owner_fd, wake_r, wake_w, *(c.pidfd for c in children.values())):
                            if fd is not None:
                                os.close(fd)
                        code = _run_child(request, fds)
                    finally:
                        os._exit(code)
                for fd in fds:
                    os.close(fd)
                child = _Child(conn, os.pidfd_open(pid))
                children[pid] = child
                sel.register(child.pidfd, selectors.EVENT_READ, ("exited", pid))
                sel.register(conn, selectors.EVENT_READ, ("job gone", pid))
                with contextlib.suppress(OSError):
                    conn.sendall(b"pid %d\n" % pid)
            elif what == "exited":
                child = children.pop(pid)
                stopped_children.discard(pid)
                _, status = os.waitpid(pid, 0)
                sel.unregister(child.pidfd)
                os.close(child.pidfd)
                if child.job_alive:
                    sel.unregister(child.conn)
                    with contextlib.suppress(OSError):
                        child.conn.sendall(b"exit %d\n" % _status(status))
                child.conn.close()
            elif what == "job gone":  # the job sends nothing more: readable means it ended
                child = children[pid]
                child.job_alive = False
                sel.unregister(child.conn)
                stop_child(pid)
            elif what == "signal":  # the handler has run: the loop's top sees what it set
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)
            elif what == "owner":
                sel.unregister(key.fileobj)
                stopping.append(True)


def main(argv: list[str] | None = None) -> NoReturn:
    import argparse
    import contextlib
    from pathlib import Path

    ap = argparse.ArgumentParser(prog="python -m tunelab.jobserver", description=__doc__)
    ap.add_argument("socket", type=Path, nargs="?")
    ap.add_argument(
        "--standby",
        action="store_true",
        help="import first; then read the socket and log from standard input",
    )
    ap.add_argument("--owner", type=int, required=True, help="the workflow's pid")
    a = ap.parse_args(argv)
    if (a.socket is None) != a.standby:
        ap.error("give a socket, or --standby")
    if a.standby:  # as ``prestart`` starts it: the terminal's Ctrl-C is for the jobs alone
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
    serve(a.socket, a.owner)
    # Every job has ended: nothing is left to clean up, and tearing down the interpreter
    # with everything preloaded would hold the run's end for about 0.3 s.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
