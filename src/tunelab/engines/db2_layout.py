"""Db2's built table read back: the index kind SYSCAT.INDEXES shows and the table's LOCKSIZE
from SYSCAT.TABLES."""

from __future__ import annotations

from typing import Any

from tunelab.engines.base import IndexPlan
from tunelab.engines.db2_sql import expected_kind, index_kind, locksize_knob, table_sql
from tunelab.engines.layout import Layout


class DB2Layout(Layout):
    def applied(self, table: str, index: IndexPlan, table_lock: bool) -> dict[str, Any]:
        """The index kind SYSCAT.INDEXES shows (the asked kind when the catalog holds what it
        builds: a covering index with nothing to cover is a plain index there) and the
        table's LOCKSIZE from SYSCAT.TABLES (table locks are also taken by LOCK TABLE)."""
        got = index_kind(index.key, self.engine.query(table_sql(table)["indexes"]))
        kind = index.kind if got == expected_kind(index) else f"unrecognised ({got})"
        rows = self.engine.query(table_sql(table)["table"])
        return {"index": kind, "lock_granularity": locksize_knob(rows[0][1]) if rows else None}
