"""What the PostgreSQL engine declares without a server: its image and versions, its knobs
(with what each one sets and how it is read back) and the rule across them, the knobs it has
no counterpart for, and what its cold runs, engine time and read counter mean.
``tunelab engines`` and the sweep schema read it; the engine that runs it is
``tunelab.engines.postgres``."""

from __future__ import annotations

from typing import Any

from tunelab.engines import postgres_standby as standby
from tunelab.engines import readahead
from tunelab.engines.base import (
    EngineInfo,
    ImageSource,
    ImageVersion,
    Knob,
    ReadCounter,
    version_knob,
)
from tunelab.engines.postgres_sql import BLOCK_SIZE, INDEX_KINDS
from tunelab.engines.server import ServerKnobRules

MAX_SHARED_BUFFERS = (1 << 30) - 1  # pages: PostgreSQL's limit (INT_MAX / 2)


class _BlockSize(Knob):
    """The page size: one allowed value, and the reason in the refusal."""

    def check(self, value: Any) -> str | None:
        if value in (self.values or ()):
            return None
        return (
            "not allowed: PostgreSQL's block size (BLCKSZ) is fixed when it is compiled, "
            f"and this server's is {BLOCK_SIZE}"
        )


# PostgreSQL 15 by default; 17 (knob engine_version) from the next Debian release's package.
IMAGE = ImageSource(
    "postgres:15",
    "tunelab/postgres:local",
    "postgres/build.sh",
    versions=(
        ImageVersion("15", "bookworm", "postgres:15"),
        ImageVersion("17", "trixie", "postgres:17"),
    ),
)

