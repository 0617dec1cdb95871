"""Db2's statement text, as small pure functions: DDL of a point's buffer pool, table space,
table and index, the LOAD and RUNSTATS commands, monitor and catalog queries and how their
rows read, and the CLP scripts run inside the container (a timed statement's literals, its
optimization guideline and EXPLAIN are in ``engines.db2_explain``).
Tests check them against the documented syntax without a server; ``tunelab plan --sql``
prints them. The engine that runs them is ``tunelab.engines.db2``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from tunelab.engines.base import EngineError, IndexPlan
from tunelab.store.dataset import COLUMN_TYPES, COLUMNS

INSTANCE = "db2inst1"  # instance owner, also the user the lab connects as
SCHEMA = INSTANCE.upper()
DATABASE = "TUNELAB"  # at most 8 characters
DATA_MOUNT = "/database"  # the image keeps instance home and databases below this path

PAGE_SIZES = (4096, 8192, 16384, 32768)
AUTOMATIC = "automatic"  # PREFETCHSIZE AUTOMATIC: Db2 sizes it at each activation
INDEX_KINDS = ("none", "nonclustered", "clustered", "covering", "covering_wrong_order")
_SQL_TYPES = {"integer": "INTEGER", "char20": "CHAR(20)", "char40": "CHAR(40)"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def is_automatic(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == AUTOMATIC


# -- names and literals -----------------------------------------------------------------------
def ident(name: str) -> str:
    """An ordinary SQL identifier (folded to upper case as Db2 does), else EngineError."""
    if not _IDENT.match(name):
        raise EngineError(f"db2: {name!r} is not a plain SQL identifier")
    return name.upper()


def sql_number(value: float) -> str:
    """A decimal numeric literal without exponent (Db2 accepts it for OVERHEAD/TRANSFERRATE)."""
    text = format(Decimal(repr(float(value))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def page_kb(page_size: int) -> int:
    if page_size not in PAGE_SIZES:
        raise EngineError(
            f"db2: page_size {page_size} not allowed ({', '.join(map(str, PAGE_SIZES))})"
        )
    return page_size // 1024


def bufferpool_name(page_size: int) -> str:
    return f"TL_BP_{page_kb(page_size)}K"


def tablespace_name(page_size: int) -> str:
    return f"TL_TS_{page_kb(page_size)}K"


def index_name(table: str, kind: str) -> str:
    return ident(f"IX_{table}_{kind}")


# -- statements ----------------------------------------------------------------------------------
def bufferpool_ddl(knobs: dict[str, Any]) -> str:
    page = int(knobs["page_size"])
    return (
        f"CREATE BUFFERPOOL {bufferpool_name(page)} IMMEDIATE "
        f"SIZE {int(knobs['buffer_pool'])} PAGESIZE {page_kb(page)}K"
    )


def tablespace_ddl(knobs: dict[str, Any]) -> str:
    """Clauses in the order of IBM's syntax diagram for CREATE TABLESPACE."""
    page = int(knobs["page_size"])
    overhead = knobs.get("overhead_ms")
    transfer = knobs.get("transferrate_ms")
    caching = "NO FILE SYSTEM CACHING" if knobs.get("direct_io", True) else "FILE SYSTEM CACHING"
    prefetch = knobs["prefetch_size"]
    prefetch = "AUTOMATIC" if is_automatic(prefetch) else int(prefetch)
    return (
        f"CREATE LARGE TABLESPACE {tablespace_name(page)} PAGESIZE {page_kb(page)}K "
        "MANAGED BY AUTOMATIC STORAGE "
        f"EXTENTSIZE {int(knobs['extent_size'])} PREFETCHSIZE {prefetch} "
        f"BUFFERPOOL {bufferpool_name(page)} "
        f"OVERHEAD {'INHERIT' if overhead is None else sql_number(overhead)} "
        f"{caching} "
        f"TRANSFERRATE {'INHERIT' if transfer is None else sql_number(transfer)}"
    )


