"""PostgreSQL's statement text, as small pure functions: the settings file a set of knobs
means, the planner switches of ``access: forced``, DDL of the table and its index and the
catalog layout they leave, EXPLAIN's plan read back, the timed statements' dialect (batched
look-ups, rendered writes, the COPY of a load), and the catalog and statistics queries the
counters and the applied knobs read. Tests check them without a server; ``tunelab plan
--sql`` prints them. The engine that runs them is ``tunelab.engines.postgres``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from tunelab.engines import readahead
from tunelab.engines.base import KEYS_ALIAS, AccessPath, Engine, EngineError, IndexPlan
from tunelab.engines.dialect import Dialect
from tunelab.engines.postgres_standby import STANDBY_NAME
from tunelab.engines.standby import wants_standby
from tunelab.store.dataset import COLUMN_TYPES, COLUMNS, Dataset

DATADIR = "/var/lib/postgresql/data"  # PGDATA of the image (a host directory is mounted here)
CONF_DIR = "/etc/tunelab"  # where the host's settings directory is mounted
CONF_FILE = "postgresql.conf"
BLOCK_SIZE = 8192  # BLCKSZ of Debian's and the official builds
INDEX_KINDS = ("none", "nonclustered", "clustered", "covering", "covering_wrong_order")
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


# -- settings ------------------------------------------------------------------------------
def settings(knobs: dict[str, Any], standby_streams: bool = False) -> dict[str, str]:
    """The settings-file lines a set of knobs means (plus the lab's fixed settings), as
    name -> value already quoted for postgresql.conf. The standby is named only once it
    streams (``standby_streams``): before that no commit waits for it."""
    out: dict[str, str] = {"listen_addresses": "'*'"}
    if wants_standby(knobs):
        out["synchronous_commit"] = str(knobs["sync_mode"])
        if standby_streams:
            out["synchronous_standby_names"] = f"'{STANDBY_NAME}'"
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
    if covers(index):
        # The index-only scan of the covering index is left cheapest (a plain scan of the same
        # index costs its heap fetches on top). Not enable_indexscan = off: in PostgreSQL 15
        # that disables index-only scans too (cost_index), and a full index-only scan of a
        # covering index in the wrong order then loses to the seq scan, both "disabled".
        return {"enable_seqscan": "off", "enable_bitmapscan": "off"}
    # The index, then the heap: a plain or a bitmap index scan.
    return {"enable_seqscan": "off"}


def covers(index: IndexPlan) -> bool:
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
    """What ``PostgresLayout.catalog`` shows once ``table_ddl`` and ``index_ddl`` ran."""
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


# -- the server's set-up -------------------------------------------------------------------
# Knobs applied in place (settings file, pg_reload_conf()) and the setting each one is.
IN_PLACE_SETTINGS = {
    "io_concurrency": "effective_io_concurrency",
    "maintenance_io_concurrency": "maintenance_io_concurrency",
}
SETTING_SQL = "SELECT current_setting(%s)"
RELOAD_SQL = "SELECT pg_reload_conf()"
SETTINGS_ERRORS_SQL = (
    "SELECT sourcefile, sourceline, name, error FROM pg_file_settings WHERE error IS NOT NULL"
)
ROLE_EXISTS_SQL = "SELECT 1 FROM pg_roles WHERE rolname = %s"


def grants_sql(role: str) -> list[str]:
    """The extensions the counters read, and the timed role's privileges."""
    return [
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
        "CREATE EXTENSION IF NOT EXISTS pg_buffercache",
        f"GRANT USAGE ON SCHEMA public TO {role}",
        # Tables the admin creates later are the timed role's to read, write and lock.
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO {role}",
    ]


# -- schema and data -----------------------------------------------------------------------
def drop_table_sql(table: str) -> str:
    return f"DROP TABLE IF EXISTS {table}"


def copy_rows_sql(table: str) -> str:
    """COPY of rows the client sends one by one (psycopg's write_row)."""
    return f"COPY {table} ({', '.join(COLUMNS)}) FROM STDIN"


CATALOG_SQL = (
    "SELECT i.relname, x.indnkeyatts, x.indisunique, x.indisprimary, x.indisclustered, "
    "ARRAY(SELECT a.attname FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(n, pos) "
    "JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n ORDER BY k.pos) "
    "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
    "WHERE x.indrelid = to_regclass(%s) ORDER BY i.relname"
)


def layout_from(rows: Sequence[Sequence[Any]]) -> dict[str, dict[str, Any]]:
    """``CATALOG_SQL``'s rows as ``expected_layout`` writes them."""
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


# -- locking -------------------------------------------------------------------------------
def lock_sql(table: str) -> str:
    return f"LOCK TABLE {table} IN EXCLUSIVE MODE"


def probe_write_sql(table: str) -> str:
    """A write that takes the table lock an UPDATE takes, and changes nothing."""
    return f"UPDATE {table} SET balance = balance WHERE false"


LOCKS_SQL = (
    "SELECT mode FROM pg_locks WHERE pid = %s AND locktype = 'relation' "
    "AND relation = to_regclass(%s) AND granted"
)


def granularity_from(modes: set[str]) -> str:
    # Row: ROW EXCLUSIVE on the table, each row locked by the write itself.
    return "table" if modes & _TABLE_LOCK_MODES else "row"


# -- timed statements ----------------------------------------------------------------------
def explain_sql(sql: str) -> str:
    return f"EXPLAIN (FORMAT JSON) {sql}"


def access_path(doc: Any) -> AccessPath:
    """EXPLAIN (FORMAT JSON)'s document (parsed or not) as the path and the plan's text."""
    if isinstance(doc, str | bytes):
        doc = json.loads(doc)
    return AccessPath(normalise_plan(doc), json.dumps(doc))


class PostgresDialect(Dialect):
    paramstyle = "format"

    def __init__(self, engine: Engine):
        super().__init__(engine)
        self.forced: dict[str, str] = {}  # planner switches of access: forced (table_ref)

    def table_ref(self, table: str, index: IndexPlan, access: str) -> str:
        # No hints in PostgreSQL's SQL: the connections of the point get the planner switches
        # (PostgresEngine.connect); the statement stays the plain table.
        self.forced = planner_switches(index) if access == "forced" else {}
        return table

    def expected_access(self, table: str, index: IndexPlan) -> str:
        if index.kind in ("covering", "covering_wrong_order") and index.key and not covers(index):
            return f"index:{self.index_name(table, index)}"  # a plain index: see covers
        return super().expected_access(table, index)

    def explain(self, conn: Any, sql: str, args: Sequence[Any]) -> AccessPath:
        cur = conn.cursor()
        cur.execute(explain_sql(sql), tuple(args) or None)
        doc = cur.fetchone()[0]
        cur.close()
        return access_path(doc)

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

    def lock_table(self, cursor: Any, table: str) -> None:
        # Inside the transaction psycopg opens (autocommit off); held until its end.
        cursor.execute(lock_sql(table))

    def load(self, table: str, rows: Iterable[Sequence[Any]], batch: int = 10_000) -> None:
        """Bulk-load rows with COPY (untimed set-up), as the lab's role."""
        conn = self.engine.connect()
        try:
            with conn.cursor() as cur, cur.copy(copy_rows_sql(table)) as copy:
                for row in rows:
                    copy.write_row(row)
            conn.commit()
        finally:
            conn.close()


# -- cache and counters --------------------------------------------------------------------
# (oid, file path relative to the data directory) of the tables named, their indexes, TOAST
# tables and TOAST indexes.
RELATIONS_SQL = (
    "WITH t AS (SELECT c.oid, c.reltoastrelid FROM pg_class c "
    "  WHERE c.oid IN (SELECT to_regclass(n) FROM unnest(%s::text[]) n)), "
    "r AS (SELECT oid FROM t "
    "  UNION SELECT reltoastrelid FROM t WHERE reltoastrelid <> 0 "
    "  UNION SELECT indexrelid FROM pg_index WHERE indrelid IN "
    "    (SELECT oid FROM t UNION SELECT reltoastrelid FROM t)) "
    "SELECT oid::int8, pg_relation_filepath(oid) FROM r ORDER BY 1"
)
# Buffers in shared_buffers that hold pages of the relations whose oids are given.
POOL_PAGES_SQL = (
    "SELECT count(*) FROM pg_buffercache b JOIN pg_class c "
    "ON b.relfilenode = pg_relation_filenode(c.oid) "
    "WHERE b.reldatabase = (SELECT oid FROM pg_database WHERE datname = "
    "current_database()) AND c.oid = ANY(%s::oid[])"
)
# The table's idx_* columns already sum its indexes (pg_statio_user_indexes).
STATIO_SQL = (
    "SELECT COALESCE(sum(heap_blks_read), 0), COALESCE(sum(heap_blks_hit), 0), "
    "COALESCE(sum(idx_blks_read), 0), COALESCE(sum(idx_blks_hit), 0) "
    "FROM pg_statio_user_tables WHERE schemaname = 'public' AND relname = ANY(%s)"
)
DATABASE_SQL = (
    "SELECT blk_read_time, deadlocks, xact_commit, xact_rollback FROM pg_stat_database "
    "WHERE datname = current_database()"
)
# The cluster's WAL (every backend's, the background writers' too; flushed with the
# backends' statistics): bytes, the write(2) calls that wrote it (a commit's flush, or a
# full WAL buffer), the fsyncs, their time in ms (track_wal_io_timing).
WAL_SQL = (
    "SELECT wal_records, wal_fpi, wal_bytes, wal_buffers_full, wal_write, wal_sync, "
    "wal_write_time, wal_sync_time FROM pg_stat_wal"
)
# The server's own time in ms (execution plus planning) of every top-level statement of a
# role, but the forced statistics flushes.
STATEMENT_TIME_SQL = (
    "SELECT COALESCE(sum(s.total_exec_time + s.total_plan_time), 0) "
    "FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid "
    "WHERE r.rolname = %s AND s.toplevel AND s.query <> %s"
)
DATA_BYTES_SQL = "SELECT pg_relation_size(r) + pg_indexes_size(r) FROM to_regclass(%s) r"


def counters_from(
    statio: Sequence[Any], database: Sequence[Any], wal: Sequence[Any]
) -> dict[str, float]:
    """The lab's counters from one row each of ``STATIO_SQL``, ``DATABASE_SQL``, ``WAL_SQL``."""
    heap_read, heap_hit, idx_read, idx_hit = statio
    read_ms, deadlocks, commits, rollbacks = database
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
    }