INFO = EngineInfo(
    name="postgres",
    summary="PostgreSQL 15 (or 17: engine_version) in a container (Docker, psycopg 3); planner "
    "switches force the access path",
    knobs={
        "page_size": _BlockSize(
            "page_size",
            "integer",
            "BLCKSZ is fixed when PostgreSQL is compiled: only the server's block size "
            "(SHOW block_size) is accepted",
            values=(BLOCK_SIZE,),
            unit="bytes",
            default=BLOCK_SIZE,
            readback="SHOW block_size",
        ),
        "buffer_pool": Knob(
            "buffer_pool",
            "integer",
            "shared_buffers = pages x 8 KiB, set at start (a restart); a sequential scan of a "
            "table larger than a quarter of shared_buffers reads through a 256 KiB ring, so "
            "it never fills the pool",
            minimum=16,
            maximum=MAX_SHARED_BUFFERS,
            unit="pages",
            restart=True,
            readback="pg_settings: shared_buffers (in 8 kB units)",
        ),
        "io_concurrency": Knob(
            "io_concurrency",
            "integer",
            "effective_io_concurrency, in place (settings file, pg_reload_conf()): how many "
            "heap pages a bitmap heap scan asks the kernel to prefetch (posix_fadvise); "
            "sequential and plain index scans never prefetch (kernel read-ahead only); 0: off",
            minimum=0,
            maximum=1000,
            default=1,
            readback="SHOW effective_io_concurrency",
        ),
        "maintenance_io_concurrency": Knob(
            "maintenance_io_concurrency",
            "integer",
            "maintenance_io_concurrency, in place (settings file, pg_reload_conf()): the "
            "prefetch depth of work done for many sessions (in 15: recovery's prefetch and the "
            "heap pages an index's tuple deletion reads); no query's read uses it",
            minimum=0,
            maximum=1000,
            default=10,
            readback="SHOW maintenance_io_concurrency",
        ),
        readahead.NAME: readahead.knob(
            "the data directory (a sequential scan reads block after block and relies on it)"
        ),
        "lock_granularity": Knob(
            "lock_granularity",
            "string",
            "row: PostgreSQL's row locks (a writer holds ROW EXCLUSIVE on the table); table: "
            "LOCK TABLE ... IN EXCLUSIVE MODE at the start of each transaction (other writers "
            "wait, readers do not)",
            values=("row", "table"),
            default="row",
            readback="pg_locks of a probe transaction on the table",
        ),
        "sync_mode": Knob(
            "sync_mode",
            "string",
            "none: no standby; otherwise a streaming standby (a second container, "
            "postgres_standby.py) named in synchronous_standby_names, and synchronous_commit = "
            "this value: off, local (the local flush only), remote_write (the standby has "
            "written the WAL), on (it has flushed it), remote_apply (it has replayed it)",
            values=(standby.NONE, "off", "local", "remote_write", "on", "remote_apply"),
            default=standby.NONE,
            readback="SHOW synchronous_commit; pg_stat_replication: state streaming, "
            "sync_state sync",
        ),
        "network_rtt_ms": Knob(
            "network_rtt_ms",
            "number",
            "round trip between primary and standby: a delay proxy (tunelab.host.delayproxy) on "
            "127.0.0.1 holds each byte half of it each way; 0: the proxy's hop only",
            minimum=0,
            maximum=1000,
            unit="ms",
            default=0,
            readback="the proxy's delay; the standby's write, flush and replay lags are "
            "recorded per repetition",
        ),
        "index": Knob(
            "index",
            "string",
            "none; nonclustered: CREATE INDEX (key); clustered: CREATE INDEX (key), then "
            "CLUSTER ... USING it (the heap is reordered once; later writes do not keep the "
            "order); covering: CREATE INDEX (key) INCLUDE (selected columns); "
            "covering_wrong_order: (selected columns, key); unique on id, which then replaces "
            "the primary key; VACUUM (ANALYZE) after, so index-only scans skip the heap",
            values=INDEX_KINDS,
            default="none",
            readback="pg_index: key and INCLUDE columns, unique, indisclustered",
        ),
        "engine_version": version_knob(
            IMAGE,
            "the server's major version, each a server of its own: 15 (the default, Debian "
            "12's postgresql-15) or 17 (Debian 13's postgresql-17), the image of the Debian "
            "release that packages it; the lab's settings and counters are the same in both",
        ),
    },
    notes={
        "direct_io": "PostgreSQL 15 always reads through the OS page cache (debug_io_direct "
        "exists from PostgreSQL 16 only)",
        "prefetch_size": "PostgreSQL has no such knob: sequential scans rely on the kernel's "
        "read-ahead; use io_concurrency (effective_io_concurrency, bitmap heap scans)",
        "extent_size": "PostgreSQL has no extents: relations grow a block at a time and "
        "sequential scans rely on the kernel's read-ahead",
        "read_ahead_threshold": "PostgreSQL has no read-ahead of its own: sequential scans rely "
        "on the kernel's (os_read_ahead); use io_concurrency (effective_io_concurrency, bitmap "
        "heap scans)",
        "random_read_ahead": "PostgreSQL has no read-ahead of its own: sequential scans rely "
        "on the kernel's; use io_concurrency (effective_io_concurrency, bitmap heap scans)",
        "overhead_ms": "the closest are the planner's seq_page_cost and random_page_cost, "
        "relative costs rather than the lab's times",
        "transferrate_ms": "the closest are the planner's seq_page_cost and random_page_cost, "
        "relative costs rather than the lab's times",
    },
    needs_container=True,
    image=IMAGE,
    cold_steps={"restart": "the server was restarted, with no buffer-pool dump or load"},
    cold_reads="PostgreSQL reads each 8 KiB block it misses with read(2) through the OS page "
    "cache, and the kernel reads ahead of it: blocks read forward close to those read before "
    "count as a sequential stream, whose read-ahead window grows to the device's "
    "read_ahead_kb; a bitmap heap scan also asks the kernel for the blocks it will read "
    "next (posix_fadvise WILLNEED, up to effective_io_concurrency ahead)",
    engine_time="pg_stat_statements: total_exec_time + total_plan_time (ms) of every top-level "
    "statement the lab's role (tunelab) ran, i.e. the timed connections (the lab's own counter "
    "queries run as another role, and the statistics flush each reading forces is left out): "
    "each statement from the executor's start to its end (rows sent included), plus its "
    "planning; parsing and the protocol's round trips are not in it",
    reads=ReadCounter(
        "blocks read into shared buffers (pg_statio_user_tables heap_blks_read + "
        "idx_blks_read, like pg_stat_database's blks_read): each a read(2) of the relation's "
        "file, which the OS page cache may serve (PostgreSQL 15 has no direct I/O)"
    ),
)


class PostgresKnobRules(ServerKnobRules):
    def check_point(self, knobs: dict[str, Any]) -> list[tuple[str, str, str]]:
        rtt = knobs.get("network_rtt_ms") or 0
        if rtt and not standby.wants_standby(knobs):
            return [
                (
                    "network_rtt_ms",
                    f"{rtt} ms needs a standby: sync_mode is none",
                    "0, or a sync_mode other than none",
                )
            ]
        return []
