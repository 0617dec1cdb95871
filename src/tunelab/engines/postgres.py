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

The statement text, the timed statements' dialect among it, is in ``postgres_sql``, the
knobs and what they mean in ``postgres_info``, the built table's read-back in
``postgres_layout``, the standby in ``postgres_standby``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunelab.engines import postgres_sql as sql
from tunelab.engines import postgres_standby as standby
from tunelab.engines import server
from tunelab.engines.base import (
    VERSION_KNOB,
    CacheState,
    EngineError,
    IndexPlan,
    version_applied,
)
from tunelab.engines.postgres_info import INFO, PostgresKnobRules
from tunelab.engines.postgres_layout import PostgresLayout
from tunelab.engines.postgres_sql import (
    CONF_DIR,
    CONF_FILE,
    DATADIR,
    FLUSH_SQL,
    settings,
    settings_text,
)
from tunelab.engines.server import ServerEngine
from tunelab.hadr.model import Ack, Mode, Ordering
from tunelab.host import cache, containers
from tunelab.store.dataset import Dataset

PORT = 5432
DATABASE = "postgres"  # the lab's tables live in the initial database (schema public)
ADMIN_USER = "postgres"  # the superuser the image creates
LAB_ROLE = "tunelab"  # the timed connections' role: not a superuser
# The real server's, not the official image's init server (that one listens on no TCP port).
READY_LOG = (
    r'listening on IPv4 address "0\.0\.0\.0", port 5432[\s\S]*'
    r"database system is ready to accept connections"
)


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


