"""MariaDB's built table read back: its indexes from information_schema, and the lock a
transaction of the workload holds (SHOW OPEN TABLES, the table's storage engine)."""

from __future__ import annotations

from tunelab.engines import mariadb_sql as sql
from tunelab.engines.base import IndexPlan
from tunelab.engines.layout import Layout
from tunelab.engines.mariadb_sql import DATABASE


class MariaDBLayout(Layout):
    def catalog(self, table: str) -> dict[str, list[str]]:
        """Each index's columns as information_schema.STATISTICS lists them (PRIMARY: the
        clustering key InnoDB stores the rows by)."""
        return sql.layout_from(self.engine.admin_query(sql.CATALOG_SQL, (DATABASE, table)))

    def expected(self, table: str, index: IndexPlan) -> dict[str, list[str]]:
        return sql.expected_layout(table, index)

    def lock_granularity(self, table: str, table_lock: bool) -> str:
        """A transaction of the workload opened as the timed ones are: 'table' when the server
        shows the table locked by it (SHOW OPEN TABLES counts LOCK TABLES), else 'row' when
        the table is InnoDB's (row locks), else the storage engine's name."""
        engine = self.engine
        conn = engine.connect()
        try:
            cur = conn.cursor()
            if table_lock:
                engine.dialect.lock_table(cur, table)
            in_use = engine.admin_query(sql.OPEN_TABLES_SQL, (table,))
            storage = engine.admin_query(sql.STORAGE_SQL, (DATABASE, table))
            conn.rollback()
            if table_lock:
                engine.dialect.unlock_tables(cur)
        finally:
            conn.close()
        if in_use:
            return "table"
        found = storage[0][0] if storage else "missing"
        return "row" if found == "InnoDB" else f"{found} (no row locks)"