def table_ddl(table: str, page_size: int) -> str:
    """Row-organised table of the dataset's columns in the point's table space (its indexes
    go there too: Db2's default for a DMS/automatic storage table space)."""
    cols = ", ".join(f"{c.upper()} {_SQL_TYPES[COLUMN_TYPES[c]]} NOT NULL" for c in COLUMNS)
    return f"CREATE TABLE {ident(table)} ({cols}) IN {tablespace_name(page_size)} ORGANIZE BY ROW"


def drop_table_sql(table: str) -> str:
    return f"DROP TABLE {ident(table)}"


def locksize_ddl(table: str, granularity: str) -> str:
    sizes = {"row": "ROW", "table": "TABLE"}
    if granularity not in sizes:
        raise EngineError(f"db2: lock_granularity {granularity!r} not allowed (row, table)")
    return f"ALTER TABLE {ident(table)} LOCKSIZE {sizes[granularity]}"


def lock_sql(table: str) -> str:
    return f"LOCK TABLE {ident(table)} IN EXCLUSIVE MODE"


def key_join_sql(table: str, table_ref: str, n: int, alias: str) -> str:
    """A batched look-up's FROM clause: a VALUES list of ``n`` typed markers (Db2 refuses an
    untyped marker in a VALUES list) joined to the table on id."""
    rows = ", ".join(["(CAST(? AS INTEGER))"] * n)
    return f"(VALUES {rows}) AS {alias}(id) JOIN {table_ref} ON {table}.id = {alias}.id"


def _unique(cols: Sequence[str]) -> list[str]:
    return [c.upper() for c in dict.fromkeys(cols)]


def index_columns(index: IndexPlan) -> tuple[list[str], list[str]]:
    """(key columns, INCLUDE columns) of the plan's index."""
    key = _unique(index.key)
    extra = [c for c in _unique(index.include) if c not in key]
    if index.kind in ("none",):
        return [], []
    if index.kind in ("nonclustered", "clustered"):
        return key, []
    if index.kind == "covering":
        # INCLUDE is only legal on a unique index: a unique key carries the selected columns
        # as INCLUDE columns, any other key as trailing key columns.
        return (key, extra) if key_unique(index) else (key + extra, [])
    if index.kind == "covering_wrong_order":
        return extra + key, []
    raise EngineError(f"db2: unknown index kind {index.kind!r} ({', '.join(INDEX_KINDS)})")


def key_unique(index: IndexPlan) -> bool:
    return tuple(c.lower() for c in index.key) == ("id",)


def index_ddl(table: str, index: IndexPlan) -> list[str]:
    """CREATE INDEX statement(s) of the plan; a clustering index is followed by the REORG that
    puts the rows in its order (ADMIN_CMD, so it runs over the lab's SQL connection)."""
    key, include = index_columns(index)
    if not key:
        return []
    name = index_name(table, index.kind)
    unique = "UNIQUE " if key_unique(index) and index.kind != "covering_wrong_order" else ""
    ddl = f"CREATE {unique}INDEX {name} ON {ident(table)} ({', '.join(key)})"
    if include:
        ddl += f" INCLUDE ({', '.join(include)})"
    if index.kind == "clustered":
        return [
            ddl + " CLUSTER",
            admin_cmd(f"REORG TABLE {SCHEMA}.{ident(table)} INDEX {SCHEMA}.{name}"),
        ]
    return [ddl]


LOAD_DIR = "load"  # below the data mount: the files LOAD reads on the server


def load_sql(table: str, server_file: str) -> str:
    """Db2's bulk path, run on the server through ADMIN_CMD: LOAD of a delimited file (DEL:
    comma-separated, strings may go unquoted) the server reads itself, its messages kept on
    the server, NONRECOVERABLE (no backup pending: the lab's tables are rebuilt at will)."""
    return admin_cmd(
        f"LOAD FROM {server_file} OF DEL MESSAGES ON SERVER "
        f"INSERT INTO {SCHEMA}.{ident(table)} NONRECOVERABLE"
    )


