"""SQLite's statement text: DDL of the table and its index, the timed statements' dialect
(hints, EXPLAIN QUERY PLAN read back, batched look-ups, the load) and what `tunelab plan
--sql` prints. The engine that runs them is ``tunelab.engines.sqlite``."""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Sequence
from typing import Any

from tunelab.engines import readahead
from tunelab.engines.base import KEYS_ALIAS, AccessPath, EngineError, IndexPlan
from tunelab.engines.dialect import Dialect
from tunelab.store.dataset import COLUMN_TYPES, COLUMNS, Dataset

_TYPES = {"integer": "INTEGER", "char20": "TEXT", "char40": "TEXT"}


def table_ddl(table: str, index: IndexPlan) -> str:
    cols = ", ".join(f"{c} {_TYPES[COLUMN_TYPES[c]]}" for c in COLUMNS)
    if index.kind == "clustered":
        key = ", ".join(dict.fromkeys((*index.key, "id")))
        return f"CREATE TABLE {table} ({cols}, PRIMARY KEY ({key})) WITHOUT ROWID"
    return f"CREATE TABLE {table} ({cols})"


def index_ddl(table: str, index: IndexPlan) -> list[str]:
    if index.kind in ("none", "clustered"):
        return []
    if index.kind == "nonclustered":
        cols = index.key
    elif index.kind == "covering":
        cols = (*index.key, *index.include)
    elif index.kind == "covering_wrong_order":
        cols = (*index.include, *index.key)
    else:
        raise EngineError(f"sqlite: unknown index kind {index.kind!r}")
    unique = "UNIQUE " if index.key == ("id",) else ""
    return [f"CREATE {unique}INDEX {table}_{index.kind} ON {table} ({', '.join(cols)})"]


class SQLiteDialect(Dialect):
    def index_name(self, table: str, index: IndexPlan) -> str:
        # A WITHOUT ROWID table is its primary-key b-tree: the clustered "index" is the table.
        return "PRIMARY" if index.kind == "clustered" else f"{table}_{index.kind}"

    def table_ref(self, table: str, index: IndexPlan, access: str) -> str:
        if access != "forced" or index.kind == "clustered":
            return table  # no hint names a primary key; explain() still checks the plan
        if index.kind == "none" or not index.key:
            return f"{table} NOT INDEXED"
        return f"{table} INDEXED BY {self.index_name(table, index)}"

    def explain(self, conn: Any, sql: str, args: Sequence[Any]) -> AccessPath:
        rows = conn.raw.execute(f"EXPLAIN QUERY PLAN {sql}", tuple(args)).fetchall()
        raw = "\n".join(str(r[-1]) for r in rows)
        return AccessPath(normalise_plan(raw), raw)

    def key_join(self, table: str, table_ref: str, n: int) -> str:
        # json_each yields the array's values in order; CROSS JOIN keeps it the outer loop
        # (SQLite never reorders the tables of a CROSS JOIN). One parameter: one statement
        # text, prepared once (apsw's statement cache), whatever the keys.
        k = KEYS_ALIAS
        return f"json_each(?) AS {k} CROSS JOIN {table_ref} ON {table}.id = {k}.value"

    def key_args(self, keys: Sequence[int]) -> tuple:
        return (json.dumps([int(k) for k in keys]),)

    def fetch(self, cursor: Any) -> int | None:
        # apsw builds each row in C and a zero-length deque drops it, with no Python bytecode
        # per row. Counting them here (zip with a counter) costs 5-7 % of a warm scan, more
        # than the bare `for row in cursor` loop: the engine counts them, untimed, instead.
        collections.deque(cursor.rows, maxlen=0)
        return None

    def load(self, table: str, rows: Any, batch: int = 10_000) -> None:
        """All rows in one transaction: SQLite's bulk path (one journal, one sync)."""
        with self.engine.setup_connection() as db, db:  # BEGIN ... COMMIT
            db.executemany(self.insert_sql(table), rows)


_PLAN = re.compile(
    r"^(?P<op>SCAN|SEARCH) (?P<table>\S+)(?: AS \S+)?"
    r"(?: USING (?P<how>COVERING INDEX|INDEX|PRIMARY KEY|INTEGER PRIMARY KEY)"
    r"(?: (?P<name>[^\s(]\S*))?)?"
)


def normalise_plan(raw: str) -> str:
    """EXPLAIN QUERY PLAN lines -> scan | index:<name> | index-only:<name>, with ;full (the
    whole structure is walked) or ;search (a key range of it) as detail."""
    paths = []
    for line in raw.splitlines():
        m = _PLAN.match(line.strip())
        if not m:
            continue  # e.g. USE TEMP B-TREE: not an access to the table
        how, name = m["how"], m["name"]
        if m["table"] == KEYS_ALIAS:
            continue  # a batched look-up's key list (json_each): reads no table
        detail = "full" if m["op"] == "SCAN" else "search"
        if how is None:
            paths.append("scan")  # a table scan (a WITHOUT ROWID table scans its primary key)
        elif how == "COVERING INDEX":
            paths.append(f"index-only:{name};{detail}")
        elif how == "INDEX":
            paths.append(f"index:{name};{detail}")
        elif how == "PRIMARY KEY":
            paths.append(f"index:PRIMARY;{detail}")
        else:
            paths.append(f"index:rowid;{detail}")
    return " + ".join(paths) if paths else "unknown"


def planned(
    knobs: dict[str, Any],
    dataset: Dataset,
    index: IndexPlan,
    workload: str | None,
    cache: str | None,
    insert: str,
) -> list[str]:
    """What ``SQLiteEngine.planned_sql`` shows for a point of these (full) knobs; ``insert``:
    the load's statement."""
    table = dataset.table
    lines = readahead.planned(knobs, "the database file's directory")
    lines += [
        f"PRAGMA page_size={knobs['page_size']}; VACUUM  -- fresh file",
        f"PRAGMA cache_size={knobs['buffer_pool']}  -- on every connection",
    ]
    if workload in ("insert", "update"):
        lines.append("-- every repetition, untimed: the table built again")
    lines += [f"DROP TABLE IF EXISTS {table}", table_ddl(table, index)]
    if workload != "insert":
        lines.append(f"{insert}  -- {dataset.rows} rows, batches of 10000")
    lines += index_ddl(table, index)
    if index.kind == "clustered":
        lines.append("VACUUM  -- the table rebuilt in its key's order")
    lines.append(f"ANALYZE {table}")
    if workload == "insert":
        lines[-1] += "  -- the empty table: the timed inserts maintain the index"
    if workload != "insert":
        lines.append("EXPLAIN QUERY PLAN <statement>  -- before timing, each distinct one")
    cold = (
        "close every connection (the page cache lives in it), evict lab.db* from the OS "
        "page cache (fsync, posix_fadvise DONTNEED; drop_caches where permitted), check "
        "residency (mincore)"
    )
    warm = (
        f"SELECT * FROM {table} once, untimed, on each timed connection"
        if workload in ("insert", "update")
        else "the timed statements once, untimed, on the timed connections"
    )
    if cache in (None, "cold"):
        lines.append(f"-- cold{' points' if cache is None else ''}: {cold}")
    if cache in (None, "warm"):
        lines.append(f"-- warm{' points' if cache is None else ''}: {warm}")
    return lines
