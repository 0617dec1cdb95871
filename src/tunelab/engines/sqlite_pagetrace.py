"""Page-reference traces of SQLite workloads, recorded by a VFS shim (apsw).

A VFS that inherits the default one records, for the traced database's main file, every
``xRead``: offset and length. With the connection's page cache at its minimum
(``PRAGMA cache_size=1``) and memory mapping off, nearly every page the engine asks for is
read from the file, so the recorded reads are the workload's logical page references: the
input the buffer-pool simulator needs. (Pages the engine keeps pinned while a cursor stands
on them, such as the root of a b-tree being walked, are not re-read and so not recorded.)

Page numbers are SQLite's own: ``offset // page_size + 1``; page 1 holds the schema. Reads
shorter than a page (SQLite probing the file header's change counter at the start of a
read transaction) are counted but not traced. In WAL mode, pages served from the WAL file
are not in the main file and so not traced: checkpoint before tracing.

The SQLite engine's ``traces`` ability: a run reaches it through ``SQLiteEngine.capture_trace``
(``abilities.PageTraces``).
"""

from __future__ import annotations

import itertools
import os
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import numpy as np

from tunelab.bpsim.traces import Trace

MIN_CACHE_PAGES = 1
_names = itertools.count()


class ReadRecorder:
    """Offsets and lengths of the reads of one file, in order."""

    def __init__(self) -> None:
        self.offsets = array("q")
        self.lengths = array("q")

    def clear(self) -> None:
        del self.offsets[:]
        del self.lengths[:]

    def __len__(self) -> int:
        return len(self.offsets)

    def pages(self, page_size: int) -> np.ndarray:
        """Page numbers (1-based) of the whole-page reads, in order."""
        offsets = np.frombuffer(self.offsets, dtype=np.int64)
        lengths = np.frombuffer(self.lengths, dtype=np.int64)
        whole = lengths >= page_size
        first = offsets[whole] // page_size
        count = lengths[whole] // page_size
        if count.size and count.max() > 1:  # a read spanning several pages: one per page
            starts = np.repeat(first, count)
            within = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
            first = starts + within
        return (first + 1).astype(np.uint32)

    def partial_reads(self, page_size: int) -> int:
        return int(np.count_nonzero(np.frombuffer(self.lengths, np.int64) < page_size))


class _TracingFile(apsw.VFSFile):
    def __init__(self, base: str, name, flags, recorder: ReadRecorder | None):
        self._recorder = recorder
        super().__init__(base, name, flags)

    def xRead(self, amount: int, offset: int) -> bytes:  # noqa: N802 (apsw's method name)
        if self._recorder is not None:
            self._recorder.offsets.append(offset)
            self._recorder.lengths.append(amount)
        return super().xRead(amount, offset)


class _TracingVFS(apsw.VFS):
    def __init__(self, name: str, target: Path, recorder: ReadRecorder):
        self._target = target
        self._recorder = recorder
        super().__init__(name, "")

    def xOpen(self, name, flags):  # noqa: N802 (apsw's method name)
        path = name.filename() if isinstance(name, apsw.URIFilename) else name
        traced = (
            path is not None
            and bool(flags[0] & apsw.SQLITE_OPEN_MAIN_DB)
            and os.path.realpath(path) == str(self._target)
        )
        return _TracingFile("", name, flags, self._recorder if traced else None)


@contextmanager
def traced_connection(
    db_path: str | os.PathLike, cache_pages: int = MIN_CACHE_PAGES
) -> Iterator[tuple[apsw.Connection, ReadRecorder]]:
    """An apsw connection to ``db_path`` whose main-file reads go to the recorder.

    The page cache is set to ``cache_pages`` and memory mapping is off, so page fetches
    reach the file. The recorder starts empty after the connection is set up; call
    ``recorder.clear()`` to drop reads of any untraced preparation.
    """
    target = Path(db_path).resolve()
    if not target.is_file():
        raise FileNotFoundError(f"{db_path}: no such database file")
    if cache_pages < 0:
        raise ValueError("cache_pages must be >= 0 (a number of pages)")
    recorder = ReadRecorder()
    vfs_name = f"tunelab-pagetrace-{os.getpid()}-{next(_names)}"
    vfs = _TracingVFS(vfs_name, target, recorder)
    try:
        conn = apsw.Connection(str(target), vfs=vfs_name)
        try:
            conn.execute(f"PRAGMA cache_size={int(cache_pages)}")
            conn.execute("PRAGMA mmap_size=0")
            recorder.clear()
            yield conn, recorder
        finally:
            conn.close()
    finally:
        vfs.unregister()


def capture_trace(
    db_path: str | os.PathLike,
    run: Callable[[apsw.Connection], object],
    cache_pages: int = MIN_CACHE_PAGES,
) -> Trace:
    """Run ``run(conn)`` on a traced connection; the page trace with its metadata.

    ``meta`` records page_size, page_count and freelist_count before the run, the cache
    size, the run's wall time (``duration_s``, the trace's own pace) and the number of
    sub-page reads that were not traced.
    """
    with traced_connection(db_path, cache_pages) as (conn, recorder):
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        page_count = conn.execute("PRAGMA page_count").fetchone()[0]
        freelist = conn.execute("PRAGMA freelist_count").fetchone()[0]
        recorder.clear()
        start = time.perf_counter_ns()
        run(conn)
        elapsed = (time.perf_counter_ns() - start) / 1e9
        pages = recorder.pages(page_size)
        meta = {
            "engine": "sqlite",
            "sqlite_version": apsw.sqlite_lib_version(),
            "db": str(Path(db_path)),
            "page_size": int(page_size),
            "page_count": int(page_count),
            "freelist_count": int(freelist),
            "cache_pages": int(cache_pages),
            "duration_s": elapsed,
            "partial_reads": recorder.partial_reads(page_size),
        }
    return Trace(pages, None, meta)


def beside(result_path: str | os.PathLike) -> Path:
    """Where a point's trace goes: next to its result file, ``<stem>.trace.npz``."""
    result = Path(result_path)
    return result.with_name(f"{result.stem}.trace.npz")


def capture(
    db_path: str | os.PathLike,
    run: Callable[[apsw.Connection], object],
    cache_pages: int = MIN_CACHE_PAGES,
) -> np.ndarray:
    """The page numbers ``run(conn)`` reads from ``db_path``, in order (see capture_trace)."""
    return capture_trace(db_path, run, cache_pages).pages
