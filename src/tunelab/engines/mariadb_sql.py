"""MariaDB's statement text, as small pure functions: the option file a set of knobs means,
DDL of the table and its index and the catalog layout they leave, LOAD DATA of the data
set's CSV, EXPLAIN's plan read back, the timed statements' dialect (the hints of ``access:
forced``, batched look-ups, rendered writes, table locks), and the status, catalog and
performance_schema queries the counters and the applied knobs read. Tests check them without
a server; ``tunelab plan --sql`` prints them. The engine that runs them is
``tunelab.engines.mariadb``."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunelab.engines import mariadb_replica as replica
from tunelab.engines import readahead
from tunelab.engines.base import KEYS_ALIAS, AccessPath, EngineError, IndexPlan
from tunelab.engines.dialect import Dialect
from tunelab.store.dataset import COLUMN_TYPES, COLUMNS, Dataset

DATABASE = "tunelab"
INDEX_KINDS = ("none", "nonclustered", "clustered", "covering", "covering_wrong_order")

_TYPES = {"integer": "INT NOT NULL", "char20": "CHAR(20) NOT NULL", "char40": "CHAR(40) NOT NULL"}

# Cumulative SHOW GLOBAL STATUS counters -> the lab's common counter names.
STATUS = {
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


def option_pairs(opts: dict[str, str | tuple[str, ...]]) -> list[tuple[str, str]]:
    """(name, value) per option-file line; a tuple value is an option given several times."""
    return [(k, x) for k, v in opts.items() for x in ((v,) if isinstance(v, str) else v)]


def server_options(knobs: dict[str, Any]) -> dict[str, str | tuple[str, ...]]:
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


def normalise_plan(doc: dict[str, Any]) -> str:
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


def option_file(opts: Sequence[tuple[str, str]]) -> str:
    lines = ["[mariadbd]"] + [f"{k} = {v}" for k, v in opts]
    return "\n".join(lines) + "\n"


# Knobs applied in place (SET GLOBAL) and the variable each one is.
IN_PLACE_VARIABLES = {
    "read_ahead_threshold": "innodb_read_ahead_threshold",
    "random_read_ahead": "innodb_random_read_ahead",
    "buffer_pool": "innodb_buffer_pool_size",
}


def set_global_sql(var: str, value: str) -> str:
    return f"SET GLOBAL {var} = {value}"


def variables_sql(n: int) -> str:
    """SHOW GLOBAL VARIABLES of ``n`` names given as parameters."""
    return f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({_marks(n)})"


def status_sql(n: int) -> str:
    """SHOW GLOBAL STATUS of ``n`` names given as parameters."""
    return f"SHOW GLOBAL STATUS WHERE Variable_name IN ({_marks(n)})"


def _marks(n: int) -> str:
    return ", ".join(["%s"] * n)


# -- schema and data -----------------------------------------------------------------------
def create_database_sql() -> str:
    return f"CREATE DATABASE IF NOT EXISTS {DATABASE}"


def use_sql() -> str:
    return f"USE {DATABASE}"


def drop_table_sql(table: str) -> str:
    return f"DROP TABLE IF EXISTS {DATABASE}.{table}"


def _primary_key(index: IndexPlan) -> tuple[str, ...] | None:
    if index.kind == "clustered" and index.key:
        return _dedup((*index.key, "id"))
    if index.kind == "primary" or "id" not in index.key:
        return ("id",)
    # The key is id and the plan asks for no clustered index on it: InnoDB clusters on its
    # hidden row id, which follows the load order (id order) anyway.
    return None


def table_ddl(table: str, index: IndexPlan) -> str:
    cols = ", ".join(f"{c} {_TYPES[COLUMN_TYPES[c]]}" for c in COLUMNS)
    pk = _primary_key(index)
    key = f", PRIMARY KEY ({', '.join(pk)})" if pk else ""
    return f"CREATE TABLE {table} ({cols}{key}) ENGINE=InnoDB DEFAULT CHARSET=latin1"


def index_ddl(table: str, index: IndexPlan) -> list[str]:
    """Statements run after the load: the secondary index, or the rebuild that packs a
    clustered table (rows arrive in id order, so pages split on the way in)."""
    if index.kind in ("none", "primary"):
        return []
    if index.kind == "clustered":
        return [f"ALTER TABLE {table} FORCE"] if index.key not in ((), ("id",)) else []
    cols = index_columns(index)
    unique = "UNIQUE " if index.key == ("id",) and index.kind != "covering_wrong_order" else ""
    return [f"CREATE {unique}INDEX {table}_{index.kind} ON {table} ({', '.join(cols)})"]


def index_columns(index: IndexPlan) -> tuple[str, ...]:
    if index.kind == "nonclustered":
        return index.key
    if index.kind == "covering":
        return _dedup((*index.key, *index.include))
    if index.kind == "covering_wrong_order":
        return _dedup((*[c for c in index.include if c not in index.key], *index.key))
    raise EngineError(
        f"mariadb: unknown index kind {index.kind!r} (allowed: {', '.join(INDEX_KINDS)})"
    )


def analyze_sql(table: str) -> str:
    return f"ANALYZE TABLE {table}"


def count_sql(table: str) -> str:
    return f"SELECT COUNT(*) FROM {table}"


# Each index's columns (PRIMARY: the clustering key InnoDB stores the rows by).
CATALOG_SQL = (
    "SELECT index_name, column_name FROM information_schema.STATISTICS "
    "WHERE table_schema = %s AND table_name = %s ORDER BY index_name, seq_in_index"
)


def layout_from(rows: Sequence[Sequence[Any]]) -> dict[str, list[str]]:
    """``CATALOG_SQL``'s rows as ``expected_layout`` writes them."""
    have: dict[str, list[str]] = {}
    for name, col in rows:
        have.setdefault(name, []).append(col)
    return have


