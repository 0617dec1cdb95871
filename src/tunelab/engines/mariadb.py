"""MariaDB / InnoDB in a container: the open stand-in whose knobs match DB2's best.

Knobs are InnoDB's own: ``innodb_page_size`` (fixed when a data directory is created, so a
new page size means a fresh datadir), ``innodb_buffer_pool_size`` (resized in place), linear
and random read-ahead (in place), ``innodb_flush_method=O_DIRECT`` (restart), table locks
with ``LOCK TABLES … WRITE``, and the index layouts (a primary key on the attribute clusters
the rows). The data directory is a host directory bind-mounted into the container, so cold
runs can evict its files from the OS page cache and check their residency.

Server options live in an option file in a host directory mounted into the container and
passed with ``--defaults-extra-file``: a restart (cold run) keeps what was set in place.

Timed statements: ``FORCE INDEX`` / ``IGNORE INDEX`` pin the access path the ``index`` knob
built (``access: forced``), ``EXPLAIN FORMAT=JSON`` says which path each statement takes, the
engine's own time of each statement comes from performance_schema (statement instruments
only), and rows arrive through mysqlclient's buffered cursor: the C client library reads the
whole result at once, so the server never waits for the lab between rows.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunelab.engines import mariadb_replica as replica
from tunelab.engines import readahead
from tunelab.engines.base import (
    KEYS_ALIAS,
    AccessPath,
    CacheState,
    EngineError,
    EngineInfo,
    ImageSource,
    IndexPlan,
    Knob,
    ReadCounter,
)
from tunelab.engines.server import ServerEngine, connect_with_retry
from tunelab.hadr.model import Ack, Mode, Ordering
from tunelab.host import cache, containers
from tunelab.store.dataset import COLUMN_TYPES, COLUMNS, Dataset

PORT = 3306
DATABASE = "tunelab"
CONF_DIR = "/etc/tunelab"  # where the host's option-file directory is mounted
CONF_FILE = "knobs.cnf"
DATADIR = "/var/lib/mysql"
READY_LOG = r"ready for connections\.\s*\n.*port: 3306"  # not the init server's (port: 0)
MIB = 1 << 20
# InnoDB keeps innodb_buffer_pool_size in whole MiB (it truncates the rest) and refuses to
# start below a floor that grows with the page size (measured on MariaDB 10.11.19:
# "innodb_page_size=65536 requires innodb_buffer_pool_size >= 21 MiB").
MIN_POOL_MIB = {4096: 2, 8192: 3, 16384: 6, 32768: 11, 65536: 21}
PAGE_SIZES = tuple(MIN_POOL_MIB)
INDEX_KINDS = ("none", "nonclustered", "clustered", "covering", "covering_wrong_order")

_TYPES = {"integer": "INT NOT NULL", "char20": "CHAR(20) NOT NULL", "char40": "CHAR(40) NOT NULL"}

# Cumulative SHOW GLOBAL STATUS counters -> the lab's common counter names.
_STATUS = {
    "Innodb_buffer_pool_read_requests": "logical_reads",
    "Innodb_pages_read": "physical_reads",  # every page read from disk, read-ahead included
    "Innodb_buffer_pool_read_ahead": "prefetch_reads",  # linear and random read-ahead pages
    "Innodb_buffer_pool_read_ahead_evicted": "prefetch_evicted",
    "Innodb_data_read": "data_read_bytes",
    "Innodb_row_lock_waits": "lock_waits",
    "Innodb_row_lock_time": "lock_wait_time_ms",
    "Innodb_buffer_pool_reads": "innodb_buffer_pool_reads",  # synchronous misses only
    "Innodb_buffer_pool_read_ahead_rnd": "innodb_read_ahead_rnd",
    "Innodb_data_reads": "innodb_data_reads",
    "Innodb_data_written": "innodb_data_written",
    # The redo log: bytes written and the writes that wrote them (a commit's flush with
    # innodb_flush_log_at_trx_commit = 1; 10.11 no longer counts the log's fsyncs apart);
    # the binary log's, 0 while it is off.
    "Innodb_os_log_written": "log_bytes",
    "Innodb_log_writes": "log_writes",
    "Binlog_bytes_written": "mariadb_binlog_bytes",
    "Binlog_group_commits": "mariadb_binlog_group_commits",
    "Innodb_pages_written": "innodb_pages_written",
    "Table_locks_waited": "mariadb_table_locks_waited",
}

INFO = EngineInfo(
    name="mariadb",
    summary="MariaDB / InnoDB in a container (Docker); the open stand-in for DB2's knobs",
    knobs={
        "page_size": Knob(
            "page_size",
            "integer",
            "innodb_page_size, on a fresh data directory",
            values=PAGE_SIZES,
            unit="bytes",
            fresh=True,
            default=16384,
            readback="SHOW GLOBAL VARIABLES innodb_page_size",
        ),
        "buffer_pool": Knob(
            "buffer_pool",
            "integer",
            "innodb_buffer_pool_size = pages x page_size, resized in place; InnoDB keeps whole "
            "MiB and needs at least 2/3/6/11/21 MiB at 4/8/16/32/64 KiB pages",
            minimum=min(mib * MIB // p for p, mib in MIN_POOL_MIB.items()),
            unit="pages",
            readback="innodb_buffer_pool_size / innodb_page_size",
        ),
        "read_ahead_threshold": Knob(
            "read_ahead_threshold",
            "integer",
            "innodb_read_ahead_threshold: sequential pages of an extent that trigger linear "
            "read-ahead of the next extent (0 turns it off)",
            minimum=0,
            maximum=64,
            default=56,
            readback="innodb_read_ahead_threshold",
        ),
        "random_read_ahead": Knob(
            "random_read_ahead",
            "boolean",
            "innodb_random_read_ahead",
            default=False,
            readback="innodb_random_read_ahead",
        ),
        "lock_granularity": Knob(
            "lock_granularity",
            "string",
            "row: InnoDB row locks; table: LOCK TABLES ... WRITE around every transaction",
            values=("row", "table"),
            default="row",
            readback="SHOW OPEN TABLES (In_use) while a probe transaction holds the lock; "
            "information_schema.TABLES ENGINE for InnoDB's row locks",
        ),
        "index": Knob(
            "index",
            "string",
            "none; nonclustered: secondary index; clustered: PRIMARY KEY (attribute, id), "
            "rebuilt after the load; covering: composite (attribute, selected columns); "
            "covering_wrong_order: (selected columns, attribute)",
            values=INDEX_KINDS,
            default="none",
            readback="information_schema.STATISTICS",
        ),
        "direct_io": Knob(
            "direct_io",
            "boolean",
            "innodb_flush_method=O_DIRECT (true) or fsync (false, reads use the OS cache)",
            restart=True,
            default=True,
            readback="innodb_flush_method",
        ),
        readahead.NAME: readahead.knob(
            "the data directory (InnoDB's reads meet it only with direct_io: false: O_DIRECT "
            "bypasses the page cache and its read-ahead)"
        ),
        "sync_mode": Knob(
            "sync_mode",
            "string",
            "none: no replica (and no binary log); otherwise a replica (a second container, "
            "mariadb_replica.py) of the primary's binary log (ROW, sync_binlog=1): async (no "
            "semi-sync), or semi-sync with rpl_semi_sync_master_wait_point = AFTER_COMMIT or "
            "AFTER_SYNC (the commit waits for the replica's receipt of its events, after the "
            "binary log's sync, after or before the storage engine's commit)",
            values=replica.MODES,
            default=replica.NONE,
            readback="log_bin, rpl_semi_sync_master_enabled, rpl_semi_sync_master_wait_point; "
            "Rpl_semi_sync_master_status ON with one client; the replica's Slave_IO_Running "
            "and Slave_SQL_Running",
        ),
        "network_rtt_ms": Knob(
            "network_rtt_ms",
            "number",
            "round trip between primary and replica: a delay proxy (host.delayproxy) on the "
            "run network's gateway holds each byte half of it each way; 0: the proxy's hops "
            "only",
            minimum=0,
            maximum=1000,
            unit="ms",
            default=0,
            readback="the proxy's delay; the link's round trip measured through it and the "
            "semi-sync status variables are recorded per repetition",
        ),
    },
    notes={
        "prefetch_size": "InnoDB reads ahead whole extents (64 pages of 16 KiB, 1 MiB); "
        "steer it with read_ahead_threshold and random_read_ahead",
        "extent_size": "InnoDB's extent is fixed by the page size",
        "overhead_ms": "MariaDB 10.11's optimizer has no I/O cost knobs",
        "transferrate_ms": "MariaDB 10.11's optimizer has no I/O cost knobs",
    },
    needs_container=True,
    # The official image follows the same contract as the local one (MARIADB_ROOT_PASSWORD,
    # server options as arguments, datadir /var/lib/mysql): see containers/mariadb/README.md.
    image=ImageSource("mariadb:10.11.8", "tunelab/mariadb:local", "mariadb/build.sh"),
    cold_steps={"restart": "the server was restarted, with no buffer-pool dump or load"},
    cold_reads="InnoDB reads each page it misses with one read of the page size. With "
    "direct_io: true (O_DIRECT, the default) that read goes to the device as it is and the "
    "kernel's read-ahead plays no part: what reads ahead is InnoDB's own linear read-ahead, "
    "the next extent whole once read_ahead_threshold pages of one were read in order. With "
    "direct_io: false the read goes through the OS page cache and the kernel reads ahead of "
    "it as of any file",
    engine_time="performance_schema: SUM_TIMER_WAIT of the statements the measured "
    "connections ran (events_statements_summary_by_thread_by_event_name, read on a separate "
    "connection once they are idle), each from the server reading it to the server finishing "
    "it, just after its reply left; the C client reads every result whole (mysql_store_result), "
    "so the server never waits for the lab",
    reads=ReadCounter(
        "Innodb_pages_read: pages InnoDB read from its files into the buffer pool, read-ahead "
        "included; with innodb_flush_method=O_DIRECT (direct_io: true, the default) each read "
        "bypasses the OS page cache, with fsync the OS may serve it from its page cache",
        direct_knob="direct_io",
    ),
)


def _literal(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    from MySQLdb import _mysql

    return _mysql.string_literal(str(value).encode("latin-1")).decode("latin-1")


def _render(template: str, row: Sequence[Any]) -> str:
    """A statement with its %s markers replaced by the row's values as SQL literals."""
    parts = template.split("%s")
    if len(parts) != len(row) + 1:
        raise EngineError(f"mariadb: {len(row)} values for the markers of {template[:80]!r}")
    return "".join(p + _literal(v) for p, v in zip(parts, row)) + parts[-1]


