"""IBM Db2 Community Edition in its official container (the lab's target engine).

The server's lifecycle is the one every container engine shares (``engines.server``): a
workflow run keeps one Db2 server for all its points, since no knob of the lab needs a new
instance. Each point gets, inside its database, a buffer pool and an automatic storage table
space of the point's page size, dropped when the point ends; the table lives in that table
space, so every physical knob is a documented clause of CREATE BUFFERPOOL / CREATE TABLESPACE:

- page_size      PAGESIZE of both (equal by construction: Db2 only pairs equal sizes)
- buffer_pool    CREATE BUFFERPOOL ... SIZE n (pages)
- extent_size    EXTENTSIZE (2..256 pages, the dft_extent_sz range)
- prefetch_size  PREFETCHSIZE (pages, or AUTOMATIC; IBM advises a multiple of EXTENTSIZE,
                 and the validator warns otherwise, see ``db2_info``)
- overhead_ms / transferrate_ms  OVERHEAD / TRANSFERRATE (the optimizer's I/O costs;
                 INHERIT from the storage group when the point leaves them out)
- direct_io      NO FILE SYSTEM CACHING / FILE SYSTEM CACHING
- lock_granularity  ALTER TABLE ... LOCKSIZE ROW|TABLE, plus LOCK TABLE ... IN EXCLUSIVE
                 MODE at the start of each transaction for table-level runs
- index          CREATE INDEX; CREATE INDEX ... CLUSTER + REORG TABLE ... INDEX; CREATE
                 UNIQUE INDEX ... INCLUDE (covering on a unique key) or a composite index
- sync_mode / network_rtt_ms  an HADR standby in a second container in that HADR_SYNCMODE, its
                 log shipped through the lab's delay proxy (``engines.db2_hadr``)

Every statement and CLP command comes from a small pure function in ``engines.db2_sql``, so
tests check them against the documented syntax without a server, and ``tunelab plan --sql``
prints them (``engines.db2_statements``, with the timed statements' dialect); the knobs and
the rules across them are in ``engines.db2_info``, the built table's read-back in
``engines.db2_layout``, and this module holds the engine that runs them.

Cold: FLUSH BUFFERPOOLS only writes dirty pages, it does not empty the pool. The lab forces
the applications off and deactivates the database through the CLP inside the container,
evicts the table space container files from the host's page cache, then activates again.

Timed statements reach Db2 with their integer values written in (``bind``), so each is
compiled for its own selectivity; ``access: forced`` ends each with an embedded optimization
guideline (IXSCAN of the index the knob built, or TBSCAN). Every distinct statement is
explained first (EXPLAIN PLAN into the explain tables, read back from EXPLAIN_OPERATOR,
EXPLAIN_STREAM and EXPLAIN_ARGUMENT) and normalised to scan / index:<IX> / index-only:<IX>.
The engine time is MON_GET_CONNECTION's TOTAL_RQST_TIME of the timed connections.
"""

from __future__ import annotations

import os
import shutil
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunelab.engines import db2_hadr
from tunelab.engines import db2_statements as statements
from tunelab.engines.base import (
    CacheState,
    EngineError,
    IndexPlan,
)
from tunelab.engines.db2_explain import (
    EXPLAIN_SCHEMA,
    EXPLAIN_TABLES,
    explain_tables_sql,
    optprofile_script,
)
from tunelab.engines.db2_info import IMAGE, INFO, DB2KnobRules
from tunelab.engines.db2_layout import DB2Layout
from tunelab.engines.db2_sql import (
    APPLICATION_HANDLE_SQL,
    AUTOMATIC,
    CONNECTION_COUNTERS,
    DATA_MOUNT,
    DATABASE,
    INSTANCE,
    LOAD_DIR,
    applied_sql,
    bufferpool_ddl,
    bufferpool_name,
    clp,
    cold_commands,
    connection_sql,
    container_env,
    counter_sql,
    counters_from,
    direct_io_knob,
    drop_table_sql,
    engine_time_from,
    expected_kind,
    host_path,
    ident,
    index_ddl,
    index_kind,
    load_sql,
    locksize_ddl,
    locksize_knob,
    point_cleanup_sql,
    pool_size_sql,
    readable_script,
    runstats_sql,
    table_ddl,
    table_sql,
    tablespace_ddl,
    tablespace_name,
)
from tunelab.engines.server import ServerBuilds, ServerEngine
from tunelab.hadr.model import CALCULATOR_MODES
from tunelab.host import cache
from tunelab.store.dataset import Dataset

