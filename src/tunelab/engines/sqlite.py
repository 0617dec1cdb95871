"""SQLite, the embedded default engine (through apsw, which exposes the page-cache counters).

Knobs are SQLite's real ones: ``PRAGMA page_size`` (set on a fresh database file),
``PRAGMA cache_size`` in pages (the per-connection page cache is SQLite's buffer pool),
index layouts (a secondary index; a WITHOUT ROWID table keyed on the attribute, which
clusters the rows, rebuilt in key order after its load; covering composite indexes). SQLite
locks the whole database for every write, so lock granularity has a single value,
``database``. It has no prefetch of its own: a scan reads page after page and the kernel
reads ahead of it, so its prefetch knob is the kernel's read-ahead (``os_read_ahead``: the
database file on a device of the point's own, ``engines.readahead``).

The statement text, the timed statements' dialect among it, is in ``sqlite_sql``.
The knobs and what they mean are in ``sqlite_info``, the built table's read-back in
``sqlite_layout``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw

from tunelab.engines import readahead
from tunelab.engines import sqlite_sql as sql
from tunelab.engines.base import (
    CacheState,
    Engine,
    EngineError,
    IndexPlan,
)
from tunelab.engines.sqlite_builds import SQLiteBuilds
from tunelab.engines.sqlite_info import INFO, SQLiteKnobRules
from tunelab.engines.sqlite_layout import SQLiteLayout
from tunelab.engines.sqlite_setup import SetupConnection
from tunelab.host import cache
from tunelab.store.dataset import Dataset


class SQLiteEngine(Engine):
    info = INFO
    builds_class = SQLiteBuilds
    dialect_class = sql.SQLiteDialect
    knob_rules = SQLiteKnobRules(INFO)
    layout_class = SQLiteLayout
    full_errors = (apsw.FullError,)

    def __init__(self, workdir: Path, run_id: str):
        super().__init__(workdir, run_id)
        self.path = self.workdir / "sqlite" / "lab.db"
        self.disk: readahead.LabDisk | None = None  # the file's own device (os_read_ahead)

    # -- lifecycle -------------------------------------------------------------------------
    def provision(self, knobs: dict[str, Any]) -> None:
        knobs = self.knob_rules.full_knobs(knobs)
        moved = readahead.wanted(knobs) != (self.disk is not None)  # onto a device, or off it
        restart = (
            self.knobs.get("page_size") != knobs.get("page_size") or not self.path.exists() or moved
        )
        self.knobs = knobs
        if restart:
            # A page size applies to a new file; a fresh file is this engine's "restart".
            self._remove_files()
            if moved:
                self._move_disk()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.new_file()
            self.starts += 1
        if self.disk is not None:
            self.disk.apply(knobs[readahead.NAME])  # in place: the device's own setting

    def _move_disk(self) -> None:
        """The file's directory onto a device of its own (the knob is set), or off it."""
        if self.disk is not None:
            self.disk.release()
            self.disk = None
            return
        self.disk = readahead.LabDisk(
            INFO.name, self.workdir / "sqlite-device", self.path.parent, readahead.SQLITE_BYTES
        )
        self.disk.create()

    def _remove_files(self) -> None:
        """The database's directory emptied (kept where it is a device's mount point)."""
        if self.disk is None:
            shutil.rmtree(self.path.parent, ignore_errors=True)
            return
        for p in self.path.parent.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)

    def new_file(self) -> None:
        """An empty database file at the path, with the page size asked."""
        conn = apsw.Connection(str(self.path))
        conn.execute(f"PRAGMA page_size={int(self.knobs['page_size'])}")
        conn.execute("VACUUM")  # materialises the file with that page size
        conn.close()

    def connect(self) -> apsw.Connection:
        conn = _DBAPIConnection(str(self.path))
        conn.raw.execute(f"PRAGMA cache_size={int(self.knobs['buffer_pool'])}")
        conn.raw.execute("PRAGMA busy_timeout=60000")
        if self.path.is_symlink():  # a kept table (builds.reuse): read, never written
            conn.raw.execute("PRAGMA query_only=1")
        return conn

    def teardown(self) -> None:
        try:
            if self.disk is not None:
                self.disk.release()  # every connection is closed: nothing holds the mount
                self.disk = None
        finally:
            shutil.rmtree(self.path.parent, ignore_errors=True)

    def _writable(self) -> Path:
        """The file to change; never a kept table a reading point links to."""
        if self.path.is_symlink():
            raise EngineError(f"sqlite: {self.path} is a kept table, read only")
        return self.path

    # -- schema -------------------------------------------------------------------------------
    def create_table(self, table: str, index: IndexPlan) -> None:
        with SetupConnection(self._writable()) as db:
            db.execute(f"DROP TABLE IF EXISTS {table}")
            db.execute(sql.table_ddl(table, index))

    def setup_connection(self) -> SetupConnection:
        """A short-lived connection to the file the point's set-up changes (``SetupConnection``)."""
        return SetupConnection(self._writable())

    def create_index(self, table: str, index: IndexPlan) -> None:
        with SetupConnection(self._writable()) as db:
            for stmt in sql.index_ddl(table, index):
                db.execute(stmt)
            if index.kind == "clustered":
                # Rows arrive in id order, so the key's b-tree splits its pages all over the
                # file: a key's rows sit in scattered pages, read one at a time. VACUUM copies
                # the table in key order, so they sit in adjacent pages, as a clustered index's
                # rows do after a reorganisation (MariaDB's rebuild, PostgreSQL's CLUSTER).
                db.execute("VACUUM")
            db.execute(f"ANALYZE {table}")
            have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
            want = {f"{table}_{index.kind}"} if sql.index_ddl(table, index) else set()
            if not want <= have:
                raise EngineError(f"sqlite: index {sorted(want - have)} missing after CREATE INDEX")

    # -- cache and counters ---------------------------------------------------------------------
    def settle(self) -> None:
        # What the point's setup wrote (a build, a copy of a kept table) may still be dirty in
        # the OS cache: written now, not by the kernel's writeback during a timed repetition.
        for f in self.data_files():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def make_cold(self) -> CacheState:
        # SQLite's page cache lives in each connection: with every connection closed the pool
        # is empty, so what is left is the OS page cache of the database file.
        files = self.data_files()
        method = "close+" + cache.evict(files)
        resident, total = cache.residency(files)
        achieved = "cold" if resident == 0 else "partial"
        return CacheState("cold", achieved, method, resident, total)

    def counters(self, conns: Sequence[Any]) -> dict[str, float]:
        hits = misses = engine_ns = 0
        for c in conns:
            hits += c.raw.status(apsw.SQLITE_DBSTATUS_CACHE_HIT)[0]
            misses += c.raw.status(apsw.SQLITE_DBSTATUS_CACHE_MISS)[0]
            engine_ns += c.statement_ns
        # A miss reads the page from the file through the OS, whose page cache may serve it
        # (INFO.reads): os_read_bytes says what really came from the device.
        return {
            "logical_reads": hits + misses,
            "physical_reads": misses,
            "prefetch_reads": 0,
            "os_read_bytes": _proc_io("read_bytes"),
            "os_write_bytes": _proc_io("write_bytes"),
            "engine_time_ns": engine_ns,
            **(self.disk.counters() if self.disk is not None else {}),
        }

    def applied_knobs(self) -> dict[str, Any]:
        conn = self.connect()
        try:
            page = conn.raw.execute("PRAGMA page_size").fetchone()[0]
            pool = conn.raw.execute("PRAGMA cache_size").fetchone()[0]
        finally:
            conn.close()
        # The index layout is structural: create_table/create_index verify it in the schema.
        device = self.disk.applied() if self.disk is not None else {}
        return {"page_size": page, "buffer_pool": pool, **device}

    def capture_trace(self, run: Any) -> Any:
        # Through a VFS shim with the smallest page cache, so (nearly) every page the
        # workload asks for reaches the file and the trace (engines.sqlite_pagetrace).
        from tunelab.engines import sqlite_pagetrace

        self.make_cold()

        def traced(raw: Any) -> Any:
            return run([_DBAPIConnection(raw=raw)])

        return sqlite_pagetrace.capture_trace(self.path, traced)

    def version(self) -> str:
        return f"SQLite {apsw.sqlite_lib_version()} (apsw {apsw.apsw_version()})"

    def data_files(self) -> list[Path]:
        return [p for p in self.path.parent.glob("lab.db*") if p.is_file()]

    def data_bytes(self, table: str) -> int | None:
        return self.path.stat().st_size if self.path.exists() else None

    def planned_sql(
        self,
        knobs: dict[str, Any],
        dataset: Dataset,
        index: IndexPlan,
        *,
        workload: str | None = None,
        cache: str | None = None,
    ) -> list[str]:
        """See ``abilities.PlannedSQL``."""
        insert = self.dialect.insert_sql(dataset.table)
        return sql.planned(knobs, dataset, index, workload, cache, insert)


