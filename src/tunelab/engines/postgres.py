"""PostgreSQL 15 (Debian's package) in a container: the open engine whose planner can be steered.
The knob ``engine_version`` runs 17 instead (Debian 13's package), a server of its own.

Knobs: ``page_size`` is PostgreSQL's block size, fixed when the server is compiled (BLCKSZ,
8 KiB for Debian's and the official builds): only that value is accepted. ``buffer_pool`` is
``shared_buffers`` in 8 KiB pages, set at start (a restart). ``io_concurrency`` is
``effective_io_concurrency``, applied in place (settings file, then ``pg_reload_conf()``); it
acts on bitmap heap scans only, which ask the kernel (posix_fadvise) for the heap pages they
will read next: sequential and plain index scans never prefetch, they rely on the kernel's
read-ahead. ``lock_granularity=table`` takes ``LOCK TABLE … IN EXCLUSIVE MODE`` at the start
of every transaction (other writers wait, readers do not). The index layouts are indexes on
the heap: PostgreSQL has no clustered storage, so ``clustered`` is an index the heap is
reordered by once (``CLUSTER``), ``covering`` an index with the selected columns in
``INCLUDE``. After every load and index ``VACUUM (ANALYZE)`` sets the visibility map, so an
index-only scan really leaves the heap alone.

Server settings live in a file in a host directory mounted at /etc/tunelab; the server starts
with ``-c config_file=`` pointing at it, and the file first includes the data directory's own
postgresql.conf (what initdb wrote), then sets the lab's lines: a restart (a cold run) keeps
what was set in place. The data directory is a host directory bind-mounted into the
container, so cold runs can evict its files from the OS page cache and check their
residency. Cold: CHECKPOINT, restart (shared buffers start empty: PostgreSQL never reloads
them), evict the lab's relation files, then check OS residency and ``pg_buffercache``.

Timed statements run as a role of their own (``tunelab``, not a superuser) on connections
that never prepare statements server-side (each execution is planned with its own values,
like the other engines). PostgreSQL has no hints in its own SQL: ``access: forced`` is
realised with the planner's switches (``enable_seqscan``, ``enable_bitmapscan`` …), given to
every connection of the point at connection start (libpq ``options``), so the access path the
``index`` knob built is the cheapest left; ``EXPLAIN (FORMAT JSON)`` shows what each statement
takes and the runner checks it. The engine's own time of each statement comes from
pg_stat_statements (execution plus planning, the lab's role only), and rows arrive through
psycopg's client cursor: libpq reads the whole result before execute() returns, and psycopg's
C extension builds the rows. Writes are rendered before timing (psycopg's literals): one
multi-row INSERT per transaction, or its UPDATEs sent as one message.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunelab.engines import postgres_standby as standby
from tunelab.engines import readahead, server
from tunelab.engines.base import (
    KEYS_ALIAS,
    VERSION_KNOB,
    AccessPath,
    CacheState,
    EngineError,
    EngineInfo,
    ImageSource,
    ImageVersion,
    IndexPlan,
    Knob,
    ReadCounter,
    version_applied,
    version_knob,
)
from tunelab.engines.server import ServerEngine
from tunelab.hadr.model import Ack, Mode, Ordering
from tunelab.host import cache, containers
from tunelab.store.dataset import COLUMN_TYPES, COLUMNS, Dataset

PORT = 5432
DATABASE = "postgres"  # the lab's tables live in the initial database (schema public)
ADMIN_USER = "postgres"  # the superuser the image creates
LAB_ROLE = "tunelab"  # the timed connections' role: not a superuser
DATADIR = "/var/lib/postgresql/data"  # PGDATA of the image (a host directory is mounted here)
CONF_DIR = "/etc/tunelab"  # where the host's settings directory is mounted
CONF_FILE = "postgresql.conf"
BLOCK_SIZE = 8192  # BLCKSZ of Debian's and the official builds
# The real server's, not the official image's init server (that one listens on no TCP port).
READY_LOG = (
    r'listening on IPv4 address "0\.0\.0\.0", port 5432[\s\S]*'
    r"database system is ready to accept connections"
)
INDEX_KINDS = ("none", "nonclustered", "clustered", "covering", "covering_wrong_order")
MAX_SHARED_BUFFERS = (1 << 30) - 1  # pages: PostgreSQL's limit (INT_MAX / 2)
FLUSH_SQL = "SELECT pg_stat_force_next_flush()"

_TYPES = {
    "integer": "INTEGER NOT NULL",
    "char20": "CHAR(20) NOT NULL",
    "char40": "CHAR(40) NOT NULL",
}
# Relation locks that make other writers (ROW EXCLUSIVE) wait: a table-level write lock.
_TABLE_LOCK_MODES = frozenset(
    {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}
)


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


# -- settings ------------------------------------------------------------------------------
def settings(knobs: dict[str, Any], standby_streams: bool = False) -> dict[str, str]:
    """The settings-file lines a set of knobs means (plus the lab's fixed settings), as
    name -> value already quoted for postgresql.conf. The standby is named only once it
    streams (``standby_streams``): before that no commit waits for it."""
    out: dict[str, str] = {"listen_addresses": "'*'"}
    if standby.wants_standby(knobs):
        out["synchronous_commit"] = str(knobs["sync_mode"])
        if standby_streams:
            out["synchronous_standby_names"] = f"'{standby.STANDBY_NAME}'"
    if knobs.get("buffer_pool") is not None:
        out["shared_buffers"] = f"'{int(knobs['buffer_pool']) * BLOCK_SIZE // 1024}kB'"
    out |= {
        "effective_io_concurrency": str(int(knobs.get("io_concurrency", 1))),
        "maintenance_io_concurrency": str(int(knobs.get("maintenance_io_concurrency", 10))),
        # No background reads between points (and no hint-bit or visibility-map writes of
        # its own): the lab runs VACUUM (ANALYZE) itself after every load and index.
        "autovacuum": "off",
        "jit": "off",  # no LLVM compile inside a timed section
        # A batched look-up (key_join) descends the index for every key, a repeated one too,
        # as the statement-per-key look-ups do; Memoize would answer it from its cache.
        "enable_memoize": "off",
        # One process per statement, like the other engines' sessions: parallel workers would
        # add their own processes (and /dev/shm segments) to a timed section.
        "max_parallel_workers_per_gather": "0",
        "shared_preload_libraries": "'pg_stat_statements'",
        "pg_stat_statements.track": "all",
        "pg_stat_statements.track_planning": "on",
        # No checkpoint starts on its own inside a timed section (a timed one, or one that
        # the WAL of a few table builds requests, writes back for minutes): the lab
        # checkpoints itself, untimed, before every warm-up and every cold start (settle).
        "checkpoint_timeout": "'1d'",
        "max_wal_size": "'4GB'",
        "track_io_timing": "on",  # pg_stat_database.blk_read_time
        "track_wal_io_timing": "on",  # pg_stat_wal.wal_write_time and wal_sync_time
    }
    return out


def settings_text(knobs: dict[str, Any], standby_streams: bool = False) -> str:
    lines = [
        "# Written by tunelab; the server reads it with -c config_file=.",
        # What initdb wrote (and the image's own additions) first; the lab's lines win.
        f"include_if_exists '{DATADIR}/postgresql.conf'",
        *(f"{k} = {v}" for k, v in settings(knobs, standby_streams).items()),
    ]
    return "\n".join(lines) + "\n"


def planner_switches(index: IndexPlan) -> dict[str, str]:
    """The planner settings that leave only the access path the index plan built cheap
    (``access: forced``). They add a huge cost to the other paths, not forbid them: the
    runner checks the plan EXPLAIN shows anyway."""
    if index.kind == "none" or not index.key:
        return {
            "enable_indexscan": "off",
            "enable_indexonlyscan": "off",
            "enable_bitmapscan": "off",
        }
    if _covers(index):
        # The index-only scan of the covering index is left cheapest (a plain scan of the same
        # index costs its heap fetches on top). Not enable_indexscan = off: in PostgreSQL 15
        # that disables index-only scans too (cost_index), and a full index-only scan of a
        # covering index in the wrong order then loses to the seq scan, both "disabled".
        return {"enable_seqscan": "off", "enable_bitmapscan": "off"}
    # The index, then the heap: a plain or a bitmap index scan.
    return {"enable_seqscan": "off"}


def _covers(index: IndexPlan) -> bool:
    """A covering kind that has columns to cover (an update's key covers nothing: its index
    is a plain one, and an UPDATE reads the heap anyway)."""
    return index.kind in ("covering", "covering_wrong_order") and bool(
        set(index.include) - set(index.key)
    )


def _rendered(template: str, rows: Sequence[Sequence[Any]]) -> list[str]:
    """The statement once per row, its %s markers replaced by the row's values as SQL
    literals: psycopg's own (its C adapters, the ones sql.Literal uses)."""
    from psycopg.adapt import Transformer

    tx = Transformer()
    parts = template.split("%s")
    out = []
    for row in rows:
        if len(parts) != len(row) + 1:
            raise EngineError(f"postgres: {len(row)} values for the markers of {template[:80]!r}")
        out.append("".join(p + tx.as_literal(v).decode() for p, v in zip(parts, row)) + parts[-1])
    return out


def _dedup(cols: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(cols))


# -- layouts -------------------------------------------------------------------------------
def _has_primary_key(index: IndexPlan) -> bool:
    # A key on id makes the plan's own index the only one on id: a primary key beside it would
    # be a second, equally cheap index on the predicate (and none would not be none).
    return index.kind == "primary" or "id" not in index.key


def _index_spec(table: str, index: IndexPlan) -> dict[str, Any] | None:
    """The one index the plan builds besides the primary key: name, key and INCLUDE columns,
    unique, clustered; the DDL and the expected catalog layout both come from it."""
    if index.kind in ("none", "primary") or not index.key:
        return None
    if index.kind not in INDEX_KINDS:
        raise EngineError(
            f"postgres: unknown index kind {index.kind!r} (allowed: {', '.join(INDEX_KINDS)})"
        )
    extra = tuple(c for c in _dedup(index.include) if c not in index.key)
    key, include = index.key, ()
    if index.kind == "covering":
        include = extra
    elif index.kind == "covering_wrong_order":
        key = _dedup((*extra, *index.key))
    unique = index.key == ("id",) and index.kind != "covering_wrong_order"
    return {
        "name": f"{table}_{index.kind}",
        "key": tuple(key),
        "include": include,
        "unique": unique,
        "primary": False,
        "clustered": index.kind == "clustered",
    }


def table_ddl(table: str, index: IndexPlan) -> str:
    cols = ", ".join(f"{c} {_TYPES[COLUMN_TYPES[c]]}" for c in COLUMNS)
    pk = f", CONSTRAINT {table}_pkey PRIMARY KEY (id)" if _has_primary_key(index) else ""
    return f"CREATE TABLE {table} ({cols}{pk})"


def index_ddl(table: str, index: IndexPlan) -> list[str]:
    """Statements run after the load: the plan's index (and the heap reordered by it)."""
    spec = _index_spec(table, index)
    if spec is None:
        return []
    unique = "UNIQUE " if spec["unique"] else ""
    include = f" INCLUDE ({', '.join(spec['include'])})" if spec["include"] else ""
    out = [f"CREATE {unique}INDEX {spec['name']} ON {table} ({', '.join(spec['key'])}){include}"]
    if spec["clustered"]:
        out.append(f"CLUSTER {table} USING {spec['name']}")
    return out


def copy_csv_sql(table: str) -> str:
    """COPY of the data set's CSV file (its first line names the columns)."""
    return f"COPY {table} ({', '.join(COLUMNS)}) FROM STDIN WITH (FORMAT csv, HEADER true)"


def analyse_sql(table: str) -> str:
    # Sets the visibility map (index-only scans skip the heap) and the planner's statistics.
    return f"VACUUM (ANALYZE) {table}"


def expected_layout(table: str, index: IndexPlan) -> dict[str, dict[str, Any]]:
    """What ``catalog_layout`` shows once ``table_ddl`` and ``index_ddl`` ran."""
    out: dict[str, dict[str, Any]] = {}
    if _has_primary_key(index):
        out[f"{table}_pkey"] = {
            "key": ("id",),
            "include": (),
            "unique": True,
            "primary": True,
            "clustered": False,
        }
    spec = _index_spec(table, index)
    if spec is not None:
        out[spec["name"]] = {k: v for k, v in spec.items() if k != "name"}
    return out


# -- plans ---------------------------------------------------------------------------------
def _scans(node: dict[str, Any]) -> list[str]:
    """The relation accesses below a plan node, in plan order, normalised."""
    kind = node.get("Node Type", "")
    if kind == "Seq Scan":
        return ["scan"]
    if kind in ("Index Scan", "Index Only Scan"):
        base = "index-only" if kind == "Index Only Scan" else "index"
        # No index condition: the whole index walked in key order (e.g. for an ORDER BY).
        detail = (node.get("Scan Direction") or "index").lower()
        if "Index Cond" not in node:
            detail += ",full"
        return [f"{base}:{node.get('Index Name', '?')};{detail}"]
    if kind == "Function Scan" and node.get("Alias") == KEYS_ALIAS:
        return []  # a batched look-up's key list (unnest of its array): reads no table
    if kind in _NOT_PER_KEY:
        # A join that does not look each key up in turn (a hash or merge join reads the
        # whole table or index; Memoize answers a repeated key from its cache): named in the
        # path, so that it never passes for the index look-ups the point asked for.
        return [kind.lower().replace(" ", "-")] + [
            s for child in node.get("Plans", []) for s in _scans(child)
        ]
    if kind == "Bitmap Heap Scan":
        # The bitmap index scan(s) below (under BitmapAnd/BitmapOr), then the heap in
        # block order.
        names = _bitmap_indexes(node)
        return [f"index:{'+'.join(dict.fromkeys(names)) or '?'};bitmap"]
    if kind.endswith("Scan") and "Plans" not in node:
        return [kind.lower().replace(" ", "-")]  # e.g. a TID scan: neither an index nor a scan
    return [s for child in node.get("Plans", []) for s in _scans(child)]


_NOT_PER_KEY = ("Hash Join", "Merge Join", "Memoize")


def _bitmap_indexes(node: dict[str, Any]) -> list[str]:
    own = [node["Index Name"]] if node.get("Node Type") == "Bitmap Index Scan" else []
    return own + [n for child in node.get("Plans", []) for n in _bitmap_indexes(child)]


def normalise_plan(doc: Any) -> str:
    """EXPLAIN (FORMAT JSON) -> scan | index:<name>;<detail> | index-only:<name>;<detail>,
    several accesses joined with ' + '; 'none;<node>' when no relation is read at all."""
    tops = doc if isinstance(doc, list) else [doc]
    paths = [s for top in tops for s in _scans(top.get("Plan", {}))]
    if paths:
        return " + ".join(paths)
    first = tops[0].get("Plan", {}).get("Node Type", "no plan") if tops else "no plan"
    return f"none;{first}"


# synchronous_commit with a synchronous standby, for the HADR calculator (docs/hadr.md).
# The walsender ships only WAL the primary has already flushed, so every wait on the
# standby follows the local flush: `on` costs w + s + w + RTT, `remote_write` w + s + RTT.
# `remote_apply` waits for the standby's replay too: w + s + w + replay + RTT.
REPLICATION = {
    "on": Mode("on", Ordering.FLUSH_THEN_SEND, Ack.REMOTE_FLUSH),
    "remote_apply": Mode("remote_apply", Ordering.FLUSH_THEN_SEND, Ack.REMOTE_APPLY),
    "remote_write": Mode("remote_write", Ordering.FLUSH_THEN_SEND, Ack.REMOTE_WRITE),
    "local": Mode("local", Ordering.FLUSH_THEN_SEND, Ack.NONE),
}


class PostgresEngine(standby.StandbyMixin, ServerEngine):
    info = INFO
    paramstyle = "format"
    replication = REPLICATION
    replication_baseline = "local"
    port = PORT
    database = DATABASE
    admin_database = DATABASE

    def __init__(self, workdir: Path, run_id: str):
        super().__init__(workdir, run_id)
        self._forced: dict[str, str] = {}  # planner switches of access: forced (table_ref)

    @property
    def connect_errors(self) -> tuple[type[BaseException], ...]:  # type: ignore[override]
        import psycopg  # imported here: `tunelab engines` must not need the driver

        return (psycopg.OperationalError,)

    @property
    def datadir(self) -> Path:
        return self.home / "datadir"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    # -- what ServerEngine asks ------------------------------------------------------------
    def container_spec(self) -> containers.ContainerSpec:
        return containers.ContainerSpec(
            image=self.image or "",
            port=PORT,
            env={"POSTGRES_PASSWORD": self.password},
            volumes={str(self.datadir): DATADIR, str(self.conf_dir): CONF_DIR},
            command=["postgres", "-c", f"config_file={CONF_DIR}/{CONF_FILE}"],
            ready_log=READY_LOG,
            ready_timeout_s=120,
            restart_in_place=True,  # the lab's image: SIGUSR1 (the official one: docker restart)
            # SIGINT is PostgreSQL's fast shutdown, as in the official image (SIGTERM would
            # wait for every session to end, and docker would kill it after its timeout).
            stop_signal="SIGINT",
            secrets=(self.password,),
        )

    def _open(
        self,
        user: str,
        autocommit: bool,
        timeout_s: float,
        options: str = "",
        port: int | None = None,
    ) -> Any:
        import psycopg

        assert self.container is not None
        # TCP, never a local socket: to the server's own address, or to a proxy's port
        host, server_port = self.container.client_address()
        return psycopg.connect(
            host="127.0.0.1" if port else host,
            port=port or server_port,
            user=user,
            password=self.password,
            dbname=DATABASE,
            autocommit=autocommit,
            connect_timeout=max(2, round(timeout_s)),
            # Never prepare server-side: every execution is planned with its own values.
            prepare_threshold=None,
            application_name="tunelab",
            **({"options": options} if options else {}),
        )

    def open_connection(self, database: str | None, autocommit: bool, timeout_s: float) -> Any:
        return self._open(ADMIN_USER, autocommit, timeout_s)

    def open_admin(self, port: int) -> Any:
        """An autocommit admin connection to the primary through ``port`` (the proxy's)."""
        return self._open(ADMIN_USER, True, 10, port=port)

    def connect(self) -> Any:
        """A timed connection: the lab's own role, autocommit off, and the planner switches
        of ``access: forced`` set at connection start (no statement of their own)."""
        if self.container is None:
            raise EngineError("postgres: not provisioned")
        options = " ".join(f"-c {k}={v}" for k, v in self._forced.items())
        return server.connect_with_retry(
            lambda timeout: self._open(LAB_ROLE, False, timeout, options),
            self.connect_errors,
            self.info.name,
            self.connect_deadline_s,
        )

    @staticmethod
    def check_point(knobs: dict[str, Any]) -> list[tuple[str, str, str]]:
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

    def write_settings(self, knobs: dict[str, Any]) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.datadir.mkdir(parents=True, exist_ok=True)
        tmp = self.conf_dir / f".{CONF_FILE}.tmp"
        tmp.write_text(settings_text(knobs, self.standby is not None))
        tmp.replace(self.conf_dir / CONF_FILE)  # the directory is mounted: renames show

    # -- the standby (postgres_standby.py) ------------------------------------------------------
    def keep_key(self, knobs: dict[str, Any]) -> str:
        """A server with a standby is never attached by a point without one, nor the reverse."""
        key = super().keep_key(knobs)
        return key + "r" if standby.wants_standby(knobs) else key

    def provision(self, knobs: dict[str, Any]) -> None:
        super().provision(knobs)
        if not standby.wants_standby(self.knobs):
            if self.standby is not None:  # this engine had one for its knobs before
                self.remove_standby()
                self.write_settings(self.knobs)
                self.admin_query("SELECT pg_reload_conf()")
            return
        rtt = float(self.knobs["network_rtt_ms"])
        if self.standby is None and not self.attach_standby(self.knobs):
            shutil.rmtree(self.home / "standby", ignore_errors=True)
            self._standby_file.unlink(missing_ok=True)
            self.start_proxy(rtt)
            self.start_standby(self.knobs)
        elif self.proxy is None or self.proxy.delay_ms != rtt / 2:
            self.start_proxy(rtt)  # the kept one's delay changed, or a new one to reconnect to
        self.wait_streaming(sync=False)
        self.write_settings(self.knobs)  # now naming the standby
        self.admin_query("SELECT pg_reload_conf()")
        self.wait_streaming(sync=True)
        self._wait_setting("synchronous_commit", str(self.knobs["sync_mode"]))
        self.link_rtt_ms = self.measure_link()

    def restart(self) -> None:
        super().restart()
        if self.standby is not None:
            self.wait_streaming(sync=True)  # it reconnects by itself (every 100 ms)

    def remove_container(self) -> None:
        self.remove_standby()  # first: it is the primary's client
        super().remove_container()

    def teardown(self) -> None:
        try:
            super().teardown()  # a kept primary keeps its standby (same run, its own key)
        finally:
            self.park_proxy()

    def apply_in_place(self, knobs: dict[str, Any], changed: set[str]) -> None:
        names = {
            "io_concurrency": "effective_io_concurrency",
            "maintenance_io_concurrency": "maintenance_io_concurrency",
        }
        if not changed & set(names):
            return
        self.admin_query("SELECT pg_reload_conf()")
        for knob in sorted(changed & set(names)):
            self._wait_setting(names[knob], settings(knobs)[names[knob]])

    def _wait_setting(self, name: str, want: str) -> None:
        # The postmaster re-reads the file, then signals every backend: wait until this one
        # shows the value (new connections are forked from the reloaded postmaster).
        deadline = time.monotonic() + 10
        while (got := self._setting(name)) != want:
            if time.monotonic() > deadline:
                errors = self.admin_query(
                    "SELECT sourcefile, sourceline, name, error FROM pg_file_settings "
                    "WHERE error IS NOT NULL"
                )
                raise EngineError(
                    f"postgres: {name} is {got}, not {want}, after a reload"
                    + (f" (settings file errors: {errors})" if errors else "")
                )
            time.sleep(0.05)

    def after_start(self) -> None:
        """The lab's role, its privileges and the extensions the counters read."""
        from psycopg import sql

        admin = self.admin()
        # Only a SCRAM verifier computed here reaches the server, never the password; and
        # neither the statement's text (pg_stat_statements) nor, on an error, the server log
        # keeps even that.
        verifier = admin.pgconn.encrypt_password(
            self.password.encode(), LAB_ROLE.encode(), b"scram-sha-256"
        ).decode()
        self.admin_execute("SET pg_stat_statements.track_utility = off")
        self.admin_execute("SET log_min_error_statement = panic")
        try:
            exists = self.admin_query("SELECT 1 FROM pg_roles WHERE rolname = %s", (LAB_ROLE,))
            verb = "ALTER" if exists else "CREATE"
            stmt = sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(LAB_ROLE), sql.Literal(verifier)
            )
            admin.execute(stmt)
        finally:
            self.admin_execute("RESET pg_stat_statements.track_utility")
            self.admin_execute("RESET log_min_error_statement")
        for stmt in (
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
            "CREATE EXTENSION IF NOT EXISTS pg_buffercache",
            f"GRANT USAGE ON SCHEMA public TO {LAB_ROLE}",
            # Tables the admin creates later are the timed role's to read, write and lock.
            f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO {LAB_ROLE}",
        ):
            self.admin_execute(stmt)

    # -- schema and data ----------------------------------------------------------------------
    def create_table(self, table: str, index: IndexPlan) -> None:
        self.admin_execute(self.drop_table_sql(table))
        self.admin_execute(table_ddl(table, index))
        self.tables.add(table)

    def load(self, table: str, rows: Any, batch: int = 10_000) -> None:
        """Bulk-load rows with COPY (untimed set-up), as the lab's role."""
        conn = self.connect()
        try:
            with (
                conn.cursor() as cur,
                cur.copy(f"COPY {table} ({', '.join(COLUMNS)}) FROM STDIN") as copy,
            ):
                for row in rows:
                    copy.write_row(row)
            conn.commit()
        finally:
            conn.close()

    def bulk_load(self, table: str, source: Any) -> None:
        """COPY of the data set's CSV file as it is (the server parses it), as the lab's role."""
        conn = self.connect()
        try:
            with (
                conn.cursor() as cur,
                cur.copy(copy_csv_sql(table)) as copy,
                open(source.csv, "rb") as f,
            ):
                while block := f.read(1 << 20):
                    copy.write(block)
            conn.commit()
        finally:
            conn.close()

    def create_index(self, table: str, index: IndexPlan) -> None:
        for stmt in index_ddl(table, index):
            self.admin_execute(stmt)
        self.admin_execute(analyse_sql(table))  # VACUUM: autocommit, as the admin connection is
        have, want = self.catalog_layout(table), self.expected_layout(table, index)
        if have != want:
            raise EngineError(f"postgres: {table} has indexes {have}, the plan needs {want}")

    def catalog_layout(self, table: str) -> dict[str, dict[str, Any]]:
        """Every index of the table from pg_index: key and INCLUDE columns in order, unique,
        primary key, and whether the heap was CLUSTERed on it."""
        rows = self.admin_query(
            "SELECT i.relname, x.indnkeyatts, x.indisunique, x.indisprimary, x.indisclustered, "
            "ARRAY(SELECT a.attname FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(n, pos) "
            "JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n ORDER BY k.pos) "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = to_regclass(%s) ORDER BY i.relname",
            (table,),
        )
        return {
            name: {
                "key": tuple(cols[:nkey]),
                "include": tuple(cols[nkey:]),
                "unique": unique,
                "primary": primary,
                "clustered": clustered,
            }
            for name, nkey, unique, primary, clustered, cols in rows
        }

    def expected_layout(self, table: str, index: IndexPlan) -> dict[str, dict[str, Any]]:
        return expected_layout(table, index)

    def lock_granularity_in_effect(self, table: str, table_lock: bool) -> str:
        """A probe transaction on a fresh timed connection takes what a write transaction of
        the workload takes (the table lock, then an UPDATE's lock); pg_locks, read by the
        admin, shows whether it holds a lock that makes other writers wait."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            if table_lock:
                self.lock_table(cur, table)
            cur.execute(f"UPDATE {table} SET balance = balance WHERE false")
            modes = {
                m
                for (m,) in self.admin_query(
                    "SELECT mode FROM pg_locks WHERE pid = %s AND locktype = 'relation' "
                    "AND relation = to_regclass(%s) AND granted",
                    (conn.info.backend_pid, table),
                )
            }
            conn.rollback()
        finally:
            conn.close()
        if not modes:
            raise EngineError(f"postgres: a write transaction on {table} shows no lock")
        # Row: ROW EXCLUSIVE on the table, each row locked by the write itself.
        return "table" if modes & _TABLE_LOCK_MODES else "row"

    def drop_table_sql(self, table: str) -> str:
        return f"DROP TABLE IF EXISTS {table}"

    # -- timed statements ----------------------------------------------------------------------
    def table_ref(self, table: str, index: IndexPlan, access: str) -> str:
        # No hints in PostgreSQL's SQL: the connections of the point get the planner switches
        # (see connect); the statement stays the plain table.
        self._forced = planner_switches(index) if access == "forced" else {}
        return table

    def expected_access(self, table: str, index: IndexPlan) -> str:
        if index.kind in ("covering", "covering_wrong_order") and index.key and not _covers(index):
            return f"index:{self.index_name(table, index)}"  # a plain index: see _covers
        return super().expected_access(table, index)

    def explain(self, conn: Any, sql: str, args: Sequence[Any]) -> AccessPath:
        cur = conn.cursor()
        cur.execute(f"EXPLAIN (FORMAT JSON) {sql}", tuple(args) or None)
        doc = cur.fetchone()[0]
        cur.close()
        if isinstance(doc, str | bytes):
            doc = json.loads(doc)
        return AccessPath(normalise_plan(doc), json.dumps(doc))

    def key_join(self, table: str, table_ref: str, n: int) -> str:
        # The keys as one int4[] parameter: one statement text whatever the keys (one entry in
        # pg_stat_statements), planned with the array's length as unnest's row count; the
        # nested loop takes unnest's rows in the array's order.
        k = KEYS_ALIAS
        return f"unnest(%s::int4[]) AS {k}(id) JOIN {table_ref} ON {table}.id = {k}.id"

    def key_args(self, keys: Sequence[int]) -> tuple:
        # The array's text form, rendered now: psycopg sends a str as it is.
        return ("{" + ",".join(str(int(k)) for k in keys) + "}",)

    def fetch(self, cursor: Any) -> int:
        # psycopg's client cursor: execute() returned once libpq held the whole result (the
        # server never waits for the lab between rows); fetchall builds the rows in C
        # (psycopg_binary) and hands them over.
        return len(cursor.fetchall())

    def write_steps(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[tuple[str, Any]]:
        # psycopg's executemany sends a Bind and an Execute per row (pipeline mode) and adapts
        # each row in the timed section: 72 % of a 10,000-row insert was the client's (0.47 s,
        # against 0.11 s rendered). Rendered now, with psycopg's own literals: one multi-row
        # INSERT per transaction, or the transaction's UPDATEs as one message of statements,
        # each still planned with its own values.
        if sql.lstrip().upper().startswith("INSERT"):
            head, _, values = sql.partition(" VALUES ")
            return [(f"{head} VALUES " + ", ".join(_rendered(values, rows)), None)]
        return [("; ".join(_rendered(sql, rows)), None)]

    # -- locking ---------------------------------------------------------------------------------
    def lock_table(self, cursor: Any, table: str) -> None:
        # Inside the transaction psycopg opens (autocommit off); held until its end.
        cursor.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")

    # -- cache and counters ----------------------------------------------------------------------
    def settle(self) -> None:
        """Checkpoint: the dirty pages of the table just built (and of earlier points) are
        written back now rather than by the checkpointer during the timed repetitions, and
        every repetition after it writes the same full-page images on first touch. With a
        standby, then until it has replayed all of it."""
        self.admin_execute("CHECKPOINT")
        if self.standby is not None:
            self.catch_up()

    def make_cold(self) -> CacheState:
        """Checkpoint, restart (shared buffers start empty), evict the lab's relation files
        from the OS page cache, then check both: OS residency and pg_buffercache."""
        # Dirty pages written now: the shutdown checkpoint is short, nothing left to write back.
        self.admin_execute("CHECKPOINT")
        self.restart()
        files = self.data_files()
        method = "restart+" + cache.evict(files)
        resident, total = cache.residency(files)
        in_pool = self.pool_pages()
        achieved = "cold" if resident == 0 and in_pool == 0 else "partial"
        return CacheState("cold", achieved, method, resident, total)

    def _relations(self) -> list[tuple[int, str]]:
        """(oid, file path relative to the data directory) of the lab's tables, their
        indexes, TOAST tables and TOAST indexes."""
        if not self.tables:
            return []
        return self.admin_query(
            "WITH t AS (SELECT c.oid, c.reltoastrelid FROM pg_class c "
            "  WHERE c.oid IN (SELECT to_regclass(n) FROM unnest(%s::text[]) n)), "
            "r AS (SELECT oid FROM t "
            "  UNION SELECT reltoastrelid FROM t WHERE reltoastrelid <> 0 "
            "  UNION SELECT indexrelid FROM pg_index WHERE indrelid IN "
            "    (SELECT oid FROM t UNION SELECT reltoastrelid FROM t)) "
            "SELECT oid::int8, pg_relation_filepath(oid) FROM r ORDER BY 1",
            (sorted(self.tables),),
        )

    def pool_pages(self) -> int:
        """Buffers in shared_buffers that hold pages of the lab's relations."""
        oids = [oid for oid, _ in self._relations()]
        if not oids:
            return 0
        rows = self.admin_query(
            "SELECT count(*) FROM pg_buffercache b JOIN pg_class c "
            "ON b.relfilenode = pg_relation_filenode(c.oid) "
            "WHERE b.reldatabase = (SELECT oid FROM pg_database WHERE datname = "
            "current_database()) AND c.oid = ANY(%s::oid[])",
            (oids,),
        )
        return int(rows[0][0])

    def _flush_stats(self, conn: Any) -> None:
        """PostgreSQL 15 keeps a backend's statistics in the backend until it is idle, and
        then flushes them at most once a second: forced, they reach shared memory before the
        connection reports ready. Run in autocommit (no COMMIT of its own to time)."""
        from psycopg.pq import TransactionStatus

        status = conn.info.transaction_status
        if status == TransactionStatus.INTRANS:
            conn.commit()  # what the transaction read is counted once it has ended
        elif status != TransactionStatus.IDLE:
            raise EngineError(f"postgres: a timed connection is {status.name}, not idle")
        conn.autocommit = True
        try:
            conn.execute(FLUSH_SQL)
        finally:
            conn.autocommit = False

    def counters(self, conns: Sequence[Any]) -> dict[str, float]:
        for conn in conns:
            self._flush_stats(conn)
        # The admin's own too: its VACUUM (ANALYZE) reads the whole table, and flushed lazily
        # those reads could land in a warm point's delta.
        self.admin_query(FLUSH_SQL)
        heap_read, heap_hit, idx_read, idx_hit = self.admin_query(
            # The table's idx_* columns already sum its indexes (pg_statio_user_indexes).
            "SELECT COALESCE(sum(heap_blks_read), 0), COALESCE(sum(heap_blks_hit), 0), "
            "COALESCE(sum(idx_blks_read), 0), COALESCE(sum(idx_blks_hit), 0) "
            "FROM pg_statio_user_tables WHERE schemaname = 'public' AND relname = ANY(%s)",
            (sorted(self.tables),),
        )[0]
        read_ms, deadlocks, commits, rollbacks = self.admin_query(
            "SELECT blk_read_time, deadlocks, xact_commit, xact_rollback FROM pg_stat_database "
            "WHERE datname = current_database()"
        )[0]
        # The cluster's WAL (every backend's, the background writers' too; flushed with the
        # backends' statistics above): bytes, the write(2) calls that wrote it (a commit's
        # flush, or a full WAL buffer), the fsyncs, their time in ms (track_wal_io_timing).
        wal = self.admin_query(
            "SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full, wal_write, wal_sync, "
            "wal_write_time, wal_sync_time FROM pg_stat_wal"
        )[0]
        records, fpi, wal_bytes, buffers_full, writes, syncs, write_ms, sync_ms = map(float, wal)
        # Reads include the planner's: it reads each b-tree's metapage (its height) once per
        # backend. PostgreSQL 15 counts no lock waits (log_lock_waits only logs them).
        return {
            "logical_reads": float(heap_read + heap_hit + idx_read + idx_hit),
            # Blocks read into shared buffers: each one a read(2), which the OS page cache may
            # serve (cold runs evict the files first, and check).
            "physical_reads": float(heap_read + idx_read),
            # PostgreSQL 15 reads no page into shared buffers ahead of its use (a bitmap heap
            # scan's prefetch only warms the OS cache; pg_stat_io comes with 16): every
            # physical read is a synchronous one.
            "prefetch_reads": 0.0,
            "pg_heap_blks_read": float(heap_read),
            "pg_heap_blks_hit": float(heap_hit),
            "pg_idx_blks_read": float(idx_read),
            "pg_idx_blks_hit": float(idx_hit),
            # The whole database's, every session's (the lab's admin queries too): the time
            # read(2) calls into shared buffers took (track_io_timing), which a bitmap heap
            # scan's prefetch shortens where the kernel read the page ahead.
            "pg_blk_read_time_ms": float(read_ms),
            "read_wait_ms": float(read_ms),
            "pg_deadlocks": float(deadlocks),
            "pg_xact_commit": float(commits),
            "pg_xact_rollback": float(rollbacks),
            "log_bytes": wal_bytes,
            "log_writes": writes,
            "log_syncs": syncs,
            "log_write_time_ms": write_ms + sync_ms,
            "pg_wal_records": records,
            "pg_wal_fpi": fpi,
            "pg_wal_buffers_full": buffers_full,
            "pg_wal_write_time_ms": write_ms,
            "pg_wal_sync_time_ms": sync_ms,
            "engine_time_ns": self._statement_ns(),
            **self.disk_counters(),
        }

    def gauges(self) -> dict[str, float]:
        return self.replication_lags() if self.standby is not None else {}

    def _statement_ns(self) -> float:
        """The server's own time in ns (pg_stat_statements: execution plus planning) of every
        top-level statement the lab's role ran, but the forced statistics flushes. The
        statements' entries are written when they end (a SELECT's at its portal's end: the
        next statement or the COMMIT), before the client hears back."""
        rows = self.admin_query(
            "SELECT COALESCE(sum(s.total_exec_time + s.total_plan_time), 0) "
            "FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid "
            "WHERE r.rolname = %s AND s.toplevel AND s.query <> %s",
            (LAB_ROLE, FLUSH_SQL),
        )
        return float(rows[0][0]) * 1e6

    def applied_knobs(self) -> dict[str, Any]:
        names = [
            "block_size",
            "shared_buffers",
            "effective_io_concurrency",
            "maintenance_io_concurrency",
            "autovacuum",
            "jit",
            "enable_memoize",
            "max_parallel_workers_per_gather",
        ]
        rows = self.admin_query(
            "SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", (names,)
        )
        v = {name: (setting, unit) for name, setting, unit in rows}
        if v["shared_buffers"][1] != "8kB":
            raise EngineError(f"postgres: shared_buffers is in {v['shared_buffers'][1]!r} units")
        applied: dict[str, Any] = {
            "page_size": int(v["block_size"][0]),
            "buffer_pool": int(v["shared_buffers"][0]),
            "io_concurrency": int(v["effective_io_concurrency"][0]),
            "maintenance_io_concurrency": int(v["maintenance_io_concurrency"][0]),
            # Not knobs, recorded with them: the lab's fixed settings as the server has them.
            "pg_shared_buffers": self._setting("shared_buffers"),
            "pg_autovacuum": v["autovacuum"][0],
            "pg_jit": v["jit"][0],
            "pg_enable_memoize": v["enable_memoize"][0],
            "pg_max_parallel_workers_per_gather": int(v["max_parallel_workers_per_gather"][0]),
        }
        if self.knobs.get("buffer_pool") is None:
            applied.pop("buffer_pool")  # not asked: the server's default stays unchecked
        if VERSION_KNOB in self.knobs:  # "17.12 (Debian 17.12-0+deb13u1)": 17
            number = re.match(r"[0-9.]*", self._setting("server_version")).group(0)
            applied[VERSION_KNOB] = version_applied(INFO, number.rstrip("."))
        return applied | self._applied_replication() | self.disk_applied()

    def _applied_replication(self) -> dict[str, Any]:
        """sync_mode as the primary has it: synchronous_commit, with the standby streaming as
        the synchronous one (else "none"); network_rtt_ms as the proxy holds it."""
        names = self._setting("synchronous_standby_names")
        if not names:
            return {"sync_mode": standby.NONE, "network_rtt_ms": 0}
        state = self.replication_state()
        if state != ("streaming", "sync"):
            raise EngineError(
                f"postgres: the standby is not the synchronous one streaming "
                f"(pg_stat_replication: {state or 'none connected'})"
            )
        return {
            "sync_mode": self._setting("synchronous_commit"),
            "network_rtt_ms": 2 * self.proxy.delay_ms if self.proxy is not None else None,
            "pg_synchronous_standby_names": names,
        }

    def _setting(self, name: str) -> str:
        return str(self.admin_query("SELECT current_setting(%s)", (name,))[0][0])

    def version(self) -> str:
        return f"PostgreSQL {self._setting('server_version')} ({self.image})"

    def data_files(self) -> list[Path]:
        """Host paths of every file of the lab's relations: main fork segments (.1, .2 ...),
        free space and visibility maps. The data directory belongs to the container's
        postgres user (mode 0700): the lab reads it as root."""
        rels = self._relations()
        if rels and not os.access(self.datadir, os.R_OK | os.X_OK):
            raise EngineError(
                f"postgres: cannot read the data directory {self.datadir} (owned by uid "
                f"{self.datadir.stat().st_uid}, the container's postgres user): cold runs "
                "evict and check its files, which needs the lab to run as root"
            )
        out: list[Path] = []
        for _, rel in rels:
            base = self.datadir / rel
            forks = {base, *base.parent.glob(f"{base.name}.*"), *base.parent.glob(f"{base.name}_*")}
            out += sorted(p for p in forks if p.is_file())
        return out

    def data_bytes(self, table: str) -> int | None:
        rows = self.admin_query(
            "SELECT pg_relation_size(r) + pg_indexes_size(r) FROM to_regclass(%s) r", (table,)
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    # -- review ---------------------------------------------------------------------------------
    def planned_sql(
        self,
        knobs: dict[str, Any],
        dataset: Dataset,
        index: IndexPlan,
        *,
        workload: str | None = None,
        cache: str | None = None,
    ) -> list[str]:
        """See ``Engine.planned_sql``."""
        full = self.full_knobs(knobs)
        table = dataset.table
        writes = workload in ("insert", "update")
        lines = "; ".join(f"{k} = {v}" for k, v in settings(full).items())
        out = readahead.planned(full, "the data directory")
        out += [
            f"-- container tunelab/postgres (or the official image), postgres -c "
            f"config_file={CONF_DIR}/{CONF_FILE}, a file of include_if_exists "
            f"'{DATADIR}/postgresql.conf'; {lines}",
        ]
        if "io_concurrency" in full or "maintenance_io_concurrency" in full:
            out.append("SELECT pg_reload_conf()  -- when only in-place settings change")
        switches = " ".join(f"-c {k}={v}" for k, v in planner_switches(index).items())
        out.append(f"-- with access: forced, every lab connection starts with options '{switches}'")
        if writes:
            out.append("-- every repetition, untimed: the table built again")
        out += [self.drop_table_sql(table), table_ddl(table, index)]
        if workload != "insert":
            out.append(f"{copy_csv_sql(table)}  -- {dataset.rows} rows, the data set's CSV file")
        out += [*index_ddl(table, index), analyse_sql(table)]
        if workload == "insert":
            out[-1] += "  -- the empty table: the timed inserts maintain the index"
        if workload is not None and workload != "insert":
            out.append("EXPLAIN (FORMAT JSON) <statement>  -- before timing, each distinct one")
        if full.get("lock_granularity") == "table":
            out.append(
                f"LOCK TABLE {table} IN EXCLUSIVE MODE; ...; COMMIT  -- every write transaction"
            )
        out.append(f"{FLUSH_SQL}  -- on each timed connection before its counters are read")
        cold = "cold" if cache == "cold" else "cold points"
        if cache in (None, "cold"):
            out += [
                f"CHECKPOINT  -- {cold}",
                f"-- {cold}: restart (shared buffers start empty), evict the relation files, "
                "check OS residency and pg_buffercache",
            ]
        if cache in (None, "warm"):
            what = f"SELECT * FROM {table}" if writes else "the timed statements"
            warm = "warm" if cache == "warm" else "warm points"
            out.append(f"-- {warm}: {what} once, untimed, on the timed connections")
        return out