def expected_layout(table: str, index: IndexPlan) -> dict[str, list[str]]:
    want: dict[str, list[str]] = {}
    pk = re.search(r"PRIMARY KEY \(([^)]*)\)", table_ddl(table, index))
    if pk:
        want["PRIMARY"] = pk.group(1).split(", ")
    if index.kind not in ("none", "primary", "clustered"):
        want[index_name(table, index)] = list(index_columns(index))
    return want


def _indexes(table: str, index: IndexPlan) -> list[str]:
    """Every index the plan gives the table, as InnoDB names them."""
    names = ["PRIMARY"] if "PRIMARY KEY" in table_ddl(table, index) else []
    if index.kind not in ("none", "primary", "clustered"):
        names.append(f"{table}_{index.kind}")
    return names


DATA_BYTES_SQL = (
    "SELECT data_length + index_length FROM information_schema.TABLES "
    "WHERE table_schema = %s AND table_name = %s"
)


# -- locking -------------------------------------------------------------------------------
# LOCK TABLES commits any open transaction; with autocommit off it also takes an InnoDB
# table lock, and the caller's COMMIT must come before UNLOCK TABLES.
AUTOCOMMIT_OFF_SQL = "SET autocommit = 0"
UNLOCK_SQL = "UNLOCK TABLES"


def lock_sql(table: str) -> str:
    return f"LOCK TABLES {table} WRITE"


# SHOW OPEN TABLES counts LOCK TABLES; the storage engine says whether rows are locked.
OPEN_TABLES_SQL = f"SHOW OPEN TABLES FROM {DATABASE} WHERE `Table` = %s AND In_use > 0"
STORAGE_SQL = (
    "SELECT engine FROM information_schema.TABLES WHERE table_schema = %s AND table_name = %s"
)


# -- timed statements ----------------------------------------------------------------------
def index_name(table: str, index: IndexPlan) -> str:
    # InnoDB stores the rows in the primary key's b-tree: the clustered index is PRIMARY.
    # With that name the base rule of expected_access holds for every kind on InnoDB:
    # clustered -> index:PRIMARY, covering and covering_wrong_order (a full scan of the
    # covering index) -> index-only, nonclustered -> index, none -> scan.
    return "PRIMARY" if index.kind == "clustered" else f"{table}_{index.kind}"


def explain_sql(sql: str) -> str:
    return f"EXPLAIN FORMAT=JSON {sql}"


class MariaDBDialect(Dialect):
    paramstyle = "format"

    def index_name(self, table: str, index: IndexPlan) -> str:
        return index_name(table, index)

    def table_ref(self, table: str, index: IndexPlan, access: str) -> str:
        if access != "forced":
            return table
        if index.kind == "none" or not index.key:
            # No key access at all: IGNORE every index (a scan; an empty list is a syntax error).
            names = _indexes(table, index)
            return f"{table} IGNORE INDEX ({', '.join(names)})" if names else table
        # FORCE INDEX makes a table scan the last resort: the index is used whenever it can be
        # (a covering index in the wrong order by a full scan of it).
        return f"{table} FORCE INDEX ({index_name(table, index)})"

    def explain(self, conn: Any, sql: str, args: Sequence[Any]) -> AccessPath:
        cur = conn.cursor()
        cur.execute(explain_sql(sql), tuple(args) or None)
        raw = cur.fetchone()[0]
        cur.close()
        return AccessPath(normalise_plan(json.loads(raw)), raw)

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

    def lock_table(self, cursor: Any, table: str) -> None:
        cursor.execute(AUTOCOMMIT_OFF_SQL)  # first: see AUTOCOMMIT_OFF_SQL
        cursor.execute(lock_sql(table))

    def unlock_tables(self, cursor: Any) -> None:
        cursor.execute(UNLOCK_SQL)


# -- cache and counters --------------------------------------------------------------------
# Purge of earlier statements' old row versions reads undo pages (from disk after a
# restart) and writes redo: this waits until the history list is empty (blocks; MariaDB
# >= 10.5.7).
PURGE_SQL = "SET GLOBAL innodb_max_purge_lag_wait = 0"
# Every table page in the pool is on its LRU list; INNODB_BUFFER_PAGE would walk every block
# of the pool, free ones too (37 ms for a 1 GiB pool, 1 ms this way).
POOL_PAGES_SQL = (
    "SELECT COUNT(*) FROM information_schema.INNODB_BUFFER_PAGE_LRU WHERE table_name LIKE %s"
)
POOL_PAGES_ARGS = (f"`{DATABASE}`.%",)


