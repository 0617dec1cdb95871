"""The run's job server: one warm process that starts the workflow's `tunelab` jobs by
forking, so a point does not pay the interpreter's start and its imports (pandas, numpy,
the engine drivers: about 0.6 s, a third of a short point's wall time) before its
measurement.

The workflow starts it when a local run begins (``start``, from the Snakefile's ``onstart``)
and names its socket in ``$TUNELAB_JOB_SERVER``. A job's `tunelab` command (``submit``, the
console script's first step) sends its arguments, working directory, environment and
standard streams to the server over that socket; the server forks, the child runs the
command exactly as the command line would (``tunelab.cli.main``) and its exit status goes
back to the job, which exits with it. Each job is its own process still: a point's state
never outlives it, and the bench lock, results and logs are the child's as before.

Signals the job gets (Snakemake stopping it, Ctrl-C) are passed on to the child; a job that
dies (kill -9) has its child stopped with SIGTERM, which removes its containers as usual.
Where there is no server (a cluster job, a command typed by hand, a socket path too long),
or it cannot be reached, the command runs in its own process as before.

This module imports only the standard library at the top: it is what every `tunelab`
command loads first.
"""

from __future__ import annotations

import _signal
import os
import sys

TYPE_CHECKING = False  # typing's own costs the job's side 3 ms
if TYPE_CHECKING:  # the job's side (every `tunelab` command) never needs these
    import socket
    import subprocess
    from pathlib import Path
    from typing import NoReturn

JOB_SERVER_ENV = "TUNELAB_JOB_SERVER"
# "PID:FD": a standby server `./lab run` started before its checks, and the descriptor of
# its standard input, which the workflow inherits (``prestart`` adopts it).
STANDBY_ENV = "TUNELAB_JOB_SERVER_STANDBY"
SOCKET_NAME = "jobs.sock"
# A report's notebook kernel (tunelab.kernel): ipykernel's, forked warm like a job.
KERNEL = "kernel"
# The workflow's job commands (recovery.JOB_COMMANDS) and the reports' kernels; everything
# else runs in its own process.
SERVED = frozenset(
    {"run-point", "trace-point", "datagen", "merge", "report", "index", "check", "bpsim",
     "calibrate", "clean", KERNEL}
)  # fmt: skip
# What the server imports once, before it forks: the modules a job spends its start on, and
# what a report's kernel imports (IPython, seaborn and scipy: about 2.5 s of each report).
PRELOAD = (
    "tunelab.cli", "tunelab.runner", "tunelab.results", "tunelab.engines.sqlite",
    "tunelab.engines.mariadb", "tunelab.engines.postgres", "tunelab.engines.db2",
    "tunelab.report.cli", "tunelab.claims", "ipykernel.kernelapp", "tunelab.report.sections",
    "tunelab.report.data",
)  # fmt: skip
# What a job passes on to its child (``submit``); blocked in the server across a fork.
_JOB_SIGNALS = frozenset({_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT})
# A request: its length (4 bytes, big-endian), sent with the job's three standard streams,
# then the request itself (marshal: argv, cwd, env). Replies are lines: "pid N", "exit N".
_HEADER_SIZE = 4
_MAX_REQUEST = 16 << 20
_SUN_PATH_MAX = 107  # sockaddr_un holds 108 bytes with the final NUL

_server: subprocess.Popen | _Adopted | None = None


