"""Atomic file writes: a temporary file in the same directory, then a rename, so a reader (or
a rerun after a crash) sees either the old file or the whole new one, never a part."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # the frames' methods only: the lab's quick commands never import pandas
    import pandas as pd


def write(path: str | os.PathLike, writer: Callable[[IO[bytes]], object]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            writer(f)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return write(path, lambda f: f.write(data))


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The bytes ``write_csv`` writes for an uncompressed file (to checksum what is written)."""
    return frame.to_csv(index=False, lineterminator="\n").encode()


def write_csv(frame: pd.DataFrame, path: str | os.PathLike, level: int = 9) -> Path:
    """``frame`` as CSV at ``path``, gzip-compressed at ``level`` when it ends in .gz."""
    # A handle carries no name to infer compression from; mtime 0 keeps .gz reproducible.
    gz = None
    if str(path).endswith(".gz"):
        gz = {"method": "gzip", "mtime": 0, "compresslevel": level}
    return write(path, lambda f: frame.to_csv(f, index=False, lineterminator="\n", compression=gz))


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