def _dedup(cols: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(cols))


# performance_schema gives each statement's own time (engine_time_ns). Only the statement
# instruments run: the default table-I/O and file-I/O waits would be timed per row and per
# read, and history or digests are not needed for the per-thread summary.
_PERFORMANCE_SCHEMA = {
    "performance_schema": "ON",
    "performance_schema_instrument": ("'%=OFF'", "'statement/%=ON'"),  # the specific one wins
    "performance_schema_consumer_events_statements_current": "OFF",
    "performance_schema_consumer_statements_digest": "OFF",
}


def _option_pairs(opts: dict[str, str | tuple[str, ...]]) -> list[tuple[str, str]]:
    """(name, value) per option-file line; a tuple value is an option given several times."""
    return [(k, x) for k, v in opts.items() for x in ((v,) if isinstance(v, str) else v)]


def _server_options(knobs: dict[str, Any]) -> dict[str, str | tuple[str, ...]]:
    """The option-file lines a set of knobs means (plus the lab's fixed settings)."""
    page = int(knobs["page_size"])
    opts: dict[str, str | tuple[str, ...]] = {
        "innodb_page_size": str(page),
        "innodb_read_ahead_threshold": str(int(knobs["read_ahead_threshold"])),
        "innodb_random_read_ahead": "ON" if knobs["random_read_ahead"] else "OFF",
        "innodb_flush_method": "O_DIRECT" if knobs["direct_io"] else "fsync",
        # A cold start must find an empty pool: never dump or reload its page list.
        "innodb_buffer_pool_dump_at_shutdown": "OFF",
        "innodb_buffer_pool_load_at_startup": "OFF",
        # Statistics come from the lab's ANALYZE TABLE after each build; a background
        # recalculation (queued by the load) would run when it chose, in a timed repetition.
        "innodb_stats_auto_recalc": "OFF",
        # The bulk path: LOAD DATA LOCAL INFILE, the file sent by the lab's client.
        "local_infile": "ON",
        **_PERFORMANCE_SCHEMA,
    }
    if knobs.get("buffer_pool") is not None:
        opts["innodb_buffer_pool_size"] = str(int(knobs["buffer_pool"]) * page)
    return opts


