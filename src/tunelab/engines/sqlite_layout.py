"""SQLite's built table read back: each index's columns from its catalog, and the lock a
write transaction takes (the whole database file)."""

from __future__ import annotations

import re

import apsw

from tunelab.engines import sqlite_sql as sql
from tunelab.engines.base import IndexPlan
from tunelab.engines.layout import Layout
from tunelab.engines.sqlite_setup import SetupConnection


class SQLiteLayout(Layout):
    def catalog(self, table: str) -> dict[str, list[str]]:
        """Each index's columns (PRAGMA index_list / index_info); "pk" is the key of a WITHOUT
        ROWID table, the b-tree that holds its rows."""
        with SetupConnection(self.engine.path) as db:
            layout = {}
            for _seq, name, _unique, origin, *_ in db.execute(f"PRAGMA index_list({table})"):
                cols = [r[2] for r in db.execute(f"PRAGMA index_info({name})")]
                layout["pk" if origin == "pk" else name] = cols
        return layout

    def expected(self, table: str, index: IndexPlan) -> dict[str, list[str]]:
        if index.kind == "clustered":
            return {"pk": list(dict.fromkeys((*index.key, "id")))}
        ddl = sql.index_ddl(table, index)
        cols = re.search(r"\(([^)]*)\)$", ddl[0]).group(1).split(", ") if ddl else []
        return {f"{table}_{index.kind}": cols} if ddl else {}

    def lock_granularity(self, table: str, table_lock: bool) -> str:
        """'database' when a write transaction on ``table`` keeps a second connection from
        starting any write (SQLite's lock is on the whole file)."""
        path = self.engine.path
        with SetupConnection(path) as first, SetupConnection(path) as second:
            first.execute("BEGIN IMMEDIATE")
            first.execute(f"UPDATE {table} SET balance = balance WHERE 0")
            second.execute("PRAGMA busy_timeout=0")
            try:
                second.execute("BEGIN IMMEDIATE")
            except apsw.BusyError:
                return "database"
            finally:
                first.execute("ROLLBACK")
            second.execute("ROLLBACK")
            return "none (a second writer was not blocked)"