class PostgresEngine(ServerEngine):
    info = INFO
    dialect_class = sql.PostgresDialect
    dialect: sql.PostgresDialect
    knob_rules = PostgresKnobRules(INFO)
    layout_class = PostgresLayout
    replication = REPLICATION
    replication_baseline = "local"
    standby_class = standby.PostgresStandby
    replica: standby.PostgresStandby
    port = PORT
    database = DATABASE
    admin_database = DATABASE

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
        options = " ".join(f"-c {k}={v}" for k, v in self.dialect.forced.items())
        return server.connect_with_retry(
            lambda timeout: self._open(LAB_ROLE, False, timeout, options),
            self.connect_errors,
            self.info.name,
            self.connect_deadline_s,
        )

    def write_settings(self, knobs: dict[str, Any]) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.datadir.mkdir(parents=True, exist_ok=True)
        tmp = self.conf_dir / f".{CONF_FILE}.tmp"
        tmp.write_text(settings_text(knobs, self.replica.container is not None))
        tmp.replace(self.conf_dir / CONF_FILE)  # the directory is mounted: renames show

    # -- the standby (postgres_standby.py) ------------------------------------------------------
    def keep_key(self, knobs: dict[str, Any]) -> str:
        """A server with a standby is never attached by a point without one, nor the reverse."""
        key = super().keep_key(knobs)
        return key + "r" if standby.wants_standby(knobs) else key

    def provision(self, knobs: dict[str, Any]) -> None:
        super().provision(knobs)
        replica = self.replica
        if not standby.wants_standby(self.knobs):
            if replica.container is not None:  # this engine had one for its knobs before
                replica.remove_standby()
                self.write_settings(self.knobs)
                self.admin_query(sql.RELOAD_SQL)
            return
        rtt = float(self.knobs["network_rtt_ms"])
        if replica.container is None and not replica.attach_standby(self.knobs):
            shutil.rmtree(self.home / "standby", ignore_errors=True)
            replica.forget_link()
            replica.start_proxy(rtt)
            replica.start_standby(self.knobs)
        elif replica.proxy is None or replica.proxy.delay_ms != rtt / 2:
            replica.start_proxy(rtt)  # the kept one's delay changed, or a new one to reconnect to
        replica.wait_streaming(sync=False)
        self.write_settings(self.knobs)  # now naming the standby
        self.admin_query(sql.RELOAD_SQL)
        replica.wait_streaming(sync=True)
        self._wait_setting("synchronous_commit", str(self.knobs["sync_mode"]))
        replica.link_rtt_ms = replica.measure_link()

    def restart(self) -> None:
        super().restart()
        if self.replica.container is not None:
            self.replica.wait_streaming(sync=True)  # it reconnects by itself (every 100 ms)

    def remove_container(self) -> None:
        self.replica.remove_standby()  # first: it is the primary's client
        super().remove_container()

    def teardown(self) -> None:
        try:
            super().teardown()  # a kept primary keeps its standby (same run, its own key)
        finally:
            self.replica.park_proxy()

    def apply_in_place(self, knobs: dict[str, Any], changed: set[str]) -> None:
        names = sql.IN_PLACE_SETTINGS
        if not changed & set(names):
            return
        self.admin_query(sql.RELOAD_SQL)
        for knob in sorted(changed & set(names)):
            self._wait_setting(names[knob], settings(knobs)[names[knob]])

    def _wait_setting(self, name: str, want: str) -> None:
        # The postmaster re-reads the file, then signals every backend: wait until this one
        # shows the value (new connections are forked from the reloaded postmaster).
        deadline = time.monotonic() + 10
        while (got := self._setting(name)) != want:
            if time.monotonic() > deadline:
                errors = self.admin_query(sql.SETTINGS_ERRORS_SQL)
                raise EngineError(
                    f"postgres: {name} is {got}, not {want}, after a reload"
                    + (f" (settings file errors: {errors})" if errors else "")
                )
            time.sleep(0.05)

    def after_start(self) -> None:
        """The lab's role, its privileges and the extensions the counters read."""
        from psycopg import sql as psql

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
            exists = self.admin_query(sql.ROLE_EXISTS_SQL, (LAB_ROLE,))
            verb = "ALTER" if exists else "CREATE"
            stmt = psql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(
                psql.Identifier(LAB_ROLE), psql.Literal(verifier)
            )
            admin.execute(stmt)
        finally:
            self.admin_execute("RESET pg_stat_statements.track_utility")
            self.admin_execute("RESET log_min_error_statement")
        for stmt in sql.grants_sql(LAB_ROLE):
            self.admin_execute(stmt)

    # -- schema and data ----------------------------------------------------------------------
    def create_table(self, table: str, index: IndexPlan) -> None:
        self.admin_execute(self.drop_table_sql(table))
        self.admin_execute(sql.table_ddl(table, index))
        self.tables.add(table)

    def bulk_load(self, table: str, source: Any) -> None:
        """COPY of the data set's CSV file as it is (the server parses it), as the lab's role."""
        conn = self.connect()
        try:
            with (
                conn.cursor() as cur,
                cur.copy(sql.copy_csv_sql(table)) as copy,
                open(source.csv, "rb") as f,
            ):
                while block := f.read(1 << 20):
                    copy.write(block)
            conn.commit()
        finally:
            conn.close()

    def create_index(self, table: str, index: IndexPlan) -> None:
        for stmt in sql.index_ddl(table, index):
            self.admin_execute(stmt)
        self.admin_execute(sql.analyse_sql(table))  # VACUUM: autocommit, as the admin connection is
        have, want = self.layout.catalog(table), self.layout.expected(table, index)
        if have != want:
            raise EngineError(f"postgres: {table} has indexes {have}, the plan needs {want}")

    # -- cache and counters ----------------------------------------------------------------------
    def settle(self) -> None:
        """Checkpoint: the dirty pages of the table just built (and of earlier points) are
        written back now rather than by the checkpointer during the timed repetitions, and
        every repetition after it writes the same full-page images on first touch. With a
        standby, then until it has replayed all of it."""
        self.admin_execute("CHECKPOINT")
        if self.replica.container is not None:
            self.replica.catch_up()

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
        return self.admin_query(sql.RELATIONS_SQL, (sorted(self.tables),))

    def pool_pages(self) -> int:
        """Buffers in shared_buffers that hold pages of the lab's relations."""
        oids = [oid for oid, _ in self._relations()]
        if not oids:
            return 0
        rows = self.admin_query(sql.POOL_PAGES_SQL, (oids,))
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
        tables = (sorted(self.tables),)
        statio = self.admin_query(sql.STATIO_SQL, tables)[0]
        database = self.admin_query(sql.DATABASE_SQL)[0]
        wal = self.admin_query(sql.WAL_SQL)[0]
        return sql.counters_from(statio, database, wal) | {
            "engine_time_ns": self._statement_ns(),
            **self.disk_counters(),
        }

    def gauges(self) -> dict[str, float]:
        return self.replica.replication_lags() if self.replica.container is not None else {}

    def _statement_ns(self) -> float:
        """The server's own time in ns (pg_stat_statements: execution plus planning) of every
        top-level statement the lab's role ran, but the forced statistics flushes. The
        statements' entries are written when they end (a SELECT's at its portal's end: the
        next statement or the COMMIT), before the client hears back."""
        rows = self.admin_query(sql.STATEMENT_TIME_SQL, (LAB_ROLE, FLUSH_SQL))
        return float(rows[0][0]) * 1e6

    def applied_knobs(self) -> dict[str, Any]:
        rows = self.admin_query(sql.APPLIED_SQL, (list(sql.APPLIED_SETTINGS),))
        applied = sql.applied_from(rows, self._setting("shared_buffers"))
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
        state, proxy = self.replica.replication_state(), self.replica.proxy
        if state != ("streaming", "sync"):
            raise EngineError(
                f"postgres: the standby is not the synchronous one streaming "
                f"(pg_stat_replication: {state or 'none connected'})"
            )
        return {
            "sync_mode": self._setting("synchronous_commit"),
            "network_rtt_ms": 2 * proxy.delay_ms if proxy is not None else None,
            "pg_synchronous_standby_names": names,
        }

    def _setting(self, name: str) -> str:
        return str(self.admin_query(sql.SETTING_SQL, (name,))[0][0])

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
        rows = self.admin_query(sql.DATA_BYTES_SQL, (table,))
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
        """See ``abilities.PlannedSQL``."""
        return sql.planned(self.knob_rules.full_knobs(knobs), dataset, index, workload, cache)