def load_sql(table: str, csv: Path | str) -> str:
    """LOAD DATA of the data set's CSV (a header line, then comma-separated values with no
    quotes or commas inside them), its columns in the file's order."""
    path = str(csv).replace("\\", "\\\\").replace("'", "\\'")
    return (
        f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE {table} CHARACTER SET latin1 "
        "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\n' "
        f"IGNORE 1 LINES ({', '.join(COLUMNS)})"
    )


def _tables(node: Any) -> list[dict[str, Any]]:
    """The table accesses of an EXPLAIN FORMAT=JSON document, in the order it prints them."""
    if isinstance(node, list):
        return [t for x in node for t in _tables(x)]
    if not isinstance(node, dict):
        return []
    if "table_name" in node or ("message" in node and len(node) == 1):
        return [node]
    return [t for v in node.values() for t in _tables(v)]


def _normalise_plan(doc: dict[str, Any]) -> str:
    """EXPLAIN FORMAT=JSON -> scan | index:<key> | index-only:<key>, with the access type as
    detail (ref, range, eq_ref, const, index_merge...; full: the whole index in key order)."""
    paths = []
    for t in _tables(doc):
        if t.get("table_name") == KEYS_ALIAS:
            continue  # a batched look-up's key list (JSON_TABLE): reads no table
        access = t.get("access_type")
        if access is None:  # e.g. "Impossible WHERE": no row is read at all
            paths.append(f"none;{t.get('message', 'no access')}")
            continue
        if access == "ALL":
            paths.append("scan")
            continue
        if access.startswith("hash"):  # a hash join (join_cache_level 3+): not per-key look-ups
            paths.append(f"hash-join;{access}")
            continue
        keys = [t["key"]] if "key" in t else _keys(t.get("index_merge"))
        name = "+".join(dict.fromkeys(keys)) or "?"
        detail = "full" if access == "index" else access
        if name == "PRIMARY":
            # InnoDB's rows live in the primary key's b-tree: through PRIMARY the rows come
            # from the clustered index itself, never "then the table" nor "index-only" (EXPLAIN
            # may say using_index). Its full walk in key order is the table scan.
            paths.append("scan;PRIMARY" if access == "index" else f"index:PRIMARY;{detail}")
        elif t.get("using_index"):
            paths.append(f"index-only:{name};{detail}")
        else:
            paths.append(f"index:{name};{detail}")
    return " + ".join(paths) if paths else "unknown"


def _keys(node: Any) -> list[str]:
    """Every index an index_merge reads."""
    if isinstance(node, list):
        return [k for x in node for k in _keys(x)]
    if not isinstance(node, dict):
        return []
    own = [node["key"]] if isinstance(node.get("key"), str) else []
    return own + [k for v in node.values() for k in _keys(v)]


