"""Atomic file writes: a temporary file in the same directory, then a rename, so a reader (or
a rerun after a crash) sees either the old file or the whole new one, never a part. The
temporary file names its writer (``.NAME.PID.XXXXXXXX.tmp``): one a killed writer left is
told from one being written (``orphans``), wherever runs share a directory."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:  # the frames' methods only: the lab's quick commands never import pandas
    import pandas as pd


def write(path: str | os.PathLike, writer: Callable[[IO[bytes]], object]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"
    )
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


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_bytes(path, text.encode())


# mkstemp's name: the prefix, 8 characters of its own, the suffix
_TEMPORARY = re.compile(r"^\..+\.(?P<pid>\d+)\.[A-Za-z0-9_]{8}\.tmp$")


def orphans(roots: Iterable[str | os.PathLike]) -> list[Path]:
    """The temporary files under ``roots`` whose writer is gone (a job killed mid-write):
    never a file a live process is writing."""
    found = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".snakemake"]
            for name in files:
                if (m := _TEMPORARY.match(name)) and not _alive(int(m["pid"])):
                    found.append(Path(folder) / name)
    return sorted(found)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


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
