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

The statement text, the timed statements' dialect among it, is in ``mariadb_sql``, the
knobs and what they mean in ``mariadb_info``, the built table's read-back in
``mariadb_layout``, the replica in ``mariadb_replica``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunelab.engines import mariadb_replica
from tunelab.engines import mariadb_sql as sql
from tunelab.engines.base import (
    VERSION_KNOB,
    CacheState,
    EngineError,
    IndexPlan,
    version_applied,
)
from tunelab.engines.mariadb_info import INFO, MariaDBKnobRules
from tunelab.engines.mariadb_layout import MariaDBLayout
from tunelab.engines.mariadb_sql import DATABASE
from tunelab.engines.server import ServerEngine, connect_with_retry
from tunelab.hadr.model import Ack, Mode, Ordering
from tunelab.host import cache, containers
from tunelab.store.dataset import Dataset

PORT = 3306
CONF_DIR = "/etc/tunelab"  # where the host's option-file directory is mounted
CONF_FILE = "knobs.cnf"
DATADIR = "/var/lib/mysql"
READY_LOG = r"ready for connections\.\s*\n.*port: 3306"  # not the init server's (port: 0)


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


class MariaDBEngine(ServerEngine):
    info = INFO
    dialect_class = sql.MariaDBDialect
    knob_rules = MariaDBKnobRules(INFO)
    layout_class = MariaDBLayout
    replication = REPLICATION
    replication_baseline = mariadb_replica.ASYNC
    standby_class = mariadb_replica.MariaDBReplica
    replica: mariadb_replica.MariaDBReplica
    port = PORT
    database = DATABASE
    admin_database = None  # the admin connection comes first: it creates the database

    @property
    def connect_errors(self) -> tuple[type[BaseException], ...]:
        import MySQLdb

        return (MySQLdb.OperationalError,)

    # -- the server ---------------------------------------------------------------------------
    @property
    def datadir(self) -> Path:
        return self.home / "datadir"

    @property
    def _conf_dir(self) -> Path:
        return self.home / "conf"

    def write_settings(self, knobs: dict[str, Any]) -> None:
        self._conf_dir.mkdir(parents=True, exist_ok=True)
        opts = sql.option_pairs(sql.server_options(knobs))
        # The binary log and semi-sync where the point has a replica (mariadb_replica.py).
        opts += list(
            mariadb_replica.primary_options(knobs, self.replica.container is not None).items()
        )
        tmp = self._conf_dir / f".{CONF_FILE}.tmp"
        tmp.write_text(sql.option_file(opts))
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
        self.admin_execute(sql.create_database_sql())

    def apply_in_place(self, knobs: dict[str, Any], changed: set[str]) -> None:
        opts = sql.server_options(knobs)
        for knob, var in sql.IN_PLACE_VARIABLES.items():
            if knob in changed and var in opts:
                self.admin_execute(sql.set_global_sql(var, str(opts[var])))
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
        return sql.drop_table_sql(table)

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
        return key + "r" if mariadb_replica.wants_standby(knobs) else key

    def provision(self, knobs: dict[str, Any]) -> None:
        full = self.knob_rules.full_knobs(knobs)
        if (
            self.container is not None
            and self.knobs
            and (mariadb_replica.wants_standby(full) != mariadb_replica.wants_standby(self.knobs))
        ):
            self.remove_container()  # a binary log only with a replica: another server
        super().provision(knobs)
        if not mariadb_replica.wants_standby(self.knobs):
            return
        try:
            self.replica.ensure_replica(self.knobs)
        except BaseException:
            self.remove_container()  # neither the primary nor the replica is left behind
            raise

    def restart(self) -> None:
        super().restart()
        if self.replica.container is not None:
            self.replica.wait_replica()  # it reconnects by itself (every second)

    def remove_container(self) -> None:
        self.replica.remove_standby()  # first: it is the primary's client
        super().remove_container()

    def teardown(self) -> None:
        try:
            super().teardown()  # a kept primary keeps its replica (same run, its own key)
        finally:
            self.replica.park_proxy()

    def _query(self, statement: str, args: Sequence[Any] = ()) -> list[tuple]:
        return self.admin_query(statement, args)

    def _variables(self, *names: str) -> dict[str, str]:
        return dict(self._query(sql.variables_sql(len(names)), names))

    def _status_values(self, *names: str) -> dict[str, str]:
        return dict(self._query(sql.status_sql(len(names)), names))

    # -- schema and data ------------------------------------------------------------------------
    def create_table(self, table: str, index: IndexPlan) -> None:
        self.admin_execute(sql.drop_table_sql(table))
        self.admin_execute(sql.use_sql())
        self.admin_execute(sql.table_ddl(table, index))
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
            cur.execute(sql.load_sql(table, Path(source.csv).resolve()))
            conn.commit()
            cur.execute(sql.count_sql(table))
            got = int(cur.fetchone()[0])
        finally:
            conn.close()
        if got != source.dataset.rows:
            raise EngineError(
                f"mariadb: LOAD DATA put {got} rows in {table}, the data set has "
                f"{source.dataset.rows}"
            )

    def create_index(self, table: str, index: IndexPlan) -> None:
        self.admin_execute(sql.use_sql())
        for stmt in sql.index_ddl(table, index):
            self.admin_execute(stmt)
        self.admin_query(sql.analyze_sql(table))
        have, want = self.layout.catalog(table), self.layout.expected(table, index)
        if have != want:
            raise EngineError(f"mariadb: {table} has indexes {have}, the plan needs {want}")

    # -- cache and counters ----------------------------------------------------------------------
    def settle(self) -> None:
        # Purge done now (PURGE_SQL), or it runs inside the timed repetitions.
        self.admin_execute(sql.PURGE_SQL)
        if self.replica.container is not None:
            self.replica.catch_up()  # the replica applies what the build wrote before, not during

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
        rows = self._query(sql.POOL_PAGES_SQL, sql.POOL_PAGES_ARGS)
        return int(rows[0][0])

    def counters(self, conns: Sequence[Any]) -> dict[str, float]:
        out = sql.counters_from(self._status_values(*sql.STATUS))
        out["engine_time_ns"] = self._statement_ns([c.thread_id() for c in conns])
        if self.replica.container is not None:
            out |= self.replica.semisync_counters()
        return out | self.disk_counters()

    def gauges(self) -> dict[str, float]:
        return self.replica.replication_gauges() if self.replica.container is not None else {}

    def _statement_ns(self, connection_ids: Sequence[int], timeout_s: float = 10) -> float:
        """The server's own time in ns (performance_schema) of every statement the
        given connections ran, summed; read on the admin connection, so not counted."""
        if not connection_ids:
            return 0.0
        ids = tuple(connection_ids)
        # The server records a statement's end after its reply has left: wait until every
        # connection is back to Sleep (set right after the record), or its last statement
        # would count in the next reading instead.
        deadline = time.monotonic() + timeout_s
        while self._query(sql.busy_sql(len(ids)), ids)[0][0]:
            if time.monotonic() > deadline:
                raise EngineError(f"mariadb: connections {ids} still busy after {timeout_s:g} s")
            time.sleep(0.001)
        threads, picoseconds = self._query(sql.statement_time_sql(len(ids)), ids)[0]
        if threads != len(set(ids)):
            raise EngineError(
                f"mariadb: performance_schema shows {threads} of the {len(set(ids))} "
                "measured connections (is performance_schema on?)"
            )
        return int(picoseconds) / 1000

    def applied_knobs(self) -> dict[str, Any]:
        v = self._variables(*sql.APPLIED_VARIABLES)
        total = "Innodb_buffer_pool_pages_total"
        applied = sql.applied_from(v, self._status_values(total)[total])
        if self.knobs.get("buffer_pool") is None:
            applied.pop("buffer_pool")  # not asked: the server's default stays unchecked
        if VERSION_KNOB in self.knobs:  # "11.8.9-MariaDB-0+deb13u1": 11.8
            number = re.match(r"[0-9.]*", str(self._query("SELECT VERSION()")[0][0])).group(0)
            applied[VERSION_KNOB] = version_applied(INFO, number.rstrip("."))
        return applied | self.replica.applied_replication() | self.disk_applied()

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
        rows = self._query(sql.DATA_BYTES_SQL, (DATABASE, table))
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
        """See ``abilities.PlannedSQL``."""
        return sql.planned(self.knob_rules.full_knobs(knobs), dataset, index, workload, cache)
