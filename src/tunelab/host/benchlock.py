"""One host-wide reader/writer lock around the lab's jobs. A measurement holds it
``exclusive`` and so runs alone on the host; every other job holds it ``shared`` and runs
beside other non-measuring jobs, never beside a measurement. Checkouts on one host share
the lock, so their timed sections never overlap either.

The lock is ``tunelab-bench.lock`` in ``$TUNELAB_LOCK_DIR``, else in the first writable of
``/run/lock`` and ``/var/lock``, else in the temporary directory. When ``$TUNELAB_JOB_LOG``
names a file, every holder appends the span it held the lock as one JSON line: job, kind,
pid, start_ns, end_ns on CLOCK_MONOTONIC (the clock of the results' ``timed_*_ns``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

LOCK_NAME = "tunelab-bench.lock"
SYSTEM_LOCK_DIRS = ("/run/lock", "/var/lock")

# What this process holds: flock on a second descriptor would wait for this process itself.
_holding: str | None = None


def lock_path() -> Path:
    chosen = os.environ.get("TUNELAB_LOCK_DIR")
    if chosen:
        Path(chosen).mkdir(parents=True, exist_ok=True)
        return Path(chosen) / LOCK_NAME
    for d in SYSTEM_LOCK_DIRS:
        if os.access(d, os.W_OK):
            return Path(d) / LOCK_NAME
    return Path(tempfile.gettempdir()) / LOCK_NAME


class LockError(RuntimeError):
    """The bench lock's path is not a plain file (a link another user may have planted)."""


def _open() -> int:
    path = lock_path()
    # Create with O_EXCL, else open without O_CREAT: in a sticky directory the kernel may
    # refuse O_CREAT on another user's file (fs.protected_regular), however open its mode.
    # Never through a link: in a shared directory (/run/lock) anyone may put one there.
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        os.fchmod(fd, 0o666)  # past the umask: another user's run must be able to lock it
        return fd
    try:
        try:
            return os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        except PermissionError:
            return os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # flock needs no write access
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise LockError(
            f"the bench lock {path} is a link, not a file: the lab does not follow it; remove "
            "it (or set TUNELAB_LOCK_DIR to a folder of the lab's)"
        ) from None


def _record(job: str, kind: str, start_ns: int, end_ns: int) -> None:
    log = os.environ.get("TUNELAB_JOB_LOG")
    if not log:
        return
    span = {"job": job, "kind": kind, "pid": os.getpid(), "start_ns": start_ns, "end_ns": end_ns}
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, (json.dumps(span) + "\n").encode())  # one append: lines never interleave
    finally:
        os.close(fd)


@contextlib.contextmanager
def _hold(job: str, kind: str, operation: int) -> Iterator[None]:
    global _holding
    if _holding == "exclusive" or _holding == kind:
        yield  # already covered by this process's outer hold
        return
    if _holding:
        raise RuntimeError(f"{job}: cannot measure while this process holds the bench lock shared")
    fd = _open()
    try:
        fcntl.flock(fd, operation)
        start_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        _holding = kind
        try:
            yield
        finally:
            end_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            _holding = None
            fcntl.flock(fd, fcntl.LOCK_UN)
            _record(job, kind, start_ns, end_ns)
    finally:
        os.close(fd)


def exclusive(job: str) -> contextlib.AbstractContextManager[None]:
    """Hold the lock alone on the host (a measurement); waits for every other holder."""
    return _hold(job, "exclusive", fcntl.LOCK_EX)


def shared(job: str) -> contextlib.AbstractContextManager[None]:
    """Hold the lock beside other non-measuring jobs; waits while a measurement holds it."""
    return _hold(job, "shared", fcntl.LOCK_SH)


def held_exclusively() -> bool:
    """Whether a measurement holds the lock now, anywhere on the host. Never waits."""
    fd = _open()
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also ends the probe's own shared hold
    return False


def job_name(argv: Sequence[str]) -> str:
    """A tunelab command line as a job: the command and what it writes (``--out``), else
    its first argument, e.g. ``report reports/sqlite/tiny.html``, ``datagen <key>``."""
    if not argv:
        return "tunelab"
    command, rest = argv[0], list(argv[1:])
    target = next((a.partition("=")[2] for a in rest if a.startswith("--out=")), None)
    if target is None and "--out" in rest[:-1]:
        target = rest[rest.index("--out") + 1]
    if target is None:
        target = next((a for a in rest if not a.startswith("-")), None)
    return f"{command} {target}" if target else command


def this_job(default: str) -> str:
    """This process's job name when it is the ``tunelab`` command, else ``default``."""
    if Path(sys.argv[0]).name == "tunelab" and len(sys.argv) > 1:
        return job_name(sys.argv[1:])
    return default