def runstats_sql(table: str, with_indexes: bool) -> str:
    what = "WITH DISTRIBUTION AND DETAILED INDEXES ALL" if with_indexes else "WITH DISTRIBUTION"
    return admin_cmd(f"RUNSTATS ON TABLE {SCHEMA}.{ident(table)} {what}")


def admin_cmd(command: str) -> str:
    if "'" in command:
        raise EngineError(f"db2: quote in ADMIN_CMD command {command!r}")
    return f"CALL SYSPROC.ADMIN_CMD('{command}')"


# Cumulative counters (since activation) of the point's buffer pool; summed over members.
BUFFERPOOL_COUNTERS = (
    "POOL_DATA_L_READS",
    "POOL_INDEX_L_READS",
    "POOL_TEMP_DATA_L_READS",
    "POOL_TEMP_INDEX_L_READS",
    "POOL_DATA_P_READS",
    "POOL_INDEX_P_READS",
    "POOL_TEMP_DATA_P_READS",
    "POOL_TEMP_INDEX_P_READS",
    "POOL_ASYNC_DATA_READS",
    "POOL_ASYNC_INDEX_READS",
    "POOL_READ_TIME",
    "POOL_ASYNC_READ_TIME",
    "UNREAD_PREFETCH_PAGES",
    "DIRECT_READS",
    "POOL_DATA_WRITES",
    "POOL_INDEX_WRITES",
    "POOL_WRITE_TIME",
    "VECTORED_IOS",
    "PAGES_FROM_VECTORED_IOS",
    "BLOCK_IOS",
    "PAGES_FROM_BLOCK_IOS",
    "PREFETCH_WAITS",
    "PREFETCH_WAIT_TIME",
)
DATABASE_COUNTERS = ("LOCK_WAITS", "LOCK_ESCALS", "LOCK_WAIT_TIME", "LOCK_TIMEOUTS", "DEADLOCKS")
# The log's (MON_GET_TRANSACTION_LOG): pages written (LOG_WRITES, 4 KiB log pages), the write
# requests that wrote them (NUM_LOG_WRITE_IO: the log writer's flushes, each synchronous),
# their time in ms, and how often a full log buffer made an agent wait.
LOG_COUNTERS = ("LOG_WRITES", "NUM_LOG_WRITE_IO", "LOG_WRITE_TIME", "NUM_LOG_BUFFER_FULL")
LOG_PAGE_BYTES = 4096


def counter_sql(page_size: int) -> dict[str, str]:
    """The two monitor queries whose cumulative results ``counters`` returns."""
    bp = bufferpool_name(page_size)
    sums = ", ".join(f"SUM({c})" for c in BUFFERPOOL_COUNTERS)
    db_sums = ", ".join(f"SUM({c})" for c in DATABASE_COUNTERS)
    log_sums = ", ".join(f"SUM({c})" for c in LOG_COUNTERS)
    return {
        "bufferpool": f"SELECT {sums} FROM TABLE(MON_GET_BUFFERPOOL('{bp}', -2)) AS T",
        "database": f"SELECT {db_sums} FROM TABLE(MON_GET_DATABASE(-2)) AS T",
        "log": f"SELECT {log_sums} FROM TABLE(MON_GET_TRANSACTION_LOG(-2)) AS T",
    }