# Another local tag of the image than the pinned one (db2_info.IMAGE).
IMAGE_ENV = "TUNELAB_DB2_IMAGE"
PORT = 50000
READY_LOG = r"Setup has completed"
READY_TIMEOUT_S = 15 * 60  # a first start takes 2-10 minutes
PRIVILEGED_ENV = "TUNELAB_DB2_PRIVILEGED"  # "1": --privileged instead of IPC capabilities
# The pool is allocated at once (IMMEDIATE) unless database shared memory is short, in which
# case Db2 defers it to the next activation: provision then reactivates once.
CONNECT_ATTEMPTS_S = 120
# After activation Db2 reads container tags and space maps: allow this many extents per
# container file to be resident and still call the cache cold.
COLD_ALLOWANCE_EXTENTS = 2


# -- the image ---------------------------------------------------------------------------------
def image() -> str:
    return os.environ.get(IMAGE_ENV) or IMAGE


def image_missing_message(tag: str) -> str:
    return (
        f"DB2 Community image {tag} not present locally: run `docker pull {tag}` on a host "
        "that reaches the registry (or `docker load` a saved copy); see containers/db2/README.md"
    )


# -- the engine -------------------------------------------------------------------------------
class Db2Builds(ServerBuilds):
    def keep(self, table: str, key: str, changes: bool) -> None:
        """Not kept: a Db2 point's table lives in the point's own table space (its page size,
        extent and prefetch), dropped with it at the point's end."""


