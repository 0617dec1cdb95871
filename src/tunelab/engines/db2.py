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
                 and the validator warns otherwise, see ``warn_point``)
- overhead_ms / transferrate_ms  OVERHEAD / TRANSFERRATE (the optimizer's I/O costs;
                 INHERIT from the storage group when the point leaves them out)
- direct_io      NO FILE SYSTEM CACHING / FILE SYSTEM CACHING
- lock_granularity  ALTER TABLE ... LOCKSIZE ROW|TABLE, plus LOCK TABLE ... IN EXCLUSIVE
                 MODE at the start of each transaction for table-level runs
- index          CREATE INDEX; CREATE INDEX ... CLUSTER + REORG TABLE ... INDEX; CREATE
                 UNIQUE INDEX ... INCLUDE (covering on a unique key) or a composite index

Every statement and CLP command comes from a small pure function below, so tests check them
against the documented syntax without a server, and ``tunelab plan --sql`` prints them.

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

import math
import operator
import os
import re
import shlex
import shutil
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from tunelab import cache, workloads
from tunelab.dataset import COLUMN_TYPES, COLUMNS, Dataset
from tunelab.engines.base import (
    AccessPath,
    CacheState,
    EngineError,
    EngineInfo,
    ImageSource,
    IndexPlan,
    Knob,
)
from tunelab.engines.server import ServerEngine

# Pinned image (see containers/db2/README.md); TUNELAB_DB2_IMAGE selects another local tag.
IMAGE = "icr.io/db2_community/db2:12.1.5.0"
IMAGE_ENV = "TUNELAB_DB2_IMAGE"
PORT = 50000
INSTANCE = "db2inst1"  # instance owner, also the user the lab connects as
SCHEMA = INSTANCE.upper()
DATABASE = "TUNELAB"  # at most 8 characters
DATA_MOUNT = "/database"  # the image keeps instance home and databases below this path
READY_LOG = r"Setup has completed"
READY_TIMEOUT_S = 15 * 60  # a first start takes 2-10 minutes
PRIVILEGED_ENV = "TUNELAB_DB2_PRIVILEGED"  # "1": --privileged instead of IPC capabilities
# The pool is allocated at once (IMMEDIATE) unless database shared memory is short, in which
# case Db2 defers it to the next activation: provision then reactivates once.
CONNECT_ATTEMPTS_S = 120
# After activation Db2 reads container tags and space maps: allow this many extents per
# container file to be resident and still call the cache cold.
COLD_ALLOWANCE_EXTENTS = 2
FETCH_ROWS = 10_000  # rows per fetchmany of a timed read (the per-row loop is the driver's C)