# -- the job's side ------------------------------------------------------------------------
def submit(argv: list[str], stdout: int = 1) -> int | None:
    """Run ``tunelab ARGV`` in the run's job server and return its exit code; None when no
    server takes it (the caller then runs it itself). ``stdout``: the descriptor the command
    writes its output to."""
    path = os.environ.get(JOB_SERVER_ENV)
    if not path or not argv or argv[0] not in SERVED or {"-h", "--help"} & set(argv):
        return None
    # C modules only (socket, json and signal would cost every job 10 ms of imports).
    import _socket
    import array
    import marshal

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    replies = bytearray()
    try:
        sock.connect(path)
        data = marshal.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)})
        streams = array.array("i", [0, stdout, 2])
        sock.sendmsg([len(data).to_bytes(_HEADER_SIZE, "big")],
                     [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, streams)])  # fmt: skip
        sock.sendall(data)
        pid = _reply(sock, replies, "pid")
    except (OSError, ValueError):
        sock.close()
        return None  # nothing was started: run it here
    if pid is None:
        sock.close()
        return None

    def pass_on(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:  # the child has ended meanwhile
            return

    held = {signum: _signal.signal(signum, pass_on) for signum in _JOB_SIGNALS}
    try:
        code = _reply(sock, replies, "exit")  # a signal passed on meanwhile does not cut it
    except (OSError, ValueError):
        code = None
    finally:
        sock.close()
        for signum, handler in held.items():  # the caller may go on (the workflow's end)
            _signal.signal(signum, handler)
    if code is None:
        print(f"tunelab {argv[0]}: the run's job server stopped before the job ended",
              file=sys.stderr)  # fmt: skip
        return 1
    return code


def _reply(sock: socket.socket, buffer: bytearray, word: str) -> int | None:
    """The server's next reply line, ``WORD N``: N; None when the connection ends first."""
    while b"\n" not in buffer:
        chunk = sock.recv(256)
        if not chunk:
            return None
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    said, _, value = line.decode().partition(" ")
    if said != word:
        raise ValueError(f"job server: expected {word!r}, got {line!r}")
    return int(value)


# -- the workflow's side -------------------------------------------------------------------
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
    pid, _, fd = os.environ.pop(STANDBY_ENV, "").partition(":")
    try:
        return _Adopted(int(pid), int(fd))
    except (ValueError, OSError):
        return None


def prestart() -> None:
    """Start the server's imports now, before the run is known (the Snakefile's first lines,
    main process of a run): they take a second, which Snakemake's parse and DAG then hide;
    or take the server `./lab run` started before its checks, its imports under way
    already. ``start`` gives it the run; a process that ends without ``start`` (a dry run,
    a lint) closes its standard input, and the server ends having bound nothing."""
    global _server
    import subprocess

    if _server is not None:
        return
    _server = _adopt()
    if _server is not None:
        return
    cmd = [sys.executable, "-m", "tunelab.jobserver", "--standby", "--owner", str(os.getpid())]
    # Its own process group: the terminal's Ctrl-C reaches the jobs, which pass it on, never
    # twice. Still in the run's session: what kills the session kills it too.
    _server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, process_group=0)  # fmt: skip


def start(run_id: str, workdir: str) -> None:
    """Give the run to its server (the Snakefile's ``onstart``, main process of a local run),
    started by ``prestart`` or now, and name its socket to the jobs. Without one, jobs run as
    their own processes."""
    global _server
    import json
    from pathlib import Path

    run_dir = Path(workdir) / "runs" / run_id
    path = socket_path(run_dir)
    if path is None:
        release()
        return
    from tunelab import ownership

    run_dir.mkdir(parents=True, exist_ok=True)
    # Claimed as the points claim it: `tunelab recover` then knows whose run this is.
    ownership.claim(run_dir, ownership.Owner.current(Path(workdir).resolve()))
    log = run_dir / "jobserver.log"
    prestart()  # unless the Snakefile did
    try:
        # Where to listen and log, one line each; then its input closes.
        _server.stdin.write(f"{json.dumps(str(path))}\n{json.dumps(str(log))}\n".encode())
        _server.stdin.close()
    except OSError:  # it has ended already: the jobs run as their own processes
        _server = None
        return
    os.environ[JOB_SERVER_ENV] = str(path)


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

    os.environ.pop(JOB_SERVER_ENV, None)
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


# -- the server ----------------------------------------------------------------------------
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
    head, fds, _flags, _addr = socket.recv_fds(conn, _HEADER_SIZE, 3)
    try:
        if len(head) < _HEADER_SIZE:
            head += _recv_exact(conn, _HEADER_SIZE - len(head))
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
    import traceback

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    for name, fd in (("stdout", 1), ("stderr", 2)):
        raw = io.FileIO(fd, "w", closefd=False)
        setattr(sys, name, io.TextIOWrapper(raw, line_buffering=raw.isatty() or fd == 2,
                                            write_through=fd == 2))  # fmt: skip
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _JOB_SIGNALS)  # held since the fork
    argv = [str(a) for a in request["argv"]]
    sys.argv = ["tunelab", *argv]
    code: int = 1
    try:
        if argv[0] == KERNEL:
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

    from tunelab import benchlock

    # What a job would import first (an engine's missing driver is fine), never beside a
    # measurement: the host-wide bench lock, shared, as every untimed job.
    with benchlock.shared("jobserver preload"):
        for name in PRELOAD:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        # The code's commit, which every result row records: git once here, not per job
        # (the jobs run the code loaded here, so it is the commit they measure with).
        from tunelab import provenance

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
                signal.pthread_sigmask(signal.SIG_BLOCK, _JOB_SIGNALS)
                try:
                    pid = os.fork()
                except OSError:  # no process to be had: the job runs itself (no pid sent)
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, _JOB_SIGNALS)
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                if pid != 0:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, _JOB_SIGNALS)
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


def entry() -> int:
    """The `tunelab` console script: a workflow job goes to the run's server, anything else
    (or a job no server takes) to ``tunelab.cli.main`` in this process."""
    argv = sys.argv[1:]
    code = submit(argv)
    if code is None:
        from tunelab import cli

        code = cli.main(argv)
    return code


if __name__ == "__main__":
    sys.exit(main())