# rpl_semi_sync_master_wait_point, for the HADR calculator (docs/hadr.md). MariaDB's
# documentation: the primary waits for one replica to say it has "received and logged" the
# events, and waits after the binary log is synced: before the storage engine commits
# (AFTER_SYNC) or after (AFTER_COMMIT, the default). The replica's I/O thread acknowledges
# right after it has written the event to its relay log (MariaDB's slave.cc: queue_event, then
# the reply), and the relay log is synced only every sync_relay_log events (10000 by default):
# the ack is a receipt, not a remote flush. Both wait points send after the local sync and
# wait for that receipt: w + s + RTT; they differ in when other sessions see the commit, not
# in what the committing one waits for. Without semi-sync (`async`) the primary does not wait:
# the mode that waits for the local flush alone (the log-shipping report's baseline).
REPLICATION = {
    "AFTER_SYNC": Mode("AFTER_SYNC", Ordering.FLUSH_THEN_SEND, Ack.REMOTE_WRITE),
    "AFTER_COMMIT": Mode("AFTER_COMMIT", Ordering.FLUSH_THEN_SEND, Ack.REMOTE_WRITE),
    "async": Mode("async", Ordering.FLUSH_THEN_SEND, Ack.NONE),
}


class MariaDBEngine(replica.ReplicaMixin, ServerEngine):
    info = INFO
    paramstyle = "format"
    replication = REPLICATION
    replication_baseline = replica.ASYNC
    port = PORT
    database = DATABASE
    admin_database = None  # the admin connection comes first: it creates the database

    @property
    def connect_errors(self) -> tuple[type[BaseException], ...]:
        import MySQLdb

        return (MySQLdb.OperationalError,)

    # -- validation -------------------------------------------------------------------------
    @staticmethod
    def check_point(knobs: dict[str, Any]) -> list[tuple[str, str, str]]:
        """Cross-knob rules the single-knob bounds cannot say: (field, message, allowed)."""
        if rules := replica.rtt_needs_standby(knobs):
            return rules
        page = knobs.get("page_size", INFO.knobs["page_size"].default)
        pages = knobs.get("buffer_pool")
        if pages is None or page not in MIN_POOL_MIB:
            return []
        nbytes = int(pages) * int(page)
        per_mib = MIB // int(page)
        allowed = (
            f"a multiple of {per_mib} pages (whole MiB) and at least "
            f"{MIN_POOL_MIB[page] * per_mib} pages ({MIN_POOL_MIB[page]} MiB) at page_size {page}"
        )
        if nbytes < MIN_POOL_MIB[page] * MIB:
            return [("buffer_pool", f"{pages} pages is below InnoDB's minimum", allowed)]
        if nbytes % MIB:
            return [
                (
                    "buffer_pool",
                    f"{pages} pages is not whole MiB: InnoDB would truncate it",
                    allowed,
                )
            ]
        return []

    @staticmethod
    def warn_point(knobs: dict[str, Any]) -> list[tuple[str, str]]:
        if readahead.wanted(knobs) and knobs.get("direct_io", True):
            return [
                (
                    readahead.NAME,
                    "InnoDB reads its files with O_DIRECT (direct_io: true), "
                    "which bypasses the kernel's read-ahead: os_read_ahead changes nothing "
                    "there (set direct_io: false)",
                )
            ]
        return []

    # -- the server ---------------------------------------------------------------------------
    @property
    def datadir(self) -> Path:
        return self.home / "datadir"

    @property
    def _conf_dir(self) -> Path:
        return self.home / "conf"

    def write_settings(self, knobs: dict[str, Any]) -> None:
        self._conf_dir.mkdir(parents=True, exist_ok=True)
        opts = _option_pairs(_server_options(knobs))
        # The binary log and semi-sync where the point has a replica (mariadb_replica.py).
        opts += list(replica.primary_options(knobs, self.standby is not None).items())
        lines = ["[mariadbd]"] + [f"{k} = {v}" for k, v in opts]
        tmp = self._conf_dir / f".{CONF_FILE}.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(self._conf_dir / CONF_FILE)  # the directory is mounted: renames show

    def container_spec(self) -> containers.ContainerSpec:
        self.datadir.mkdir(parents=True, exist_ok=True)  # a fresh one is initialised inside
        return containers.ContainerSpec(
            image=self.image or "",
            port=PORT,
            env={"MARIADB_ROOT_PASSWORD": self.password},
            volumes={str(self.datadir): DATADIR, str(self._conf_dir): CONF_DIR},
            command=[f"--defaults-extra-file={CONF_DIR}/{CONF_FILE}"],
            ready_log=READY_LOG,
            ready_timeout_s=120,
            restart_in_place=True,  # the lab's image: SIGUSR1 (the official one: docker restart)
            secrets=(self.password,),
        )

    def after_start(self) -> None:
        self.admin_execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")

    def apply_in_place(self, knobs: dict[str, Any], changed: set[str]) -> None:
        opts = _server_options(knobs)
        for knob, var in (
            ("read_ahead_threshold", "innodb_read_ahead_threshold"),
            ("random_read_ahead", "innodb_random_read_ahead"),
            ("buffer_pool", "innodb_buffer_pool_size"),
        ):
            if knob in changed and var in opts:
                self.admin_execute(f"SET GLOBAL {var} = {opts[var]}")
        if "buffer_pool" in changed and "innodb_buffer_pool_size" in opts:
            self._wait_pool_size(int(opts["innodb_buffer_pool_size"]))

    def _wait_pool_size(self, nbytes: int, timeout_s: float = 120) -> None:
        """A resize may finish in the background; wait until the pool has the new size."""
        deadline = time.monotonic() + timeout_s
        while True:
            size = int(self._variables("innodb_buffer_pool_size")["innodb_buffer_pool_size"])
            status = self._status_values("Innodb_buffer_pool_resize_status").get(
                "Innodb_buffer_pool_resize_status", ""
            )
            if size == nbytes and not re.search(r"(?i)resiz(ing|e started)", status or ""):
                return
            if time.monotonic() > deadline:
                raise EngineError(
                    f"mariadb: buffer pool still {size} bytes, not {nbytes}, after "
                    f"{timeout_s:g} s ({status or 'no resize status'})"
                )
            time.sleep(0.2)

    def drop_table_sql(self, table: str) -> str:
        return f"DROP TABLE IF EXISTS {DATABASE}.{table}"

    def open_connection(
        self,
        database: str | None,
        autocommit: bool,
        timeout_s: float,
        local_infile: bool = False,
        port: int | None = None,
        host: str = "127.0.0.1",
    ) -> Any:
        import MySQLdb.cursors

        assert self.container is not None
        if port is None:  # the server itself (else the replica's port or a proxy's)
            host, port = self.container.client_address()
        return MySQLdb.connect(
            host=host,  # TCP, never a socket
            port=port,
            user="root",
            password=self.password,
            autocommit=autocommit,
            charset="utf8mb4",
            # Buffered: the C client reads each whole result as it arrives (the server never
            # waits for the lab mid-statement) and builds the rows in C.
            cursorclass=MySQLdb.cursors.Cursor,
            connect_timeout=max(1, int(timeout_s)),
            local_infile=local_infile,
            **({"database": database} if database else {}),
        )

    def connection_at(self, port: int, host: str = "127.0.0.1") -> Any:
        """An autocommit root connection to another port of the point's servers: the
        replica's published one, or the delay proxy's on the run network's gateway."""
        return connect_with_retry(
            lambda timeout: self.open_connection(None, True, timeout, port=port, host=host),
            self.connect_errors,
            self.info.name,
            self.connect_deadline_s,
            self.connect_pause_s,
        )

    # -- the replica (mariadb_replica.py) -------------------------------------------------------
    def keep_key(self, knobs: dict[str, Any]) -> str:
        """A server with a replica (and a binary log) is never attached by a point without
        one, nor the reverse; the mode and the round trip change in place."""
        key = super().keep_key(knobs)
        return key + "r" if replica.wants_standby(knobs) else key

    def provision(self, knobs: dict[str, Any]) -> None:
        full = self.full_knobs(knobs)
        if (
            self.container is not None
            and self.knobs
            and (replica.wants_standby(full) != replica.wants_standby(self.knobs))
        ):
            self.remove_container()  # a binary log only with a replica: another server
        super().provision(knobs)
        if not replica.wants_standby(self.knobs):
            return
        try:
            self.ensure_replica(self.knobs)
        except BaseException:
            self.remove_container()  # neither the primary nor the replica is left behind
            raise

    def restart(self) -> None:
        super().restart()
        if self.standby is not None:
            self.wait_replica()  # it reconnects by itself (every second)

    def remove_container(self) -> None:
        self.remove_standby()  # first: it is the primary's client
        super().remove_container()

    def teardown(self) -> None:
        try:
            super().teardown()  # a kept primary keeps its replica (same run, its own key)
        finally:
            self.park_proxy()

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        return self.admin_query(sql, args)

    def _variables(self, *names: str) -> dict[str, str]:
        marks = ", ".join(["%s"] * len(names))
        return dict(self._query(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", names))

    def _status_values(self, *names: str) -> dict[str, str]:
        marks = ", ".join(["%s"] * len(names))
        return dict(self._query(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({marks})", names))

    # -- schema and data ------------------------------------------------------------------------
    def table_ddl(self, table: str, index: IndexPlan) -> str:
        cols = ", ".join(f"{c} {_TYPES[COLUMN_TYPES[c]]}" for c in COLUMNS)
        if index.kind == "clustered" and index.key:
            pk: tuple[str, ...] | None = _dedup((*index.key, "id"))
        elif index.kind == "primary" or "id" not in index.key:
            pk = ("id",)
        else:
            # The key is id and the plan asks for no clustered index on it: InnoDB clusters
            # on its hidden row id, which follows the load order (id order) anyway.
            pk = None
        key = f", PRIMARY KEY ({', '.join(pk)})" if pk else ""
        return f"CREATE TABLE {table} ({cols}{key}) ENGINE=InnoDB DEFAULT CHARSET=latin1"

    def index_ddl(self, table: str, index: IndexPlan) -> list[str]:
        """Statements run after the load: the secondary index, or the rebuild that packs a
        clustered table (rows arrive in id order, so pages split on the way in)."""
        if index.kind in ("none", "primary"):
            return []
        if index.kind == "clustered":
            return [f"ALTER TABLE {table} FORCE"] if index.key not in ((), ("id",)) else []
        cols = self._index_columns(index)
        unique = "UNIQUE " if index.key == ("id",) and index.kind != "covering_wrong_order" else ""
        return [f"CREATE {unique}INDEX {table}_{index.kind} ON {table} ({', '.join(cols)})"]

    @staticmethod
    def _index_columns(index: IndexPlan) -> tuple[str, ...]:
        if index.kind == "nonclustered":
            return index.key
        if index.kind == "covering":
            return _dedup((*index.key, *index.include))
        if index.kind == "covering_wrong_order":
            return _dedup((*[c for c in index.include if c not in index.key], *index.key))
        raise EngineError(
            f"mariadb: unknown index kind {index.kind!r} (allowed: {', '.join(INDEX_KINDS)})"
        )

    def create_table(self, table: str, index: IndexPlan) -> None:
        self.admin_execute(f"DROP TABLE IF EXISTS {DATABASE}.{table}")
        self.admin_execute(f"USE {DATABASE}")
        self.admin_execute(self.table_ddl(table, index))
        self.tables.add(table)

    def bulk_load(self, table: str, source: Any) -> None:
        """LOAD DATA LOCAL INFILE of the data set's CSV: the client sends the file whole and the
        server parses it (no statement per row), in one transaction; then the rows are
        counted, since LOAD DATA turns a malformed line into a warning, not an error."""
        conn = connect_with_retry(
            lambda timeout: self.open_connection(DATABASE, False, timeout, local_infile=True),
            self.connect_errors,
            self.info.name,
            self.connect_deadline_s,
            self.connect_pause_s,
        )
        try:
            cur = conn.cursor()
            cur.execute(load_sql(table, Path(source.csv).resolve()))
            conn.commit()
            cur.execute(f"SELECT COUNT(*) FROM {table}")
            got = int(cur.fetchone()[0])
        finally:
            conn.close()
        if got != source.dataset.rows:
            raise EngineError(
                f"mariadb: LOAD DATA put {got} rows in {table}, the data set has "
                f"{source.dataset.rows}"
            )

    def create_index(self, table: str, index: IndexPlan) -> None:
        self.admin_execute(f"USE {DATABASE}")
        for stmt in self.index_ddl(table, index):
            self.admin_execute(stmt)
        self.admin_query(f"ANALYZE TABLE {table}")
        have, want = self.catalog_layout(table), self.expected_layout(table, index)
        if have != want:
            raise EngineError(f"mariadb: {table} has indexes {have}, the plan needs {want}")

    def catalog_layout(self, table: str) -> dict[str, list[str]]:
        """Each index's columns as information_schema.STATISTICS lists them (PRIMARY: the
        clustering key InnoDB stores the rows by)."""
        rows = self._query(
            "SELECT index_name, column_name FROM information_schema.STATISTICS "
            "WHERE table_schema = %s AND table_name = %s ORDER BY index_name, seq_in_index",
            (DATABASE, table),
        )
        have: dict[str, list[str]] = {}
        for name, col in rows:
            have.setdefault(name, []).append(col)
        return have

    def expected_layout(self, table: str, index: IndexPlan) -> dict[str, list[str]]:
        want: dict[str, list[str]] = {}
        pk = re.search(r"PRIMARY KEY \(([^)]*)\)", self.table_ddl(table, index))
        if pk:
            want["PRIMARY"] = pk.group(1).split(", ")
        if index.kind not in ("none", "primary", "clustered"):
            want[self.index_name(table, index)] = list(self._index_columns(index))
        return want

    def lock_granularity_in_effect(self, table: str, table_lock: bool) -> str:
        """A transaction of the workload opened as the timed ones are: 'table' when the server
        shows the table locked by it (SHOW OPEN TABLES counts LOCK TABLES), else 'row' when
        the table is InnoDB's (row locks), else the storage engine's name."""
        conn = self.connect()
        try:
            cur = conn.cursor()
            if table_lock:
                self.lock_table(cur, table)
            in_use = self._query(
                f"SHOW OPEN TABLES FROM {DATABASE} WHERE `Table` = %s AND In_use > 0", (table,)
            )
            storage = self._query(
                "SELECT engine FROM information_schema.TABLES "
                "WHERE table_schema = %s AND table_name = %s",
                (DATABASE, table),
            )
            conn.rollback()
            if table_lock:
                self.unlock_tables(cur)
        finally:
            conn.close()
        if in_use:
            return "table"
        found = storage[0][0] if storage else "missing"
        return "row" if found == "InnoDB" else f"{found} (no row locks)"

    def _indexes(self, table: str, index: IndexPlan) -> list[str]:
        """Every index the plan gives the table, as InnoDB names them."""
        names = ["PRIMARY"] if "PRIMARY KEY" in self.table_ddl(table, index) else []
        if index.kind not in ("none", "primary", "clustered"):
            names.append(f"{table}_{index.kind}")
        return names

    # -- timed statements ----------------------------------------------------------------------
    def index_name(self, table: str, index: IndexPlan) -> str:
        # InnoDB stores the rows in the primary key's b-tree: the clustered index is PRIMARY.
        # With that name the base rule of expected_access holds for every kind on InnoDB:
        # clustered -> index:PRIMARY, covering and covering_wrong_order (a full scan of the
        # covering index) -> index-only, nonclustered -> index, none -> scan.
        return "PRIMARY" if index.kind == "clustered" else f"{table}_{index.kind}"

    def table_ref(self, table: str, index: IndexPlan, access: str) -> str:
        if access != "forced":
            return table
        if index.kind == "none" or not index.key:
            # No key access at all: IGNORE every index (a scan; an empty list is a syntax error).
            names = self._indexes(table, index)
            return f"{table} IGNORE INDEX ({', '.join(names)})" if names else table
        # FORCE INDEX makes a table scan the last resort: the index is used whenever it can be
        # (a covering index in the wrong order by a full scan of it).
        return f"{table} FORCE INDEX ({self.index_name(table, index)})"

    def explain(self, conn: Any, sql: str, args: Sequence[Any]) -> AccessPath:
        cur = conn.cursor()
        cur.execute(f"EXPLAIN FORMAT=JSON {sql}", tuple(args) or None)
        raw = cur.fetchone()[0]
        cur.close()
        return AccessPath(_normalise_plan(json.loads(raw)), raw)

    def key_join(self, table: str, table_ref: str, n: int) -> str:
        # JSON_TABLE yields the array's values in order, and STRAIGHT_JOIN keeps it the outer
        # table: each key an eq_ref look-up in turn. One parameter: one statement text.
        k = KEYS_ALIAS
        return (
            f"JSON_TABLE(%s, '$[*]' COLUMNS (id INT PATH '$')) AS {k} "
            f"STRAIGHT_JOIN {table_ref} ON {table}.id = {k}.id"
        )

    def key_args(self, keys: Sequence[int]) -> tuple:
        return (json.dumps([int(k) for k in keys]),)

    def fetch(self, cursor: Any) -> int:
        # The buffered cursor's execute() already read the whole result (mysql_store_result)
        # and built its rows in C; fetchall hands that tuple over without a copy.
        return len(cursor.fetchall())

    def write_steps(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[tuple[str, Any]]:
        # MySQLdb's executemany formats and escapes every row in a Python loop inside the
        # timed section (60 % of an insert's time here); rendered now, the timed section sends
        # one multi-row INSERT per transaction, or each UPDATE as it is.
        if sql.lstrip().upper().startswith("INSERT"):
            head, _, values = sql.partition(" VALUES ")
            return [(f"{head} VALUES " + ", ".join(_render(values, r) for r in rows), None)]
        return [(_render(sql, r), None) for r in rows]

    # -- locking ---------------------------------------------------------------------------------
    def lock_table(self, cursor: Any, table: str) -> None:
        # LOCK TABLES commits any open transaction; with autocommit off it also takes an
        # InnoDB table lock, and the caller's COMMIT must come before UNLOCK TABLES.
        cursor.execute("SET autocommit = 0")
        cursor.execute(f"LOCK TABLES {table} WRITE")

    def unlock_tables(self, cursor: Any) -> None:
        cursor.execute("UNLOCK TABLES")

    # -- cache and counters ----------------------------------------------------------------------
    def settle(self) -> None:
        # Purge of earlier statements' old row versions reads undo pages (from disk after a
        # restart) and writes redo: wait until the history list is empty (blocks; MariaDB
        # >= 10.5.7), or it runs inside the timed repetitions.
        self.admin_execute("SET GLOBAL innodb_max_purge_lag_wait = 0")
        if self.standby is not None:
            self.catch_up()  # the replica applies what the build wrote before, not during

    def make_cold(self) -> CacheState:
        """Restart the server (no pool dump/load: it starts empty), evict the data files from
        the OS page cache, then check both: OS residency and the table's pages in the pool."""
        # Purge left over from the load would read table pages right after the restart.
        self.settle()
        self.restart()
        files = self.data_files()
        method = "restart+" + cache.evict(self._all_files())
        resident, total = cache.residency(files)
        in_pool = self.pool_pages()
        achieved = "cold" if resident == 0 and in_pool == 0 else "partial"
        return CacheState("cold", achieved, method, resident, total)

    def pool_pages(self) -> int:
        """Pages of the lab's tables now in the buffer pool."""
        # Every table page in the pool is on its LRU list; INNODB_BUFFER_PAGE would walk
        # every block of the pool, free ones too (37 ms for a 1 GiB pool, 1 ms this way).
        rows = self._query(
            "SELECT COUNT(*) FROM information_schema.INNODB_BUFFER_PAGE_LRU "
            "WHERE table_name LIKE %s",
            (f"`{DATABASE}`.%",),
        )
        return int(rows[0][0])

    def counters(self, conns: Sequence[Any]) -> dict[str, float]:
        values = self._status_values(*_STATUS)
        out = {name: float(values.get(var, "nan")) for var, name in _STATUS.items()}
        out["engine_time_ns"] = self._statement_ns([c.thread_id() for c in conns])
        if self.standby is not None:
            out |= self.semisync_counters()
        return out | self.disk_counters()

    def gauges(self) -> dict[str, float]:
        return self.replication_gauges() if self.standby is not None else {}

    def _statement_ns(self, connection_ids: Sequence[int], timeout_s: float = 10) -> float:
        """The server's own time in ns (performance_schema) of every statement the
        given connections ran, summed; read on the admin connection, so not counted."""
        if not connection_ids:
            return 0.0
        ids = tuple(connection_ids)
        marks = ", ".join(["%s"] * len(ids))
        # The server records a statement's end after its reply has left: wait until every
        # connection is back to Sleep (set right after the record), or its last statement
        # would count in the next reading instead.
        deadline = time.monotonic() + timeout_s
        while self._query(
            f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ({marks}) "
            "AND COMMAND <> 'Sleep'",
            ids,
        )[0][0]:
            if time.monotonic() > deadline:
                raise EngineError(f"mariadb: connections {ids} still busy after {timeout_s:g} s")
            time.sleep(0.001)
        threads, picoseconds = self._query(
            "SELECT COUNT(DISTINCT t.THREAD_ID), COALESCE(SUM(s.SUM_TIMER_WAIT), 0) "
            "FROM performance_schema.threads t "
            "LEFT JOIN performance_schema.events_statements_summary_by_thread_by_event_name s "
            f"ON s.THREAD_ID = t.THREAD_ID WHERE t.PROCESSLIST_ID IN ({marks})",
            ids,
        )[0]
        if threads != len(set(ids)):
            raise EngineError(
                f"mariadb: performance_schema shows {threads} of the {len(set(ids))} "
                "measured connections (is performance_schema on?)"
            )
        return int(picoseconds) / 1000

    def applied_knobs(self) -> dict[str, Any]:
        v = self._variables(
            "innodb_page_size",
            "innodb_buffer_pool_size",
            "innodb_read_ahead_threshold",
            "innodb_random_read_ahead",
            "innodb_flush_method",
            "innodb_buffer_pool_dump_at_shutdown",
            "innodb_buffer_pool_load_at_startup",
        )
        page = int(v["innodb_page_size"])
        applied: dict[str, Any] = {
            "page_size": page,
            "buffer_pool": int(v["innodb_buffer_pool_size"]) // page,
            "read_ahead_threshold": int(v["innodb_read_ahead_threshold"]),
            "random_read_ahead": v["innodb_random_read_ahead"] == "ON",
            "direct_io": v["innodb_flush_method"].upper().startswith("O_DIRECT"),
            # Not knobs, recorded with them: what the pool really holds, and the cold setup.
            "innodb_buffer_pool_bytes": int(v["innodb_buffer_pool_size"]),
            "innodb_buffer_pool_pages_total": int(
                self._status_values("Innodb_buffer_pool_pages_total")[
                    "Innodb_buffer_pool_pages_total"
                ]
            ),
            "innodb_flush_method": v["innodb_flush_method"],
            "innodb_buffer_pool_dump_load": f"{v['innodb_buffer_pool_dump_at_shutdown']}/"
            f"{v['innodb_buffer_pool_load_at_startup']}",
        }
        if self.knobs.get("buffer_pool") is None:
            applied.pop("buffer_pool")  # not asked: the server's default stays unchecked
        return applied | self.applied_replication() | self.disk_applied()

    def version(self) -> str:
        return f"MariaDB {self._query('SELECT VERSION()')[0][0]} ({self.image})"

    def data_files(self) -> list[Path]:
        return [
            p for t in sorted(self.tables) if (p := self.datadir / DATABASE / f"{t}.ibd").exists()
        ]

    def _all_files(self) -> list[Path]:
        """Table files plus the system tablespace, undo and redo logs."""
        system = [p for p in self.datadir.glob("ib*") if p.is_file()]
        system += [p for p in self.datadir.glob("undo*") if p.is_file()]
        return self.data_files() + system

    def data_bytes(self, table: str) -> int | None:
        rows = self._query(
            "SELECT data_length + index_length FROM information_schema.TABLES "
            "WHERE table_schema = %s AND table_name = %s",
            (DATABASE, table),
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

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
        opts = " ".join(f"--{k}={v}" for k, v in _option_pairs(_server_options(full)))
        table = dataset.table
        writes = workload in ("insert", "update")
        opts += "".join(f" --{k}={v}" for k, v in replica.primary_options(full, False).items())
        out = readahead.planned(full, "the data directory")
        out += [f"-- container tunelab/mariadb (or the official image), fresh datadir, {opts}"]
        out += replica.planned_sql(full, DATABASE)
        if writes:
            out.append("-- every repetition, untimed: the table built again")
        out += [f"DROP TABLE IF EXISTS {DATABASE}.{table}", self.table_ddl(table, index)]
        if workload != "insert":
            out.append(
                f"{load_sql(table, f'<data dir>/{dataset.key}.csv')}  -- {dataset.rows} "
                "rows, then SELECT COUNT(*)"
            )
        out += [*self.index_ddl(table, index), f"ANALYZE TABLE {table}"]
        if workload == "insert":
            out[-1] += "  -- the empty table: the timed inserts maintain the index"
        if workload is not None and workload != "insert":
            out.append("EXPLAIN FORMAT=JSON <statement>  -- before timing, each distinct one")
        if full.get("lock_granularity") == "table":
            out.append(
                f"SET autocommit = 0; LOCK TABLES {table} WRITE; ...; COMMIT; "
                "UNLOCK TABLES  -- around every transaction"
            )
        cold = "cold" if cache == "cold" else "cold points"
        before = {"cold": "each cold start", "warm": "each warm-up"}.get(
            cache, "each cold start or warm-up"
        )
        out.append(f"SET GLOBAL innodb_max_purge_lag_wait = 0  -- purge done before {before}")
        if cache in (None, "cold"):
            out.append(f"-- {cold}: restart (no buffer pool dump/load), evict data files, check")
        if cache in (None, "warm"):
            what = f"SELECT * FROM {table}" if writes else "the timed statements"
            warm = "warm" if cache == "warm" else "warm points"
            out.append(f"-- {warm}: {what} once, untimed, on the timed connections")
        return out
