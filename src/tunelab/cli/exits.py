"""Exit codes and the one line on stderr that every command shares."""

from __future__ import annotations

import sys

EXIT_USAGE = 2
EXIT_FAILED = 1


def err(msg: str) -> None:
    print(msg, file=sys.stderr)
