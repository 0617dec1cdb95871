"""The job's side of the run's job server: a workflow job's `tunelab` command (``entry``, the
console script) sends its arguments, working directory, environment and standard streams to
the server (``submit``), passes on the signals it gets, and exits with the command's exit
status. Where there is no server (a cluster job, a command typed by hand, a socket path too
long), or it cannot be reached, the command runs in this process.

This module imports only C modules and ``tunelab.host.jobs`` (a leaf): it is what every `tunelab`
command loads first.
"""

from __future__ import annotations

import _signal
import os
import sys

from tunelab.host import jobs

TYPE_CHECKING = False  # typing's own costs the job's side 3 ms
if TYPE_CHECKING:  # the job's side (every `tunelab` command) never needs these
    import socket

# What a job passes on to its child (``submit``); blocked in the server across a fork.
JOB_SIGNALS = frozenset({_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT})
# A request: its length (4 bytes, big-endian), sent with the job's three standard streams,
# then the request itself (marshal: argv, cwd, env). Replies are lines: "pid N", "exit N".
HEADER_SIZE = 4


def submit(argv: list[str], stdout: int = 1) -> int | None:
    """Run ``tunelab ARGV`` in the run's job server and return its exit code; None when no
    server takes it (the caller then runs it itself). ``stdout``: the descriptor the command
    writes its output to."""
    path = os.environ.get(jobs.JOB_SERVER_ENV)
    if not path or not argv or argv[0] not in jobs.SERVED or {"-h", "--help"} & set(argv):
        return None
    # C modules only (socket, json and signal would cost every job 10 ms of imports).
    import _socket
    import array
    import marshal

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    replies = bytearray()
    try:
        sock.connect(path)
        # A signal the job was started with ignored (SIGINT in a script's background job,
        # SIGHUP under nohup) stays ignored in its child, as it would in its own process.
        ignored = [s for s in JOB_SIGNALS if _signal.getsignal(s) == _signal.SIG_IGN]
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "ignored": ignored}
        data = marshal.dumps(request)
        streams = array.array("i", [0, stdout, 2])
        sock.sendmsg(
            [len(data).to_bytes(HEADER_SIZE, "big")],
            [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, streams)],
        )
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

    held = {
        signum: _signal.signal(signum, pass_on) for signum in JOB_SIGNALS if signum not in ignored
    }
    try:
        code = _reply(sock, replies, "exit")  # a signal passed on meanwhile does not cut it
    except (OSError, ValueError):
        code = None
    finally:
        sock.close()
        for signum, handler in held.items():  # the caller may go on (the workflow's end)
            _signal.signal(signum, handler)
    if code is None:
        print(
            f"tunelab {argv[0]}: the run's job server stopped before the job ended", file=sys.stderr
        )
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


def entry() -> int:
    """The `tunelab` console script: a workflow job goes to the run's server, anything else
    (or a job no server takes) to ``tunelab.cli.main`` in this process."""
    argv = sys.argv[1:]
    code = submit(argv)
    if code is None:
        try:
            from tunelab import cli
        except BaseException as exc:  # a stop while it imports: no traceback
            from tunelab.host.interrupts import EXIT_INTERRUPTED, interrupted

            if isinstance(exc, SystemExit) or not interrupted(exc):
                raise
            print("tunelab: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        code = cli.main(argv)
    return code
