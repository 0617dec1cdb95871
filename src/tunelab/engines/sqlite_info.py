"""What the SQLite engine declares: its knobs (with what each one sets and how it is read
back) and what this host must give them, the knobs it has no counterpart for, and what its
cold runs, engine time and read counter mean. The engine that runs it is
``tunelab.engines.sqlite``."""

from __future__ import annotations

from typing import Any

import apsw

from tunelab.engines import readahead
from tunelab.engines.base import EngineInfo, Knob, ReadCounter
from tunelab.engines.knob_rules import KnobRules

INFO = EngineInfo(
    name="sqlite",
    summary=f"SQLite {apsw.sqlite_lib_version()} embedded (apsw), one database file per point",
    knobs={
        "page_size": Knob(
            "page_size",
            "integer",
            "PRAGMA page_size on a fresh database file",
            minimum=512,
            maximum=65536,
            power_of_two=True,
            unit="bytes",
            fresh=True,
            default=4096,
            readback="PRAGMA page_size",
        ),
        "buffer_pool": Knob(
            "buffer_pool",
            "integer",
            "PRAGMA cache_size (pages of the connection's page cache)",
            minimum=1,
            maximum=10_000_000,
            unit="pages",
            default=2000,
            readback="PRAGMA cache_size on a timed connection",
        ),
        "index": Knob(
            "index",
            "string",
            "none; nonclustered: CREATE INDEX; clustered: WITHOUT ROWID table keyed on "
            "(attribute, id), VACUUM after the load; covering: composite index (attribute, "
            "selected columns); "
            "covering_wrong_order: (selected columns, attribute)",
            values=("none", "nonclustered", "clustered", "covering", "covering_wrong_order"),
            default="none",
            readback="PRAGMA index_list / index_info",
        ),
        "lock_granularity": Knob(
            "lock_granularity",
            "string",
            "SQLite locks the whole database file, not rows or tables, for each write "
            "transaction: database only",
            values=("database",),
            default="database",
            readback="a second connection cannot begin a write while one holds it",
        ),
        readahead.NAME: readahead.knob("the database file"),
    },
    notes={
        "prefetch_size": "SQLite reads pages on demand; the kernel reads ahead for it: "
        "os_read_ahead",
        "read_ahead_threshold": "SQLite has no read-ahead of its own; the kernel's is "
        "os_read_ahead",
        "direct_io": "SQLite always goes through the OS page cache",
        "overhead_ms": "SQLite's planner has no I/O cost knobs",
        "transferrate_ms": "SQLite's planner has no I/O cost knobs",
    },
    needs_container=False,
    traces=True,
    cold_steps={
        "close": "every connection was closed (SQLite's page cache lives in the connection)",
    },
    cold_reads="SQLite reads each page it misses with read(2) through the OS page cache, and "
    "the kernel reads ahead of it: reads that move forward through the file close to the "
    "pages read before count as a sequential stream, whose read-ahead window grows to the "
    "device's read_ahead_kb (os_read_ahead sets it). A non-clustered index returns its rows "
    "in rowid order, the file's own, so one cold query through it can bring in most of the "
    "file, far more than the pages it asked for",
    engine_time="apsw's statement hooks (exec trace to profile callback): each statement from "
    "its start to its reset; SQLite runs in the client process, so this includes apsw "
    "turning its rows into Python tuples between steps",
    reads=ReadCounter(
        "page-cache misses (SQLITE_DBSTATUS_CACHE_MISS of each timed connection): pages "
        "SQLite read from the database file through the OS, whose page cache may serve them; "
        "what reached the device is the process's read_bytes (/proc/self/io)"
    ),
)


class SQLiteKnobRules(KnobRules):
    def host_refusals(self, knobs: dict[str, Any]) -> list[tuple[str, str]]:
        return readahead.refusals(INFO.name, knobs)
