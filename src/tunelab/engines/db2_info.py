"""What the Db2 engine declares without a server: its pinned image, its knobs (with the
Db2 clause each one sets and how it is read back) and the rules across them, the knobs it has
no counterpart for, and what its cold runs, engine time and read counter mean. The engine
that runs it is ``tunelab.engines.db2``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunelab.engines import db2_hadr
from tunelab.engines.base import EngineInfo, ImageSource, Knob, ReadCounter
from tunelab.engines.db2_sql import AUTOMATIC, INDEX_KINDS, PAGE_SIZES, is_automatic
from tunelab.engines.server import ServerKnobRules

# Pinned image (see containers/db2/README.md); TUNELAB_DB2_IMAGE selects another local tag.
IMAGE = "icr.io/db2_community/db2:12.1.5.0"


@dataclass(frozen=True)
class PagesOrAutomatic(Knob):
    """A number of pages in range, or the word ``automatic``."""

    def check(self, value: Any) -> str | None:
        return None if is_automatic(value) else super().check(value)

    def allowed_text(self) -> str:
        return f"{super().allowed_text()}, or {AUTOMATIC}"


INFO = EngineInfo(
    name="db2",
    summary="IBM Db2 Community Edition in its official container (ibm_db / CLI driver); "
    "one buffer pool and automatic storage table space per point",
    knobs={
        "page_size": Knob(
            "page_size",
            "integer",
            "PAGESIZE of a new buffer pool and table space (created in place, equal by "
            "construction)",
            values=PAGE_SIZES,
            unit="bytes",
            default=4096,
            readback="SYSCAT.TABLESPACES and SYSCAT.BUFFERPOOLS PAGESIZE",
        ),
        "buffer_pool": Knob(
            "buffer_pool",
            "integer",
            "CREATE BUFFERPOOL ... IMMEDIATE SIZE n (pages)",
            minimum=2,
            maximum=2_147_483_647,
            unit="pages",
            default=1000,
            readback="SYSCAT.BUFFERPOOLS NPAGES, MON_GET_BUFFERPOOL BP_CUR_BUFFSZ",
        ),
        "extent_size": Knob(
            "extent_size",
            "integer",
            "table space EXTENTSIZE (pages)",
            minimum=2,
            maximum=256,
            unit="pages",
            default=32,
            readback="SYSCAT.TABLESPACES EXTENTSIZE",
        ),
        "prefetch_size": PagesOrAutomatic(
            "prefetch_size",
            "integer",
            "table space PREFETCHSIZE (pages; IBM advises a multiple of extent_size), or AUTOMATIC",
            minimum=1,
            maximum=32767,
            unit="pages",
            default=32,
            readback="SYSCAT.TABLESPACES PREFETCHSIZE (-1: AUTOMATIC)",
        ),
        "overhead_ms": Knob(
            "overhead_ms",
            "number",
            "table space OVERHEAD (optimizer's seek + latency cost; INHERIT when unset)",
            minimum=0,
            unit="ms",
            readback="SYSCAT.TABLESPACES OVERHEAD",
        ),
        "transferrate_ms": Knob(
            "transferrate_ms",
            "number",
            "table space TRANSFERRATE (optimizer's time to read one page; INHERIT when unset)",
            minimum=0,
            unit="ms",
            readback="SYSCAT.TABLESPACES TRANSFERRATE",
        ),
        "direct_io": Knob(
            "direct_io",
            "boolean",
            "true: NO FILE SYSTEM CACHING (direct I/O); false: FILE SYSTEM CACHING",
            default=True,
            readback="MON_GET_TABLESPACE FS_CACHING",
        ),
        "lock_granularity": Knob(
            "lock_granularity",
            "string",
            "ALTER TABLE ... LOCKSIZE ROW|TABLE; table also takes LOCK TABLE ... IN "
            "EXCLUSIVE MODE at the start of each transaction",
            values=("row", "table"),
            default="row",
            readback="SYSCAT.TABLES LOCKSIZE",
        ),
        "sync_mode": Knob(
            "sync_mode",
            "string",
            "none: no standby; otherwise HADR_SYNCMODE of a standby (a second container, "
            "db2_hadr.py, restored from the primary's backup): SYNC (the commit waits for the "
            "standby's log write), NEARSYNC (its receipt), ASYNC (the send), SUPERASYNC "
            "(nothing)",
            values=(db2_hadr.NONE, *db2_hadr.MODES),
            default=db2_hadr.NONE,
            readback="MON_GET_HADR on the primary: HADR_ROLE PRIMARY, HADR_SYNCMODE, "
            "HADR_STATE PEER (REMOTE_CATCHUP for SUPERASYNC), HADR_CONNECT_STATUS CONNECTED",
        ),
        "network_rtt_ms": Knob(
            "network_rtt_ms",
            "number",
            "round trip between primary and standby: delay proxies (host.delayproxy) on the "
            "run network's gateway, between each database and its partner's HADR port, hold "
            "each byte half of it each way; 0: the proxies' hop only",
            minimum=0,
            maximum=1000,
            unit="ms",
            default=0,
            readback="the proxy's delay; MON_GET_HADR's log gap and log time lags are recorded "
            "per repetition",
        ),
        "index": Knob(
            "index",
            "string",
            "none; nonclustered: CREATE INDEX; clustered: CREATE INDEX ... CLUSTER, REORG "
            "TABLE ... INDEX, RUNSTATS; covering: CREATE UNIQUE INDEX ... INCLUDE on a unique "
            "key, else a composite (key, selected columns); covering_wrong_order: (selected "
            "columns, key)",
            values=INDEX_KINDS,
            default="none",
            readback="SYSCAT.INDEXES and SYSCAT.INDEXCOLUSE",
        ),
    },
    notes={
        "read_ahead_threshold": "Db2 prefetch is set per table space: use prefetch_size",
        "random_read_ahead": "Db2 prefetch is set per table space: use prefetch_size",
    },
    needs_container=True,
    image=ImageSource(IMAGE, None, None),  # pulled where a registry is reachable, never built
    cold_steps={
        "force": "applications were forced off",
        "deactivate": "the database was deactivated, emptying its buffer pools",
        "activate": "the database was activated again",
    },
    cold_reads="Db2 reads its table space containers with direct I/O by default (direct_io: "
    "true, NO FILE SYSTEM CACHING): the kernel's read-ahead plays no part, and what reads "
    "ahead is Db2's prefetchers (sequential prefetch of PREFETCHSIZE pages, list prefetch of "
    "the pages an index scan collected). With direct_io: false (FILE SYSTEM CACHING) the "
    "host's page cache, and its read-ahead, come in too",
    engine_time="MON_GET_CONNECTION's TOTAL_RQST_TIME for each timed connection (found by "
    "SYSPROC.MON_GET_APPLICATION_HANDLE()): the server's time on the lab's requests "
    "(compilation of each literal statement, section execution, fetch, commit, and their "
    "I/O and lock waits), without CLIENT_IDLE_WAIT_TIME, the time it waits for the client; "
    "reported in ms",
    reads=ReadCounter(
        "MON_GET_BUFFERPOOL's POOL_DATA_P_READS + POOL_INDEX_P_READS (and the temporary table "
        "spaces' own): pages read from the table space's containers into the buffer pool, the "
        "prefetchers' included; with NO FILE SYSTEM CACHING (direct_io: true, the default) "
        "each read bypasses the OS page cache, with FILE SYSTEM CACHING the OS may serve it",
        direct_knob="direct_io",
    ),
)


class DB2KnobRules(ServerKnobRules):
    def check_point(self, knobs: dict[str, Any]) -> list[tuple[str, str, str]]:
        """(field, message, allowed) for combinations the engine refuses: a round trip without
        a standby to make it to. (A prefetch size that is not a multiple of the extent size is
        legal: ``warn_point``.)"""
        rtt = knobs.get("network_rtt_ms") or 0
        if rtt and not db2_hadr.wants_standby(knobs):
            return [
                (
                    "network_rtt_ms",
                    f"{rtt} ms needs a standby: sync_mode is none",
                    "0, or a sync_mode other than none",
                )
            ]
        return []

    def warn_point(self, knobs: dict[str, Any]) -> list[tuple[str, str]]:
        """(field, message) for combinations Db2 accepts but IBM advises against: a prefetch
        size that is not a multiple of the extent size (the assignment's 4 and 50 pages with
        32)."""
        extent = knobs.get("extent_size", INFO.knobs["extent_size"].default)
        prefetch = knobs.get("prefetch_size", INFO.knobs["prefetch_size"].default)
        if (
            isinstance(prefetch, bool)
            or not isinstance(prefetch, int)
            or not isinstance(extent, int)
        ):
            return []
        if extent > 0 and prefetch % extent:
            advice = f"{extent}, {2 * extent}, {3 * extent}, ... or {AUTOMATIC}"
            msg = f"{prefetch} is not a multiple of extent_size {extent} (IBM advises {advice})"
            return [("prefetch_size", msg)]
        return []