def counters_from(
    bp: Sequence[Any], db: Sequence[Any], page_size: int, log: Sequence[Any] | None = None
) -> dict[str, float]:
    """Common counter keys (engines.md) plus db2_ extras from the monitor rows."""
    b = {c: float(v or 0) for c, v in zip(BUFFERPOOL_COUNTERS, bp, strict=True)}
    d = {c: float(v or 0) for c, v in zip(DATABASE_COUNTERS, db, strict=True)}
    g = {
        c: float(v or 0) for c, v in zip(LOG_COUNTERS, log or [0] * len(LOG_COUNTERS), strict=True)
    }
    physical = (
        b["POOL_DATA_P_READS"]
        + b["POOL_INDEX_P_READS"]
        + b["POOL_TEMP_DATA_P_READS"]
        + b["POOL_TEMP_INDEX_P_READS"]
    )
    out = {
        "logical_reads": b["POOL_DATA_L_READS"]
        + b["POOL_INDEX_L_READS"]
        + b["POOL_TEMP_DATA_L_READS"]
        + b["POOL_TEMP_INDEX_L_READS"],
        # Db2's physical reads include the pages its prefetchers read (async reads).
        "physical_reads": physical,
        "prefetch_reads": b["POOL_ASYNC_DATA_READS"] + b["POOL_ASYNC_INDEX_READS"],
        "prefetch_evicted": b["UNREAD_PREFETCH_PAGES"],
        "data_read_bytes": physical * page_size,
        "read_time_ms": b["POOL_READ_TIME"],
        "lock_waits": d["LOCK_WAITS"],
        "lock_escalations": d["LOCK_ESCALS"],
        "lock_wait_time_ms": d["LOCK_WAIT_TIME"],
        "log_bytes": g["LOG_WRITES"] * LOG_PAGE_BYTES,
        "log_writes": g["NUM_LOG_WRITE_IO"],
        "log_syncs": g["NUM_LOG_WRITE_IO"],  # Db2 writes its log synchronously
        "log_write_time_ms": g["LOG_WRITE_TIME"],
    }
    for group in (b, d, g):
        out.update({f"db2_{k.lower()}": v for k, v in group.items()})
    return out


# -- read-back queries ---------------------------------------------------------------------------
def pool_size_sql(page_size: int) -> str:
    """Pages the buffer pool holds in memory now (a deferred pool shows its old size)."""
    bp = bufferpool_name(page_size)
    return f"SELECT SUM(BP_CUR_BUFFSZ) FROM TABLE(MON_GET_BUFFERPOOL('{bp}', -2)) AS T"


def applied_sql(page_size: int) -> dict[str, str]:
    bp, ts = bufferpool_name(page_size), tablespace_name(page_size)
    return {
        "bufferpool": "SELECT B.PAGESIZE, B.NPAGES, M.BP_CUR_BUFFSZ FROM SYSCAT.BUFFERPOOLS B "
        f"JOIN TABLE(MON_GET_BUFFERPOOL('{bp}', -2)) AS M ON M.BP_NAME = B.BPNAME "
        f"WHERE B.BPNAME = '{bp}'",
        "tablespace": "SELECT T.PAGESIZE, T.EXTENTSIZE, T.PREFETCHSIZE, T.OVERHEAD, "
        "T.TRANSFERRATE, B.BPNAME, M.FS_CACHING FROM SYSCAT.TABLESPACES T "
        "JOIN SYSCAT.BUFFERPOOLS B ON B.BUFFERPOOLID = T.BUFFERPOOLID "
        f"JOIN TABLE(MON_GET_TABLESPACE('{ts}', -2)) AS M ON M.TBSP_NAME = T.TBSPACE "
        f"WHERE T.TBSPACE = '{ts}'",
        "containers": f"SELECT CONTAINER_NAME FROM TABLE(MON_GET_CONTAINER('{ts}', -2)) AS C",
    }