class DB2Engine(ServerEngine):
    info = INFO
    builds_class = Db2Builds
    dialect_class = statements.Db2Dialect
    knob_rules = DB2KnobRules(INFO)
    layout_class = DB2Layout
    # HADR_SYNCMODE: the HADR calculator's own modes, which are IBM's model of them.
    replication = CALCULATOR_MODES
    standby_class = db2_hadr.HadrStandby
    replica: db2_hadr.HadrStandby
    port = PORT
    database = DATABASE
    admin_database = DATABASE
    connect_errors = (Exception,)  # ibm_db raises plain Exceptions while Db2 starts
    connect_pause_s = 2

    @classmethod
    def preflight(cls) -> None:
        require_image(image())

    def __init__(self, workdir: Path, run_id: str):
        super().__init__(workdir, run_id)
        self.image = image()
        self._files: list[Path] = []
        self._table: str | None = None
        self._version: str | None = None
        # Application handle of each lab connection, for its request metrics (engine time).
        self._handles: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()

    @property
    def connect_deadline_s(self) -> float:  # a first activation takes minutes
        return CONNECT_ATTEMPTS_S

    @property
    def host_dir(self) -> Path:
        return self.home

    # -- lifecycle ---------------------------------------------------------------------------
    # No Db2 knob of the lab needs a new instance: a run keeps one server for all its points,
    # each point getting its own buffer pool and table space (dropped when it ends).
    def provision(self, knobs: dict[str, Any]) -> None:
        require_image(self.image)  # before anything starts
        super().provision(knobs)

    def keep_key(self, knobs: dict[str, Any]) -> str:
        """A server with a standby (archive logging, HADR) is never attached by a point
        without one, nor the reverse."""
        key = super().keep_key(knobs)
        return key + "r" if db2_hadr.wants_standby(knobs) else key

    def image_tag(self, knobs: dict[str, Any] | None = None) -> str:
        require_image(self.image)
        return self.image

    def container_spec(self) -> Any:
        from tunelab.host import containers

        db2_hadr.mount_dir(self.home)  # not world-writable: see there
        return containers.ContainerSpec(
            image=self.image,
            port=PORT,
            env=container_env(self.password),
            volumes={str(self.home): DATA_MOUNT},
            cap_add=[] if _privileged() else ["IPC_LOCK", "IPC_OWNER"],
            privileged=_privileged(),
            ready_log=READY_LOG,
            ready_timeout_s=READY_TIMEOUT_S,
            secrets=(self.password,),
        )

    def wait_connectable(self) -> None:
        self.query("VALUES 1")  # a short-lived connection: Db2 work never holds one open

    def after_start(self) -> None:
        if "restarted" in self._clp(optprofile_script(), "enable optimization guidelines"):
            self.wait_connectable()
        self._ensure_explain_tables()

    def prepare_point(self, knobs: dict[str, Any]) -> None:
        if db2_hadr.wants_standby(knobs):
            self.replica.ensure_standby(knobs)  # first: the point's objects are then replayed on it
        page = int(knobs["page_size"])
        self.execute([bufferpool_ddl(knobs)])
        if self._pool_pages() != int(knobs["buffer_pool"]):
            self._restart_database()  # a deferred pool is allocated at the next activation
        self.execute([tablespace_ddl(knobs)])
        self._files = self._container_files(page)

    def release_point(self) -> None:
        self.execute(point_cleanup_sql(self._table, int(self.knobs["page_size"])))

    def remove_container(self) -> None:
        self.replica.remove_standby()  # first: its files are below the primary's data mount
        if self.container is not None and os.geteuid() != 0:
            # The files belong to the instance owner's uid: only root inside can remove them.
            self.container.exec(["sh", "-c", f"rm -rf {DATA_MOUNT}/*"], user="root")
        super().remove_container()

    def teardown(self) -> None:
        try:
            super().teardown()  # a kept primary keeps its standby (same run, its own key)
        finally:
            self.replica.stop_proxy()

    def open_connection(self, database: str | None, autocommit: bool, timeout_s: float) -> Any:
        assert self.container is not None
        host, port = self.container.client_address()
        return self._open(database, port, autocommit, timeout_s, host)

    def open_at(self, port: int, timeout_s: float) -> Any:
        """An autocommit connection to the lab's database through ``port`` (a proxy's)."""
        return self._open(DATABASE, port, True, timeout_s)

    def _open(
        self,
        database: str | None,
        port: int,
        autocommit: bool,
        timeout_s: float,
        host: str = "127.0.0.1",
    ) -> Any:
        import ibm_db_dbi

        dsn = (
            f"DATABASE={database or DATABASE};HOSTNAME={host};"
            f"PORT={port};PROTOCOL=TCPIP;UID={INSTANCE};"
            f"PWD={self.password};CONNECTTIMEOUT={max(1, int(timeout_s))};"
        )
        conn = ibm_db_dbi.connect(dsn, "", "")  # autocommit off (the driver's default)
        if autocommit:
            conn.set_autocommit(True)
        return conn

    # -- SQL helpers ---------------------------------------------------------------------------
    def execute(self, statements: Sequence[str], conn: Any = None) -> None:
        """Run statements on a short-lived connection, committing after each (Db2 DDL is
        transactional; ADMIN_CMD REORG wants no open unit of work)."""
        own = conn is None
        conn = conn or self.connect()
        try:
            cur = conn.cursor()
            for stmt in statements:
                try:
                    cur.execute(stmt)
                    conn.commit()
                except Exception as exc:
                    conn.rollback()
                    raise EngineError(f"db2: {stmt[:120]}: {statements.one_line(exc)}") from None
            cur.close()
        finally:
            if own:
                conn.close()

    def query(self, sql: str) -> list[tuple]:
        conn = self.connect()
        try:
            cur = conn.cursor()
            try:
                cur.execute(sql)
                rows = [tuple(r) for r in cur.fetchall()]
            except Exception as exc:
                raise EngineError(f"db2: {sql[:120]}: {statements.one_line(exc)}") from None
            conn.commit()
            return rows
        finally:
            conn.close()

    def _ensure_explain_tables(self) -> None:
        q = explain_tables_sql()
        if int(self.query(q["check"])[0][0]) >= len(EXPLAIN_TABLES):
            return
        self.execute([q["create"]])
        if int(self.query(q["check"])[0][0]) < len(EXPLAIN_TABLES):
            raise EngineError(f"db2: explain tables missing in {EXPLAIN_SCHEMA} after creation")

    def _pool_pages(self) -> int | None:
        rows = self.query(pool_size_sql(int(self.knobs["page_size"])))
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def _container_files(self, page_size: int) -> list[Path]:
        names = [r[0].strip() for r in self.query(applied_sql(page_size)["containers"])]
        files = [p for n in names if (p := host_path(n, self.host_dir)) is not None]
        if not files or len(files) != len(names):
            raise EngineError(
                f"db2: table space containers {names} are not below {DATA_MOUNT}, so the host "
                "cannot evict or measure them"
            )
        code, out = self.container.exec(["sh", "-c", readable_script(), "sh", *names], user="root")
        if code != 0:
            raise EngineError(f"db2: cannot make {names} readable to the host: {out.strip()}")
        return files

    def _clp(self, script: str, what: str) -> str:
        code, out = self.container.exec(clp(script), user="root")
        if code != 0:
            raise EngineError(f"db2: {what} failed (exit {code}): {' '.join(out.split())[-400:]}")
        return out

    def _standby_back(self) -> None:
        """After the primary's activation: its standby reconnects (it retries by itself)."""
        if self.replica.container is not None:
            self.replica.wait_ready(str(self.knobs["sync_mode"]))

    def _restart_database(self) -> None:
        cmds = cold_commands()
        self._clp(cmds["stop"], "force applications off and deactivate")
        self._clp(cmds["start"], "activate")
        self._standby_back()
        pages = self._pool_pages()
        if pages != int(self.knobs["buffer_pool"]):
            raise EngineError(
                f"db2: buffer pool {bufferpool_name(int(self.knobs['page_size']))} holds "
                f"{pages} pages after activation, asked {self.knobs['buffer_pool']} "
                "(database shared memory too small?)"
            )

    # -- schema --------------------------------------------------------------------------------
    def create_table(self, table: str, index: IndexPlan) -> None:
        conn = self.connect()
        try:
            cur = conn.cursor()
            try:
                cur.execute(drop_table_sql(table))
                conn.commit()
            except Exception:
                conn.rollback()  # SQL0204N: there was none
            page = int(self.knobs["page_size"])
            granularity = self.knobs.get("lock_granularity", "row")
            self.execute([table_ddl(table, page), locksize_ddl(table, granularity)], conn)
        finally:
            conn.close()
        self._table = table
        rows = self.query(table_sql(table)["table"])
        got = locksize_knob(rows[0][1]) if rows else None
        if not rows or rows[0][0].strip() != tablespace_name(page) or got != granularity:
            raise EngineError(f"db2: table {table} not created as asked (catalog: {rows})")

    def bulk_load(self, table: str, source: Any) -> None:
        """LOAD of the data set from a file below the data mount (the data set's CSV without
        its header line), then a count of the rows the table holds."""
        host_file = self.host_dir / LOAD_DIR / f"{source.dataset.key}.del"
        if not host_file.exists():
            host_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = host_file.with_name(f".{host_file.name}.tmp")
            with open(source.csv, "rb") as src, open(tmp, "wb") as dst:
                src.readline()  # the header: LOAD would read it as a row
                shutil.copyfileobj(src, dst)
            tmp.chmod(0o644)  # the instance owner reads it inside
            tmp.replace(host_file)
        self.execute([load_sql(table, f"{DATA_MOUNT}/{LOAD_DIR}/{host_file.name}")])
        got = int(self.query(f"SELECT COUNT(*) FROM {ident(table)}")[0][0])
        if got != source.dataset.rows:
            raise EngineError(
                f"db2: LOAD put {got} rows in {table}, the data set has {source.dataset.rows}"
            )

    def create_index(self, table: str, index: IndexPlan) -> None:
        ddl = index_ddl(table, index)
        self.execute([*ddl, runstats_sql(table, bool(ddl))])
        got = index_kind(index.key, self.query(table_sql(table)["indexes"]))
        if got != expected_kind(index):
            raise EngineError(f"db2: catalog shows index kind {got!r}, asked {index.kind!r}")

    # -- cache and counters --------------------------------------------------------------------
    def make_cold(self) -> CacheState:
        cmds = cold_commands()
        self._clp(cmds["stop"], "force applications off and deactivate")
        method = "force+deactivate+" + cache.evict(self._files)
        self._clp(cmds["start"], "activate")
        self._standby_back()
        if self._pool_pages() != int(self.knobs["buffer_pool"]):
            self._restart_database()
        resident, total = cache.residency(self._files)
        page, extent = int(self.knobs["page_size"]), int(self.knobs["extent_size"])
        allowance = len(self._files) * COLD_ALLOWANCE_EXTENTS * extent * page // cache.PAGE
        achieved = "cold" if resident <= allowance else "partial"
        return CacheState("cold", achieved, method + "+activate", resident, total)

    def counters(self, conns: Sequence[Any]) -> dict[str, float]:
        page = int(self.knobs["page_size"])
        q = counter_sql(page)
        bp = self.query(q["bufferpool"])[0]
        db = self.query(q["database"])[0]
        out = counters_from(bp, db, page, self.query(q["log"])[0])
        handles = [self._application_handle(c) for c in conns]
        conn_row = self.query(connection_sql(handles))[0] if handles else ()
        out.update(engine_time_from(conn_row or [0] * len(CONNECTION_COUNTERS)))
        return out

    def _application_handle(self, conn: Any) -> int:
        """The connection's application handle, asked once on the connection itself (before
        any counters are read, so the question is outside every delta)."""
        handle = self._handles.get(conn)
        if handle is None:
            cur = conn.cursor()
            cur.execute(APPLICATION_HANDLE_SQL)
            handle = int(cur.fetchone()[0])
            cur.close()
            conn.commit()
            self._handles[conn] = handle
        return handle

    def applied_knobs(self) -> dict[str, Any]:
        page = int(self.knobs["page_size"])
        q = applied_sql(page)
        out: dict[str, Any] = {}
        bp = self.query(q["bufferpool"])
        if bp:
            out["buffer_pool"] = int(bp[0][2]) if bp[0][2] is not None else int(bp[0][1])
        ts = self.query(q["tablespace"])
        if ts:
            ps, extent, prefetch, overhead, transfer, bpname, fs_caching = ts[0]
            same_pool = bpname.strip() == bufferpool_name(page) and bp and int(bp[0][0]) == ps
            out["page_size"] = int(ps) if same_pool else f"{ps} (pool {bpname.strip()})"
            out["extent_size"] = int(extent)
            # The catalog's -1 is AUTOMATIC (Db2 sizes it itself).
            out["prefetch_size"] = AUTOMATIC if int(prefetch) == -1 else int(prefetch)
            if "overhead_ms" in self.knobs:
                out["overhead_ms"] = float(overhead)
            if "transferrate_ms" in self.knobs:
                out["transferrate_ms"] = float(transfer)
            out["direct_io"] = direct_io_knob(fs_caching)
        return {k: v for k, v in out.items() if k in self.knobs} | self._applied_replication()

    def _applied_replication(self) -> dict[str, Any]:
        """sync_mode and network_rtt_ms: from MON_GET_HADR with a standby (db2_hadr.applied);
        without one "none" and 0, not asked of the server: a server the lab gave a standby
        never serves a point without one (keep_key), and a point without one does not depend
        on what MON_GET_HADR returns for a database that is no HADR primary."""
        if self.replica.container is None:
            return {"sync_mode": db2_hadr.NONE, "network_rtt_ms": 0}
        proxy = self.replica.proxy
        rtt = 2 * proxy.delay_ms if proxy is not None else None
        return db2_hadr.applied(self.query(db2_hadr.hadr_sql()), rtt)

    def gauges(self) -> dict[str, float]:
        return self.replica.hadr_gauges() if self.replica.container is not None else {}

    def version(self) -> str:
        if self._version is None:
            rows = self.query("SELECT SERVICE_LEVEL FROM SYSIBMADM.ENV_INST_INFO")
            level = rows[0][0].strip() if rows else "Db2 (unknown level)"
            self._version = f"{level} ({self.image})"
        return self._version

    def data_files(self) -> list[Path]:
        return list(self._files)

    def data_bytes(self, table: str) -> int | None:
        try:
            rows = self.query(table_sql(table)["size"])
        except EngineError:
            return None
        if not rows or rows[0][0] is None:
            return None
        return int((rows[0][0] or 0) + (rows[0][1] or 0)) * 1024  # the function reports KB

    # -- review ----------------------------------------------------------------------------------
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
        env = {k: ("<generated>" if "PASSWORD" in k else v) for k, v in container_env("").items()}
        caps = "--privileged" if _privileged() else "--cap-add IPC_LOCK --cap-add IPC_OWNER"
        container = [
            f"-- container: {image()} {caps} -p 127.0.0.1:<free>:{PORT} "
            f"-v <workdir>/db2-data:{DATA_MOUNT} "
            + " ".join(f"-e {k}={v}" for k, v in env.items()),
            f"-- ready when the log says '{READY_LOG}' (timeout {READY_TIMEOUT_S // 60} min)",
        ]
        full = {**INFO.defaults(), **knobs}
        return statements.planned(full, dataset, index, workload, cache, container)


def require_image(tag: str) -> None:
    """EngineError naming the image and how to get it unless it is in the local engine."""
    from tunelab.host import containers

    try:
        client = containers.client()
    except containers.ContainerError as exc:
        raise EngineError(f"db2: {exc}") from None
    from docker.errors import ImageNotFound

    try:
        client.images.get(tag)
    except ImageNotFound:
        raise EngineError(image_missing_message(tag)) from None


def image_present(tag: str) -> bool:
    try:
        require_image(tag)
    except EngineError:
        return False
    return True


def _privileged() -> bool:
    return os.environ.get(PRIVILEGED_ENV, "") == "1"