# -- knobs read back -----------------------------------------------------------------------
APPLIED_SETTINGS = (
    "block_size",
    "shared_buffers",
    "effective_io_concurrency",
    "maintenance_io_concurrency",
    "autovacuum",
    "jit",
    "enable_memoize",
    "max_parallel_workers_per_gather",
)
APPLIED_SQL = "SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)"


def applied_from(rows: Sequence[Sequence[Any]], shared_buffers: str) -> dict[str, Any]:
    """The knobs (and the lab's fixed settings) from ``APPLIED_SQL``'s rows of
    ``APPLIED_SETTINGS``; ``shared_buffers`` as current_setting shows it."""
    v = {name: (setting, unit) for name, setting, unit in rows}
    if v["shared_buffers"][1] != "8kB":
        raise EngineError(f"postgres: shared_buffers is in {v['shared_buffers'][1]!r} units")
    return {
        "page_size": int(v["block_size"][0]),
        "buffer_pool": int(v["shared_buffers"][0]),
        "io_concurrency": int(v["effective_io_concurrency"][0]),
        "maintenance_io_concurrency": int(v["maintenance_io_concurrency"][0]),
        # Not knobs, recorded with them: the lab's fixed settings as the server has them.
        "pg_shared_buffers": shared_buffers,
        "pg_autovacuum": v["autovacuum"][0],
        "pg_jit": v["jit"][0],
        "pg_enable_memoize": v["enable_memoize"][0],
        "pg_max_parallel_workers_per_gather": int(v["max_parallel_workers_per_gather"][0]),
    }


# -- review ---------------------------------------------------------------------------------
def planned(
    full: dict[str, Any],
    dataset: Dataset,
    index: IndexPlan,
    workload: str | None,
    cache: str | None,
) -> list[str]:
    """What ``PostgresEngine.planned_sql`` shows for a point of these (full) knobs."""
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
        out.append(f"{RELOAD_SQL}  -- when only in-place settings change")
    switches = " ".join(f"-c {k}={v}" for k, v in planner_switches(index).items())
    out.append(f"-- with access: forced, every lab connection starts with options '{switches}'")
    if writes:
        out.append("-- every repetition, untimed: the table built again")
    out += [drop_table_sql(table), table_ddl(table, index)]
    if workload != "insert":
        out.append(f"{copy_csv_sql(table)}  -- {dataset.rows} rows, the data set's CSV file")
    out += [*index_ddl(table, index), analyse_sql(table)]
    if workload == "insert":
        out[-1] += "  -- the empty table: the timed inserts maintain the index"
    if workload is not None and workload != "insert":
        out.append("EXPLAIN (FORMAT JSON) <statement>  -- before timing, each distinct one")
    if full.get("lock_granularity") == "table":
        out.append(f"{lock_sql(table)}; ...; COMMIT  -- every write transaction")
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