PAGE_SIZES = (4096, 8192, 16384, 32768)
AUTOMATIC = "automatic"  # PREFETCHSIZE AUTOMATIC: Db2 sizes it at each activation
INDEX_KINDS = ("none", "nonclustered", "clustered", "covering", "covering_wrong_order")
_SQL_TYPES = {"integer": "INTEGER", "char20": "CHAR(20)", "char40": "CHAR(40)"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def is_automatic(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == AUTOMATIC


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
            "page_size", "integer",
            "PAGESIZE of a new buffer pool and table space (created in place, equal by "
            "construction)",
            values=PAGE_SIZES, unit="bytes", default=4096,
            readback="SYSCAT.TABLESPACES and SYSCAT.BUFFERPOOLS PAGESIZE",
        ),
        "buffer_pool": Knob(
            "buffer_pool", "integer", "CREATE BUFFERPOOL ... IMMEDIATE SIZE n (pages)",
            minimum=2, maximum=2_147_483_647, unit="pages", default=1000,
            readback="SYSCAT.BUFFERPOOLS NPAGES, MON_GET_BUFFERPOOL BP_CUR_BUFFSZ",
        ),
        "extent_size": Knob(
            "extent_size", "integer", "table space EXTENTSIZE (pages)",
            minimum=2, maximum=256, unit="pages", default=32,
            readback="SYSCAT.TABLESPACES EXTENTSIZE",
        ),
        "prefetch_size": PagesOrAutomatic(
            "prefetch_size", "integer",
            "table space PREFETCHSIZE (pages; IBM advises a multiple of extent_size), or "
            "AUTOMATIC",
            minimum=1, maximum=32767, unit="pages", default=32,
            readback="SYSCAT.TABLESPACES PREFETCHSIZE (-1: AUTOMATIC)",
        ),
        "overhead_ms": Knob(
            "overhead_ms", "number",
            "table space OVERHEAD (optimizer's seek + latency cost; INHERIT when unset)",
            minimum=0, unit="ms",
            readback="SYSCAT.TABLESPACES OVERHEAD",
        ),
        "transferrate_ms": Knob(
            "transferrate_ms", "number",
            "table space TRANSFERRATE (optimizer's time to read one page; INHERIT when unset)",
            minimum=0, unit="ms",
            readback="SYSCAT.TABLESPACES TRANSFERRATE",
        ),
        "direct_io": Knob(
            "direct_io", "boolean",
            "true: NO FILE SYSTEM CACHING (direct I/O); false: FILE SYSTEM CACHING",
            default=True,
            readback="MON_GET_TABLESPACE FS_CACHING",
        ),
        "lock_granularity": Knob(
            "lock_granularity", "string",
            "ALTER TABLE ... LOCKSIZE ROW|TABLE; table also takes LOCK TABLE ... IN "
            "EXCLUSIVE MODE at the start of each transaction",
            values=("row", "table"), default="row",
            readback="SYSCAT.TABLES LOCKSIZE",
        ),
        "index": Knob(
            "index", "string",
            "none; nonclustered: CREATE INDEX; clustered: CREATE INDEX ... CLUSTER, REORG "
            "TABLE ... INDEX, RUNSTATS; covering: CREATE UNIQUE INDEX ... INCLUDE on a unique "
            "key, else a composite (key, selected columns); covering_wrong_order: (selected "
            "columns, key)",
            values=INDEX_KINDS, default="none",
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
    engine_time="MON_GET_CONNECTION's TOTAL_RQST_TIME for each timed connection (found by "
    "SYSPROC.MON_GET_APPLICATION_HANDLE()): the server's time on the lab's requests "
    "(compilation of each literal statement, section execution, fetch, commit, and their "
    "I/O and lock waits), without CLIENT_IDLE_WAIT_TIME, the time it waits for the client; "
    "reported in ms",
)  # fmt: skip


# -- names and literals -----------------------------------------------------------------------
def image() -> str:
    return os.environ.get(IMAGE_ENV) or IMAGE


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


# -- cross-knob rules (called by the sweep validator) --------------------------------------------
def check_point(knobs: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(field, message, allowed) for combinations Db2 refuses. None today: a prefetch size
    that is not a multiple of the extent size is legal (``warn_point``)."""
    return []


def warn_point(knobs: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for combinations Db2 accepts but IBM advises against: a prefetch size
    that is not a multiple of the extent size (the assignment's 4 and 50 pages with 32)."""
    extent = knobs.get("extent_size", INFO.knobs["extent_size"].default)
    prefetch = knobs.get("prefetch_size", INFO.knobs["prefetch_size"].default)
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not isinstance(extent, int):
        return []
    if extent > 0 and prefetch % extent:
        advice = f"{extent}, {2 * extent}, {3 * extent}, ... or {AUTOMATIC}"
        msg = f"{prefetch} is not a multiple of extent_size {extent} (IBM advises {advice})"
        return [("prefetch_size", msg)]
    return []


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
    "POOL_DATA_L_READS", "POOL_INDEX_L_READS", "POOL_TEMP_DATA_L_READS",
    "POOL_TEMP_INDEX_L_READS", "POOL_DATA_P_READS", "POOL_INDEX_P_READS",
    "POOL_TEMP_DATA_P_READS", "POOL_TEMP_INDEX_P_READS", "POOL_ASYNC_DATA_READS",
    "POOL_ASYNC_INDEX_READS", "POOL_READ_TIME", "POOL_ASYNC_READ_TIME",
    "UNREAD_PREFETCH_PAGES", "DIRECT_READS", "POOL_DATA_WRITES", "POOL_INDEX_WRITES",
    "POOL_WRITE_TIME", "VECTORED_IOS", "PAGES_FROM_VECTORED_IOS", "BLOCK_IOS",
    "PAGES_FROM_BLOCK_IOS", "PREFETCH_WAITS", "PREFETCH_WAIT_TIME",
)  # fmt: skip
DATABASE_COUNTERS = ("LOCK_WAITS", "LOCK_ESCALS", "LOCK_WAIT_TIME", "LOCK_TIMEOUTS", "DEADLOCKS")


def counter_sql(page_size: int) -> dict[str, str]:
    """The two monitor queries whose cumulative results ``counters`` returns."""
    bp = bufferpool_name(page_size)
    sums = ", ".join(f"SUM({c})" for c in BUFFERPOOL_COUNTERS)
    db_sums = ", ".join(f"SUM({c})" for c in DATABASE_COUNTERS)
    return {
        "bufferpool": f"SELECT {sums} FROM TABLE(MON_GET_BUFFERPOOL('{bp}', -2)) AS T",
        "database": f"SELECT {db_sums} FROM TABLE(MON_GET_DATABASE(-2)) AS T",
    }


def counters_from(bp: Sequence[Any], db: Sequence[Any], page_size: int) -> dict[str, float]:
    """Common counter keys (engines.md) plus db2_ extras from the two monitor rows."""
    b = {c: float(v or 0) for c, v in zip(BUFFERPOOL_COUNTERS, bp, strict=True)}
    d = {c: float(v or 0) for c, v in zip(DATABASE_COUNTERS, db, strict=True)}
    physical = (
        b["POOL_DATA_P_READS"] + b["POOL_INDEX_P_READS"]
        + b["POOL_TEMP_DATA_P_READS"] + b["POOL_TEMP_INDEX_P_READS"]
    )  # fmt: skip
    out = {
        "logical_reads": b["POOL_DATA_L_READS"] + b["POOL_INDEX_L_READS"]
        + b["POOL_TEMP_DATA_L_READS"] + b["POOL_TEMP_INDEX_L_READS"],
        # Db2's physical reads include the pages its prefetchers read (async reads).
        "physical_reads": physical,
        "prefetch_reads": b["POOL_ASYNC_DATA_READS"] + b["POOL_ASYNC_INDEX_READS"],
        "prefetch_evicted": b["UNREAD_PREFETCH_PAGES"],
        "data_read_bytes": physical * page_size,
        "read_time_ms": b["POOL_READ_TIME"],
        "lock_waits": d["LOCK_WAITS"],
        "lock_escalations": d["LOCK_ESCALS"],
        "lock_wait_time_ms": d["LOCK_WAIT_TIME"],
    }  # fmt: skip
    out.update({f"db2_{k.lower()}": v for k, v in b.items()})
    out.update({f"db2_{k.lower()}": v for k, v in d.items()})
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


# -- timed statements: literals, guidelines, plans ------------------------------------------------
# The optimizer sees each statement's own values: bind() writes the integer arguments into the
# text, so every distinct statement is compiled with them. REOPT ALWAYS would re-plan at each
# execution too, but EXPLAIN of a statement with parameter markers plans for unknown values
# (EXPLAIN offers only WITH REOPT ONCE), so the captured plan could differ from the one run;
# with literals EXPLAIN PLAN FOR compiles exactly the text that is executed.
_MARKER = re.compile(r"\?")
# SUM of an INTEGER column is an INTEGER in Db2 (SQL0802N on overflow, IBM's SUM reference);
# the aggregates of `fetch: count` sum up to 10^7 x rows, so they are summed as BIGINT.
_SUM = re.compile(r"\bSUM\((\w+)\)", re.IGNORECASE)
_GUIDELINE = re.compile(r"\s*/\* <OPTGUIDELINES>.*?</OPTGUIDELINES> \*/", re.DOTALL)

QUERYTAG = "TUNELAB"  # EXPLAIN_STATEMENT.QUERYTAG is CHAR(20)
EXPLAIN_SCHEMA = SCHEMA  # EXPLAIN writes to the session user's tables before SYSTOOLS'
EXPLAIN_TABLES = (
    "EXPLAIN_INSTANCE", "EXPLAIN_STATEMENT", "EXPLAIN_OPERATOR", "EXPLAIN_STREAM",
    "EXPLAIN_ARGUMENT",
)  # fmt: skip
# The columns that identify one explained statement in every explain table.
_EXPLAIN_KEY = (
    "EXPLAIN_REQUESTER", "EXPLAIN_TIME", "SOURCE_NAME", "SOURCE_SCHEMA", "SOURCE_VERSION",
    "EXPLAIN_LEVEL", "STMTNO", "SECTNO",
)  # fmt: skip
_ACCESS_OPERATORS = ("TBSCAN", "IXSCAN", "FETCH", "RIDSCN")


def sql_int(value: Any) -> str:
    """An integer argument as a literal; anything else is refused (nothing but int() output
    ever reaches the statement text)."""
    if isinstance(value, bool):
        raise EngineError(f"db2: only integers are written into statements, got {value!r}")
    try:
        return str(int(operator.index(value)))
    except TypeError:
        raise EngineError(
            f"db2: only integers are written into statements, got {value!r}"
        ) from None


def bind_sql(sql: str, args: Sequence[Any], inline: bool = True) -> str:
    """The statement as Db2 receives it: each parameter marker replaced by its integer
    literal (unless ``inline`` is false), SUMs widened to BIGINT, and an optimization
    guideline moved to the end, the only place Db2 reads an embedded guideline."""
    guidelines = [g.strip() for g in _GUIDELINE.findall(sql)]
    if len(guidelines) > 1:  # Db2 ignores every guideline of a statement that has several
        raise EngineError(f"db2: more than one optimization guideline in {sql[:120]!r}")
    text = _GUIDELINE.sub("", sql)
    if not inline:
        text = _SUM.sub(r"SUM(CAST(\1 AS BIGINT))", text)
        return f"{text} {guidelines[0]}" if guidelines else text
    values = [sql_int(a) for a in args]
    if len(_MARKER.findall(text)) != len(values):
        raise EngineError(f"db2: {len(values)} arguments for the markers of {text[:120]!r}")
    literals = iter(values)
    text = _MARKER.sub(lambda _m: next(literals), text)
    text = _SUM.sub(r"SUM(CAST(\1 AS BIGINT))", text)
    return f"{text} {guidelines[0]}" if guidelines else text


def optguideline(table: str, index: IndexPlan) -> str:
    """The statement-level optimization guideline that pins the access the index plan built:
    IXSCAN of its index (INDEX is the unqualified index name, TABLE the exposed table name)
    or TBSCAN without one. A guideline Db2 cannot apply is ignored with SQL0437W reason 13,
    which is why every forced plan is explained and checked."""
    t = ident(table)
    if expected_kind(index) == "none":
        request = f'<TBSCAN TABLE="{t}"/>'
    else:
        request = f'<IXSCAN TABLE="{t}" INDEX="{index_name(table, index.kind)}"/>'
    return f"/* <OPTGUIDELINES>{request}</OPTGUIDELINES> */"


def optprofile_script(database: str = DATABASE) -> str:
    """CLP script (instance owner) that enables optimization guidelines: DB2_OPTPROFILE=YES,
    which takes effect at the next instance start. IBM's 11.1+ page on embedded guidelines
    names no registry setting, an IBM support note says releases before 11.1 needed this one; the
    lab sets it on either reading. Prints 'restarted' when it had to restart the instance."""
    db = ident(database)
    on = "db2set DB2_OPTPROFILE | grep -qiw YES"
    return (
        f"{on} && exit 0; "
        "db2set DB2_OPTPROFILE=YES || exit 1; "
        "db2 force application all >/dev/null; db2stop force >/dev/null; db2start >/dev/null; "
        f"db2 activate db {db} >/dev/null; rc=$?; "
        f"{on} || exit 1; "
        "echo restarted; exit $(( rc >= 4 ))"
    )


def explain_tables_sql() -> dict[str, str]:
    """Whether the explain tables exist, and the call that creates them (SYSINSTALLOBJECTS,
    which IBM prefers to EXPLAIN.DDL; in SYSTOOLSPACE, outside the point's table space)."""
    names = ", ".join(f"'{t}'" for t in EXPLAIN_TABLES)
    return {
        "check": "SELECT COUNT(*) FROM SYSCAT.TABLES "
        f"WHERE TABSCHEMA = '{EXPLAIN_SCHEMA}' AND TABNAME IN ({names})",
        "create": "CALL SYSPROC.SYSINSTALLOBJECTS('EXPLAIN', 'C', "
        f"CAST(NULL AS VARCHAR(128)), '{EXPLAIN_SCHEMA}')",
    }


def explain_sql(statement: str, queryno: int | str) -> str:
    """EXPLAIN PLAN (clauses in the order of IBM's syntax diagram), tagged so that the rows
    of this statement can be found again."""
    n = queryno if isinstance(queryno, str) else int(queryno)
    tags = f"SET QUERYNO = {n} SET QUERYTAG = '{QUERYTAG}'"
    return f"EXPLAIN PLAN {tags} FOR {statement}"


def plan_sql(queryno: int | str) -> dict[str, str]:
    """The operators, streams and operator arguments of the latest statement explained with
    this QUERYNO (level P, plan selection), joined on the explain tables' common key."""
    n = queryno if isinstance(queryno, str) else int(queryno)
    s = f"{EXPLAIN_SCHEMA}.EXPLAIN_STATEMENT"
    tagged = f"QUERYTAG = '{QUERYTAG}' AND QUERYNO = {n} AND EXPLAIN_LEVEL = 'P'"
    latest = (
        f"WITH S AS (SELECT {', '.join(_EXPLAIN_KEY)} FROM {s} WHERE {tagged} "
        f"AND EXPLAIN_TIME = (SELECT MAX(EXPLAIN_TIME) FROM {s} WHERE {tagged})) "
    )
    on = " AND ".join(f"X.{k} = S.{k}" for k in _EXPLAIN_KEY)

    def of(table: str, cols: str, order: str) -> str:
        joined = f"{EXPLAIN_SCHEMA}.{table} X JOIN S ON {on}"
        return f"{latest}SELECT {cols} FROM {joined} ORDER BY {order}"

    return {
        "operators": of("EXPLAIN_OPERATOR", "X.OPERATOR_ID, X.OPERATOR_TYPE, X.TOTAL_COST",
                        "X.OPERATOR_ID"),
        "streams": of("EXPLAIN_STREAM", "X.STREAM_ID, X.SOURCE_TYPE, X.SOURCE_ID, "
                      "X.TARGET_TYPE, X.TARGET_ID, X.OBJECT_SCHEMA, X.OBJECT_NAME, "
                      "X.STREAM_COUNT", "X.STREAM_ID"),
        "arguments": of("EXPLAIN_ARGUMENT", "X.OPERATOR_ID, X.ARGUMENT_TYPE, X.ARGUMENT_VALUE",
                        "X.OPERATOR_ID, X.ARGUMENT_TYPE"),
    }  # fmt: skip


@dataclass
class PlanOperator:
    """One EXPLAIN_OPERATOR row with its streams (EXPLAIN_STREAM) and arguments."""

    id: int
    type: str
    cost: float
    inputs: list[tuple[str, Any, float]] = field(default_factory=list)  # ("O", id | "D", name)
    outputs: list[int] = field(default_factory=list)  # operators this one feeds
    writes: list[str] = field(default_factory=list)  # data objects it writes (UPDATE)
    rows: float | None = None  # estimated rows it produces
    args: list[tuple[str, str]] = field(default_factory=list)


def plan_graph(
    operators: Sequence[Sequence[Any]],
    streams: Sequence[Sequence[Any]],
    arguments: Sequence[Sequence[Any]] = (),
) -> dict[int, PlanOperator]:
    """Operators keyed by OPERATOR_ID from the explain rows as IBM documents them:
    EXPLAIN_STREAM's SOURCE_TYPE/TARGET_TYPE are 'O' (operator, its id) or 'D' (data object,
    id -1, named by OBJECT_SCHEMA/OBJECT_NAME); STREAM_COUNT is the estimated cardinality."""
    ops = {int(i): PlanOperator(int(i), str(t).strip(), float(c or 0)) for i, t, c in operators}
    for _sid, stype, source, ttype, target, schema, name, count in streams:
        stype, ttype = str(stype).strip(), str(ttype).strip()
        obj = f"{(schema or '').strip()}.{(name or '').strip()}".strip(".")
        rows = float(count) if count is not None else math.nan
        if ttype == "O" and int(target) in ops:
            dest = ops[int(target)]
            if stype == "O":
                dest.inputs.append(("O", int(source), rows))
            else:
                dest.inputs.append(("D", obj, rows))
        if stype == "O" and int(source) in ops:
            src = ops[int(source)]
            src.rows = rows
            if ttype == "O":
                src.outputs.append(int(target))
            else:
                src.writes.append(obj)
    for op_id, atype, value in arguments:
        if int(op_id) in ops:
            ops[int(op_id)].args.append((str(atype).strip(), "" if value is None else str(value)))
    return ops


def _unqualified(obj: str) -> str:
    return obj.rsplit(".", 1)[-1]


def normalise_plan(ops: dict[int, PlanOperator]) -> str:
    """scan (TBSCAN of a table) | index:<IX> (IXSCAN whose RIDs reach a FETCH of the table) |
    index-only:<IX> (IXSCAN with no FETCH), detail after ';': tbscan, ixscan+fetch,
    list-prefetch (RIDs sorted through RIDSCN before the FETCH), ixscan; guideline when the
    RETURN operator names a statement profile (STMTPROF), i.e. a guideline was applied."""
    paths = []
    for op in sorted(ops.values(), key=lambda o: o.id):
        data = [name for kind, name, _ in op.inputs if kind == "D"]
        if op.type == "TBSCAN" and data:
            paths.append("scan;tbscan")  # a TBSCAN fed by an operator reads a temp table
        elif op.type == "IXSCAN" and data:
            index = _unqualified(data[0])
            seen, todo, fetch = set(), list(op.outputs), False
            while todo:
                nxt = todo.pop(0)
                if nxt in seen or nxt not in ops:
                    continue
                seen.add(nxt)
                if ops[nxt].type == "FETCH":
                    fetch = True
                    break
                todo.extend(ops[nxt].outputs)
            if not fetch:
                paths.append(f"index-only:{index};ixscan")
            elif any(ops[i].type == "RIDSCN" for i in seen):
                paths.append(f"index:{index};ixscan+fetch;list-prefetch")
            else:
                paths.append(f"index:{index};ixscan+fetch")
    if not paths:
        return "unknown"
    if any(a == "STMTPROF" for o in ops.values() for a, _ in o.args):
        paths = [f"{p};guideline" for p in paths]
    return " + ".join(dict.fromkeys(paths))


def plan_text(ops: dict[int, PlanOperator]) -> str:
    """The operator tree as text, from RETURN down to the data objects (db2exfmt's order):
    type (id), cumulative cost in timerons, estimated rows, and the access operators'
    arguments."""
    lines: list[str] = []

    def rows(n: float | None) -> str:
        return "" if n is None or math.isnan(n) else f"  rows={n:.0f}"

    def walk(op: PlanOperator, depth: int, seen: set[int]) -> None:
        pad = "  " * depth
        args = ""
        if op.type in _ACCESS_OPERATORS or op.type == "RETURN":
            shown = [f"{a}={v}" for a, v in op.args if op.type != "RETURN" or a == "STMTPROF"]
            args = f"  [{', '.join(shown)}]" if shown else ""
        lines.append(f"{pad}{op.type} ({op.id})  cost={op.cost:.2f}{rows(op.rows)}{args}")
        for obj in op.writes:
            lines.append(f"{pad}  -> table {obj}")
        for kind, ref, n in op.inputs:
            if kind == "O" and ref in ops and ref not in seen:
                walk(ops[ref], depth + 1, seen | {ref})
            elif kind == "D":
                what = "index" if op.type == "IXSCAN" else "table"
                lines.append(f"{pad}  {what} {ref}{rows(n)}")

    roots = [o for o in ops.values() if not o.outputs]
    for root in sorted(roots, key=lambda o: o.id):
        walk(root, 0, {root.id})
    return "\n".join(lines)


# -- engine time ----------------------------------------------------------------------------------
APPLICATION_HANDLE_SQL = "VALUES SYSPROC.MON_GET_APPLICATION_HANDLE()"
# Request metrics of the lab's own connections (MON_GET_CONNECTION, collected at the default
# mon_req_metrics BASE). TOTAL_RQST_TIME is the engine time: all time the server spent on the
# connection's requests, processing and waits (I/O, locks) included, compile, section execution,
# fetch and commit alike; the time it waits for the client's next request is
# CLIENT_IDLE_WAIT_TIME, outside it. TOTAL_SECTION_TIME would leave out the compilation of each
# literal statement, which the client's clock does see. Milliseconds, TOTAL_CPU_TIME in µs.
CONNECTION_COUNTERS = (
    "TOTAL_RQST_TIME", "TOTAL_SECTION_TIME", "TOTAL_COMPILE_TIME", "TOTAL_WAIT_TIME",
    "CLIENT_IDLE_WAIT_TIME", "RQSTS_COMPLETED_TOTAL", "TOTAL_CPU_TIME",
)  # fmt: skip


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


def image_missing_message(tag: str) -> str:
    return (
        f"DB2 Community image {tag} not present locally: run `docker pull {tag}` on a host "
        "that reaches the registry (or `docker load` a saved copy); see containers/db2/README.md"
    )


# -- the engine -------------------------------------------------------------------------------
class DB2Engine(ServerEngine):
    info = INFO
    paramstyle = "qmark"
    port = PORT
    database = DATABASE
    admin_database = DATABASE
    connect_errors = (Exception,)  # ibm_db raises plain Exceptions while Db2 starts
    connect_pause_s = 2
    check_point = staticmethod(check_point)
    warn_point = staticmethod(warn_point)

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
        self._queryno = 0  # QUERYNO of the last statement this engine explained

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

    def image_tag(self) -> str:
        require_image(self.image)
        return self.image

    def container_spec(self) -> Any:
        from tunelab import containers

        self.home.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o777)  # the instance owner inside writes here
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
        page = int(knobs["page_size"])
        self.execute([bufferpool_ddl(knobs)])
        if self._pool_pages() != int(knobs["buffer_pool"]):
            self._restart_database()  # a deferred pool is allocated at the next activation
        self.execute([tablespace_ddl(knobs)])
        self._files = self._container_files(page)

    def release_point(self) -> None:
        self.execute(point_cleanup_sql(self._table, int(self.knobs["page_size"])))

    def remove_container(self) -> None:
        if self.container is not None and os.geteuid() != 0:
            # The files belong to the instance owner's uid: only root inside can remove them.
            self.container.exec(["sh", "-c", f"rm -rf {DATA_MOUNT}/*"], user="root")
        super().remove_container()

    def open_connection(self, database: str | None, autocommit: bool, timeout_s: float) -> Any:
        import ibm_db_dbi

        assert self.container is not None
        dsn = (
            f"DATABASE={database or DATABASE};HOSTNAME=127.0.0.1;"
            f"PORT={self.container.host_port};PROTOCOL=TCPIP;UID={INSTANCE};"
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
                    raise EngineError(f"db2: {stmt[:120]}: {_one_line(exc)}") from None
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
                raise EngineError(f"db2: {sql[:120]}: {_one_line(exc)}") from None
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

    def _restart_database(self) -> None:
        cmds = cold_commands()
        self._clp(cmds["stop"], "force applications off and deactivate")
        self._clp(cmds["start"], "activate")
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
            raise EngineError(f"db2: LOAD put {got} rows in {table}, the data set has "
                              f"{source.dataset.rows}")  # fmt: skip

    def keep_table(self, table: str, key: str, changes: bool) -> None:
        """Not kept: a Db2 point's table lives in the point's own table space (its page size,
        extent and prefetch), dropped with it at the point's end."""

    def create_index(self, table: str, index: IndexPlan) -> None:
        ddl = index_ddl(table, index)
        self.execute([*ddl, runstats_sql(table, bool(ddl))])
        got = index_kind(index.key, self.query(table_sql(table)["indexes"]))
        if got != expected_kind(index):
            raise EngineError(f"db2: catalog shows index kind {got!r}, asked {index.kind!r}")

    def applied_layout(self, table: str, index: IndexPlan, table_lock: bool) -> dict[str, Any]:
        """The index kind SYSCAT.INDEXES shows (the asked kind when the catalog holds what it
        builds: a covering index with nothing to cover is a plain index there) and the
        table's LOCKSIZE from SYSCAT.TABLES (table locks are also taken by LOCK TABLE)."""
        got = index_kind(index.key, self.query(table_sql(table)["indexes"]))
        kind = index.kind if got == expected_kind(index) else f"unrecognised ({got})"
        rows = self.query(table_sql(table)["table"])
        return {"index": kind, "lock_granularity": locksize_knob(rows[0][1]) if rows else None}

    # -- timed statements ----------------------------------------------------------------------
    def index_name(self, table: str, index: IndexPlan) -> str:
        return index_name(table, index.kind)  # upper case, as the plans name it

    def expected_access(self, table: str, index: IndexPlan) -> str:
        # What the catalog holds, not the kind's name: a covering index with nothing to
        # cover (an update's key) is a plain index, read with a FETCH of the row.
        kind = expected_kind(index)
        if kind == "none":
            return "scan"
        name = self.index_name(table, index)
        if kind in ("covering", "covering_wrong_order"):
            return f"index-only:{name}"
        return f"index:{name}"

    def table_ref(self, table: str, index: IndexPlan, access: str) -> str:
        # Db2 has no index hint in the FROM clause: the guideline rides here and bind() moves
        # it to the end of the statement.
        if access != "forced":
            return table
        return f"{table} {optguideline(table, index)}"

    def bind(self, sql: str, args: Sequence[Any], values_matter: bool = True) -> tuple[str, tuple]:
        if not values_matter:  # e.g. unique-key lookups: one plan fits all, compiled once
            return bind_sql(sql, args, inline=False), tuple(args)
        return bind_sql(sql, args), ()

    def explain(self, conn: Any, sql: str, args: Sequence[Any]) -> AccessPath:
        # Writes run with markers (executemany); their key is unique, so the plan of the
        # statement with the literal is the plan of the marker form.
        text = bind_sql(sql, args)
        self._queryno += 1
        queries = plan_sql(self._queryno)
        cur = conn.cursor()
        try:
            cur.execute(explain_sql(text, self._queryno))
            rows = {}
            for part in ("operators", "streams", "arguments"):
                cur.execute(queries[part])
                rows[part] = [tuple(r) for r in cur.fetchall()]
        except Exception as exc:
            raise EngineError(f"db2: EXPLAIN of {text[:120]}: {_one_line(exc)}") from None
        finally:
            cur.close()
        ops = plan_graph(rows["operators"], rows["streams"], rows["arguments"])
        return AccessPath(normalise_plan(ops), f"{text}\n{plan_text(ops)}")

    def fetch(self, cursor: Any) -> int:
        # ibm_db_dbi's fetchmany calls ibm_db.fetchmany, whose row loop (SQLFetch and the row
        # tuple) is C. With FIX_RETURN_TYPE on, ibm_db_dbi then revisits every row in Python
        # to convert DECIMAL and BLOB columns, which the lab's result sets do not have.
        cursor.FIX_RETURN_TYPE = 0
        n = 0
        while batch := cursor.fetchmany(FETCH_ROWS):
            n += len(batch)
        return n

    # -- locking -------------------------------------------------------------------------------
    def lock_table(self, cursor: Any, table: str) -> None:
        cursor.execute(lock_sql(table))  # released by the commit that ends the transaction

    # -- cache and counters --------------------------------------------------------------------
    def make_cold(self) -> CacheState:
        cmds = cold_commands()
        self._clp(cmds["stop"], "force applications off and deactivate")
        method = "force+deactivate+" + cache.evict(self._files)
        self._clp(cmds["start"], "activate")
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
        out = counters_from(bp, db, page)
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
        return {k: v for k, v in out.items() if k in self.knobs}

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
        self, knobs: dict[str, Any], dataset: Dataset, index: IndexPlan, *,
        workload: str | None = None, cache: str | None = None,
    ) -> list[str]:  # fmt: skip
        """See ``Engine.planned_sql``."""
        knobs = {**INFO.defaults(), **knobs}
        page = int(knobs["page_size"])
        table = dataset.table
        writes = workload in ("insert", "update")
        cmds = cold_commands()
        env = {k: ("<generated>" if "PASSWORD" in k else v) for k, v in container_env("").items()}
        caps = "--privileged" if _privileged() else "--cap-add IPC_LOCK --cap-add IPC_OWNER"
        explain_tables = explain_tables_sql()
        lines = [
            f"-- container: {image()} {caps} -p 127.0.0.1:<free>:{PORT} "
            f"-v <workdir>/db2-data:{DATA_MOUNT} "
            + " ".join(f"-e {k}={v}" for k, v in env.items()),
            f"-- ready when the log says '{READY_LOG}' (timeout {READY_TIMEOUT_S // 60} min)",
            f"-- optimization guidelines on: docker exec <container> "
            f"{shlex.join(clp(optprofile_script()))}",
            f"{explain_tables['check']}  -- explain tables present?",
            f"{explain_tables['create']}  -- only if they are not",
            bufferpool_ddl(knobs),
            tablespace_ddl(knobs),
            *applied_sql(page).values(),
        ]
        if writes:
            lines.append("-- every repetition, untimed: the table built again")
        lines += [
            drop_table_sql(table) + "  -- if it exists",
            table_ddl(table, page),
            locksize_ddl(table, knobs.get("lock_granularity", "row")),
        ]
        if workload != "insert":
            lines.append(
                f"{load_sql(table, f'{DATA_MOUNT}/{LOAD_DIR}/{dataset.key}.del')}"
                f"  -- {dataset.rows} rows, the data set's CSV without its header"
            )
        ddl = index_ddl(table, index)
        lines += [*ddl, runstats_sql(table, bool(ddl))]
        if workload == "insert":
            lines[-1] += "  -- the empty table: the timed inserts maintain the index"
        if knobs.get("lock_granularity") == "table":
            lines.append(f"{lock_sql(table)}  -- at the start of every write transaction")
        if not writes:  # writes run one prepared statement, not forced
            lines.append(
                f"-- access: forced ends every timed read with {optguideline(table, index)}"
            )
        if workload != "insert":
            lines += [
                f"{explain_sql('<statement>', '<n>')}  -- before timing, for each distinct timed "
                f"statement (at most {workloads.EXPLAIN_MAX}) as Db2 receives it",
                *plan_sql("<n>").values(),
            ]
        if cache in (None, "cold"):
            cold = "cold" if cache == "cold" else "cold points"
            lines += [
                f"-- {cold}: docker exec <container> {shlex.join(clp(cmds['stop']))}",
                f"-- {cold}: evict the table space container files from the host page cache",
                f"-- {cold}: docker exec <container> {shlex.join(clp(cmds['start']))}",
            ]
        lines.append(f"{APPLICATION_HANDLE_SQL}  -- once on each timed connection")
        if cache in (None, "warm"):
            what = f"SELECT * FROM {table}" if writes else "the timed statements"
            warm = "warm" if cache == "warm" else "warm points"
            lines.append(f"-- {warm}: {what} once, untimed, on the timed connections")
        lines += [
            *counter_sql(page).values(),
            f"{connection_sql([0])}  -- the timed connections' handles; engine time",
            *table_sql(table).values(),
        ]
        return lines


def require_image(tag: str) -> None:
    """EngineError naming the image and how to get it unless it is in the local engine."""
    from tunelab import containers

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


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