def counters_from(values: dict[str, str]) -> dict[str, float]:
    """The lab's counters from SHOW GLOBAL STATUS of ``STATUS``'s variables."""
    return {name: float(values.get(var, "nan")) for var, name in STATUS.items()}


def busy_sql(n: int) -> str:
    """How many of ``n`` connections (ids as parameters) are not back to Sleep."""
    return (
        f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ({_marks(n)}) "
        "AND COMMAND <> 'Sleep'"
    )


def statement_time_sql(n: int) -> str:
    """The threads found and their statements' time in ps, of ``n`` connection ids."""
    return (
        "SELECT COUNT(DISTINCT t.THREAD_ID), COALESCE(SUM(s.SUM_TIMER_WAIT), 0) "
        "FROM performance_schema.threads t "
        "LEFT JOIN performance_schema.events_statements_summary_by_thread_by_event_name s "
        f"ON s.THREAD_ID = t.THREAD_ID WHERE t.PROCESSLIST_ID IN ({_marks(n)})"
    )


# -- knobs read back -----------------------------------------------------------------------
APPLIED_VARIABLES = (
    "innodb_page_size",
    "innodb_buffer_pool_size",
    "innodb_read_ahead_threshold",
    "innodb_random_read_ahead",
    "innodb_flush_method",
    "innodb_buffer_pool_dump_at_shutdown",
    "innodb_buffer_pool_load_at_startup",
)


def applied_from(v: dict[str, str], pages_total: str) -> dict[str, Any]:
    """The knobs (and the cold set-up) from ``APPLIED_VARIABLES``' values and
    Innodb_buffer_pool_pages_total."""
    page = int(v["innodb_page_size"])
    return {
        "page_size": page,
        "buffer_pool": int(v["innodb_buffer_pool_size"]) // page,
        "read_ahead_threshold": int(v["innodb_read_ahead_threshold"]),
        "random_read_ahead": v["innodb_random_read_ahead"] == "ON",
        "direct_io": v["innodb_flush_method"].upper().startswith("O_DIRECT"),
        # Not knobs, recorded with them: what the pool really holds, and the cold setup.
        "innodb_buffer_pool_bytes": int(v["innodb_buffer_pool_size"]),
        "innodb_buffer_pool_pages_total": int(pages_total),
        "innodb_flush_method": v["innodb_flush_method"],
        "innodb_buffer_pool_dump_load": f"{v['innodb_buffer_pool_dump_at_shutdown']}/"
        f"{v['innodb_buffer_pool_load_at_startup']}",
    }


# -- review ---------------------------------------------------------------------------------
def planned(
    full: dict[str, Any],
    dataset: Dataset,
    index: IndexPlan,
    workload: str | None,
    cache: str | None,
) -> list[str]:
    """What ``MariaDBEngine.planned_sql`` shows for a point of these (full) knobs."""
    opts = " ".join(f"--{k}={v}" for k, v in option_pairs(server_options(full)))
    table = dataset.table
    writes = workload in ("insert", "update")
    opts += "".join(f" --{k}={v}" for k, v in replica.primary_options(full, False).items())
    out = readahead.planned(full, "the data directory")
    out += [f"-- container tunelab/mariadb (or the official image), fresh datadir, {opts}"]
    out += replica.planned_sql(full, DATABASE)
    if writes:
        out.append("-- every repetition, untimed: the table built again")
    out += [drop_table_sql(table), table_ddl(table, index)]
    if workload != "insert":
        out.append(
            f"{load_sql(table, f'<data dir>/{dataset.key}.csv')}  -- {dataset.rows} "
            "rows, then SELECT COUNT(*)"
        )
    out += [*index_ddl(table, index), analyze_sql(table)]
    if workload == "insert":
        out[-1] += "  -- the empty table: the timed inserts maintain the index"
    if workload is not None and workload != "insert":
        out.append("EXPLAIN FORMAT=JSON <statement>  -- before timing, each distinct one")
    if full.get("lock_granularity") == "table":
        out.append(
            f"{AUTOCOMMIT_OFF_SQL}; {lock_sql(table)}; ...; COMMIT; "
            f"{UNLOCK_SQL}  -- around every transaction"
        )
    cold = "cold" if cache == "cold" else "cold points"
    before = {"cold": "each cold start", "warm": "each warm-up"}.get(
        cache, "each cold start or warm-up"
    )
    out.append(f"{PURGE_SQL}  -- purge done before {before}")
    if cache in (None, "cold"):
        out.append(f"-- {cold}: restart (no buffer pool dump/load), evict data files, check")
    if cache in (None, "warm"):
        what = f"SELECT * FROM {table}" if writes else "the timed statements"
        warm = "warm" if cache == "warm" else "warm points"
        out.append(f"-- {warm}: {what} once, untimed, on the timed connections")
    return out