def table_sql(table: str) -> dict[str, str]:
    t = ident(table)
    return {
        "table": f"SELECT TBSPACE, LOCKSIZE FROM SYSCAT.TABLES WHERE TABSCHEMA = '{SCHEMA}' "
        f"AND TABNAME = '{t}'",
        "indexes": "SELECT I.INDNAME, I.INDEXTYPE, I.UNIQUERULE, U.COLNAME, U.COLORDER "
        "FROM SYSCAT.INDEXES I JOIN SYSCAT.INDEXCOLUSE U ON U.INDSCHEMA = I.INDSCHEMA "
        f"AND U.INDNAME = I.INDNAME WHERE I.TABSCHEMA = '{SCHEMA}' AND I.TABNAME = '{t}' "
        "ORDER BY I.INDNAME, U.COLSEQ",
        "size": "SELECT DATA_OBJECT_P_SIZE, INDEX_OBJECT_P_SIZE FROM "
        f"TABLE(SYSPROC.ADMIN_GET_TAB_INFO('{SCHEMA}', '{t}')) AS T",
    }


def locksize_knob(code: str) -> str | None:
    """SYSCAT.TABLES.LOCKSIZE ('R' row, 'T' table, 'I' block insert) -> knob value."""
    return {"R": "row", "T": "table"}.get((code or "").strip())


def direct_io_knob(fs_caching: int | None) -> bool | None:
    """fs_caching monitor element: 0 file system caching on, 1 off (direct I/O)."""
    return None if fs_caching is None else {0: False, 1: True}.get(int(fs_caching))


def expected_kind(index: IndexPlan) -> str:
    """The kind the catalog will show for the plan: a covering index with nothing to cover
    (an update's key-only access) is physically a plain index on the key."""
    key, include = index_columns(index)
    if not key:
        return "none"
    if index.kind in ("covering", "covering_wrong_order") and key == _unique(index.key):
        return "nonclustered" if not include else index.kind
    return index.kind


def index_kind(key: Sequence[str], rows: Sequence[Sequence[str]]) -> str | None:
    """The index kind the catalog shows for the plan's key, from SYSCAT.INDEXES joined with
    SYSCAT.INDEXCOLUSE: rows of (index name, INDEXTYPE, UNIQUERULE, column, COLORDER) in
    COLSEQ order. None when the catalog holds something no kind describes."""
    names = {r[0] for r in rows}
    if not names:
        return "none"
    if len(names) > 1:
        return None
    clustering = rows[0][1].strip() == "CLUS"
    keys = [r[3].upper() for r in rows if r[4].strip() != "I"]
    includes = [r[3].upper() for r in rows if r[4].strip() == "I"]
    want, n = _unique(key), len(_unique(key))
    if clustering:
        return "clustered" if keys == want and not includes else None
    if keys == want:
        return "covering" if includes else "nonclustered"
    if includes or len(keys) <= n:
        return None
    if keys[:n] == want:
        return "covering"
    if keys[-n:] == want:
        return "covering_wrong_order"
    return None


# -- engine time ----------------------------------------------------------------------------------
APPLICATION_HANDLE_SQL = "VALUES SYSPROC.MON_GET_APPLICATION_HANDLE()"
# Request metrics of the lab's own connections (MON_GET_CONNECTION, collected at the default
# mon_req_metrics BASE). TOTAL_RQST_TIME is the engine time: all time the server spent on the
# connection's requests, processing and waits (I/O, locks) included, compile, section execution,
# fetch and commit alike; the time it waits for the client's next request is
# CLIENT_IDLE_WAIT_TIME, outside it. TOTAL_SECTION_TIME would leave out the compilation of each
# literal statement, which the client's clock does see. Milliseconds, TOTAL_CPU_TIME in µs.
CONNECTION_COUNTERS = (
    "TOTAL_RQST_TIME",
    "TOTAL_SECTION_TIME",
    "TOTAL_COMPILE_TIME",
    "TOTAL_WAIT_TIME",
    "CLIENT_IDLE_WAIT_TIME",
    "RQSTS_COMPLETED_TOTAL",
    "TOTAL_CPU_TIME",
)


def connection_sql(handles: Sequence[int]) -> str:
    ids = ", ".join(str(int(h)) for h in handles)
    sums = ", ".join(f"SUM(C.{c})" for c in CONNECTION_COUNTERS)
    return (
        f"SELECT {sums} FROM TABLE(MON_GET_CONNECTION(CAST(NULL AS BIGINT), -2)) AS C "
        f"WHERE C.APPLICATION_HANDLE IN ({ids})"
    )