def _proc_io(field: str) -> float:
    """This process's storage I/O from /proc/self/io (all threads; the engine is in-process)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return float(value)
    return float("nan")


class _DBAPIConnection:
    """The slice of DB-API the workloads use, over an apsw connection (apsw itself is not
    DB-API: it autocommits and has no commit())."""

    def __init__(self, filename: str = "", raw: apsw.Connection | None = None):
        self.raw = raw if raw is not None else apsw.Connection(filename)
        self._in_tx = False
        # The engine's own time: from a statement's start (exec trace) to its reset (profile
        # hook), on the lab's clock. SQLite's own profile figure has a 1 ms resolution.
        self.statement_ns = 0
        self._started = 0
        self.raw.set_exec_trace(self._starts)
        self.raw.set_profile(self._ends)

    def _starts(self, _cursor: Any, _sql: str, _bindings: Any) -> bool:
        self._started = time.perf_counter_ns()
        return True

    def _ends(self, _sql: str, _nanoseconds: int) -> None:
        self.statement_ns += time.perf_counter_ns() - self._started

    def cursor(self) -> _Cursor:
        return _Cursor(self)

    def _begin(self) -> None:
        if not self._in_tx:
            self.raw.execute("BEGIN")
            self._in_tx = True

    def commit(self) -> None:
        if self._in_tx:
            self.raw.execute("COMMIT")
            self._in_tx = False

    def rollback(self) -> None:
        if self._in_tx:
            self.raw.execute("ROLLBACK")
            self._in_tx = False

    def close(self) -> None:
        self.rollback()
        self.raw.close()


class _Cursor:
    def __init__(self, conn: _DBAPIConnection):
        self.conn = conn
        self._cur = conn.raw.cursor()
        self._rows: Any = iter(())

    def execute(self, sql: str, args: Sequence[Any] = ()) -> _Cursor:
        self.conn._begin()
        self._rows = self._cur.execute(sql, tuple(args))
        return self

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> None:
        self.conn._begin()
        for _ in self._cur.executemany(sql, seq):
            pass

    @property
    def rows(self) -> Any:
        """The apsw cursor's own row iterator (the engine's native fetch path)."""
        return self._rows

    def fetchone(self) -> tuple | None:
        return next(self._rows, None)

    def fetchall(self) -> list[tuple]:
        return list(self._rows)

    def fetchmany(self, size: int) -> list[tuple]:
        out = []
        for row in self._rows:
            out.append(row)
            if len(out) >= size:
                break
        return out

    def close(self) -> None:
        self._cur.close()
