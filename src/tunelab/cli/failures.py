"""How a command that failed ends: one line on stderr saying what happened and what to do
(a full disk, an unreachable Docker engine, any other exception), after its traceback where
that helps; output cut short by a closed pipe ends quietly."""

from __future__ import annotations

import contextlib
import sys

from tunelab import engines
from tunelab.cli.exits import EXIT_FAILED, err

EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a command killed by SIGPIPE


def stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (the BrokenPipeError came from the
    output, not from a socket to an engine)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # stdout replaced or closed
        return False


def quiet_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's final flush must not fail again."""
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it was raised from or while handling, outermost first."""
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _one_line(exc: BaseException, limit: int = 300) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.partition("=")[2]
    return None


def _disk_full(exc: BaseException, argv: list[str]) -> str | None:
    """What was being written when the disk filled up ("" when unknown), None when the
    failure is not a full disk (or quota)."""
    import errno

    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return str(e.filename or _option(argv, "--out") or "")
        if engines.disk_full(e):
            return _option(argv, "--workdir") or ".tunelab"  # the engine's data files
    return None


def _docker_down(exc: BaseException) -> BaseException | None:
    """The connection error of a call to the Docker engine (socket missing, daemon stopped,
    no permission), if that is what the failure comes from."""
    import traceback

    for e in _chain(exc):
        # requests' ConnectionError (what the SDK raises) or the built-in one
        if type(e).__name__ != "ConnectionError" and not isinstance(e, ConnectionError):
            continue
        url = str(getattr(getattr(e, "request", None), "url", ""))
        frames = traceback.extract_tb(e.__traceback__)
        if url.startswith("http+docker") or any("/docker/" in f.filename for f in frames):
            return e
    return None


def _os_reason(exc: BaseException) -> str:
    """The operating system's words inside a wrapped connection error (e.g. "Connection
    refused"), else its own message."""
    todo: list[object] = [exc]
    seen: set[int] = set()
    while todo:
        item = todo.pop(0)
        if id(item) in seen or not isinstance(item, BaseException):
            continue
        seen.add(id(item))
        if isinstance(item, OSError) and item.strerror:
            return item.strerror
        # urllib3 keeps the cause in .reason, requests in args, Python in the chain
        todo += [*item.args, getattr(item, "reason", None), item.__cause__, item.__context__]
    return _one_line(exc)


def summary(exc: Exception, argv: list[str]) -> str:
    """The one line that ends a failure: what happened and what to do."""
    from tunelab.engines.base import EngineError
    from tunelab.host.containers import ContainerError

    where = _disk_full(exc, argv)
    if where is not None:
        written = f" writing {where}" if where else ""
        return f"disk full{written}: free space and run again; finished points are kept"
    docker_error = _docker_down(exc)
    if docker_error is not None:
        return (
            f"Docker engine not reachable ({_os_reason(docker_error)}): start it (or fix "
            "DOCKER_HOST), run `tunelab clean` and run again; finished points are kept"
        )
    if isinstance(exc, ContainerError | EngineError):  # written for the user already
        return _one_line(exc)
    return unexpected(exc)


def _traceback_wanted() -> bool:
    import os

    if os.environ.get("TUNELAB_DEBUG") == "1":
        return True
    try:
        return not sys.stderr.isatty()
    except (AttributeError, ValueError):
        return True


def unexpected(exc: BaseException) -> str:
    hint = "full traceback in the log" if _traceback_wanted() else "TUNELAB_DEBUG=1 shows where"
    return f"{type(exc).__name__}: {_one_line(exc)} ({hint})"


def failed(command: str, exc: BaseException, summary: str) -> int:
    """Traceback (to a log, or with TUNELAB_DEBUG=1), then the one line; exit code 1."""
    import traceback

    with contextlib.suppress(OSError):  # stderr itself may be the closed pipe
        if _traceback_wanted():
            traceback.print_exception(exc, file=sys.stderr)
        err(f"{command}: {summary}")
    return EXIT_FAILED
