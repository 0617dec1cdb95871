"""PostgreSQL's built table read back: its indexes from pg_index, and the lock a write
transaction of the workload holds (pg_locks)."""

from __future__ import annotations

from typing import Any

from tunelab.engines import postgres_sql as sql
from tunelab.engines.base import EngineError, IndexPlan
from tunelab.engines.layout import Layout


class PostgresLayout(Layout):
    def catalog(self, table: str) -> dict[str, dict[str, Any]]:
        """Every index of the table from pg_index: key and INCLUDE columns in order, unique,
        primary key, and whether the heap was CLUSTERed on it."""
        return sql.layout_from(self.engine.admin_query(sql.CATALOG_SQL, (table,)))

    def expected(self, table: str, index: IndexPlan) -> dict[str, dict[str, Any]]:
        return sql.expected_layout(table, index)

    def lock_granularity(self, table: str, table_lock: bool) -> str:
        """A probe transaction on a fresh timed connection takes what a write transaction of
        the workload takes (the table lock, then an UPDATE's lock); pg_locks, read by the
        admin, shows whether it holds a lock that makes other writers wait."""
        engine = self.engine
        conn = engine.connect()
        try:
            cur = conn.cursor()
            if table_lock:
                engine.dialect.lock_table(cur, table)
            cur.execute(sql.probe_write_sql(table))
            rows = engine.admin_query(sql.LOCKS_SQL, (conn.info.backend_pid, table))
            modes = {m for (m,) in rows}
            conn.rollback()
        finally:
            conn.close()
        if not modes:
            raise EngineError(f"postgres: a write transaction on {table} shows no lock")
        return sql.granularity_from(modes)
