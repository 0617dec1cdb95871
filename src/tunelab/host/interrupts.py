"""A stop (Ctrl-C, the lab's SIGINT) that reaches a command while Python still imports its
modules: told apart from a real error, so that the command ends with 130 and no traceback."""

from __future__ import annotations

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it


def interrupted(exc: BaseException | None) -> bool:
    """A KeyboardInterrupt, or an error it caused: Python 3.11 wraps one raised in a class
    body's ``__set_name__`` into a RuntimeError."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False