def engine_time_from(row: Sequence[Any]) -> dict[str, float]:
    """engine_time_ns (TOTAL_RQST_TIME, ms -> ns) and every connection metric as
    db2_conn_<column>."""
    c = {k: float(v or 0) for k, v in zip(CONNECTION_COUNTERS, row, strict=True)}
    out = {"engine_time_ns": c["TOTAL_RQST_TIME"] * 1_000_000}
    out.update({f"db2_conn_{k.lower()}": v for k, v in c.items()})
    return out


# -- container and CLP ----------------------------------------------------------------------------
def container_env(password: str) -> dict[str, str]:
    """Environment of the db2_community image: licence, instance, database, and the documented
    switches that leave out what the lab does not use, so the first start is shorter."""
    return {
        "LICENSE": "accept",
        "DB2INSTANCE": INSTANCE,
        "DB2INST1_PASSWORD": password,
        "DBNAME": DATABASE,
        "BLU": "false",
        "ENABLE_ORACLE_COMPATIBILITY": "false",
        "UPDATEAVAIL": "NO",
        "TO_CREATE_SAMPLEDB": "false",
        "SAMPLEDB": "false",  # the older images' name for the same switch
        "REPODB": "false",
        "IS_OSXFS": "false",
        "PERSISTENT_HOME": "true",
        "HADR_ENABLED": "false",
        "ARCHIVE_LOGS": "false",
        "AUTOCONFIG": "false",
    }


def clp(script: str) -> list[str]:
    """argv that runs ``script`` as the instance owner with the CLP's environment (login shell,
    which sources the instance's db2profile)."""
    return ["su", "-", INSTANCE, "-c", script]


def cold_commands(database: str = DATABASE) -> dict[str, str]:
    """CLP scripts of the cold procedure. FORCE APPLICATION is asynchronous and a deactivation
    with a connection still open only warns, so ``stop`` repeats both until the database is
    no longer listed as active. Between ``stop`` and ``start`` the host evicts the table space
    files from its page cache."""
    db = ident(database)
    stop = (
        "db2 force application all >/dev/null; "
        "for i in $(seq 60); do "
        f"db2 deactivate db {db} >/dev/null; "
        f"db2 list active databases | grep -qiw {db} || exit 0; "
        "sleep 1; db2 force application all >/dev/null; "
        "done; "
        f"echo database {db} still active after 60 s; exit 1"
    )
    start = f"db2 activate db {db}; rc=$?; exit $(( rc >= 4 ))"
    return {"stop": stop, "start": start}


def readable_script() -> str:
    """Shell run as root inside the container with the table space container files as
    arguments: makes them (and the directories above) readable to the host user, who
    evicts them and measures their residency; Db2 creates them for its instance owner only."""
    return (
        'for f in "$@"; do d=$(dirname "$f"); '
        f'while [ "$d" != / ] && [ "$d" != {DATA_MOUNT} ]; do '
        'chmod a+rx "$d"; d=$(dirname "$d"); done; '
        'chmod a+r "$f"; done'
    )


def host_path(container_path: str, host_dir: Path) -> Path | None:
    """Host path of a file below the data mount, None for a path outside it."""
    p = Path(container_path)
    try:
        return host_dir / p.relative_to(DATA_MOUNT)
    except ValueError:
        return None


def point_cleanup_sql(table: str | None, page_size: int) -> list[str]:
    """What a point leaves behind on a kept server: its table, table space and buffer pool
    (the next point creates its own with its knobs)."""
    stmts = [drop_table_sql(table)] if table else []
    return [
        *stmts,
        f"DROP TABLESPACE {tablespace_name(page_size)}",
        f"DROP BUFFERPOOL {bufferpool_name(page_size)}",
    ]
