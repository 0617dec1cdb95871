"""The SQL text of a point's timed statements as an engine writes it: the defaults each engine's
dialect (``Engine.dialect_class``, in the engine's own SQL module) overrides.

What makes a timed number the engine's work lives here: ``table_ref`` (the hint that forces the
access path the ``index`` knob built), ``explain`` (the plan that really ran, normalised),
``bind`` (how arguments reach the optimizer), ``fetch`` (the driver's native row path, no
per-row Python) and ``write_steps`` (writes rendered before timing). ``load`` is the driver
path of an untimed load, where ``Engine.bulk_load`` has no faster one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from tunelab.engines.base import KEYS_ALIAS, AccessPath, Engine, EngineError, IndexPlan
from tunelab.store.dataset import COLUMNS


class Dialect:
    """An engine's timed statements; one per engine instance (``engine.dialect``)."""

    paramstyle: ClassVar[str] = "qmark"  # placeholder style for the engine's DB-API driver

    def __init__(self, engine: Engine):
        self.engine = engine

    @property
    def placeholder(self) -> str:
        return {"qmark": "?", "format": "%s", "pyformat": "%s"}[self.paramstyle]

    # -- the statements ---------------------------------------------------------------------
    def table_ref(self, table: str, index: IndexPlan, access: str) -> str:
        """The FROM item of a timed query. With ``access == "forced"`` it carries the hint
        that makes the engine use exactly what the index plan built (or no index)."""
        return table

    def index_name(self, table: str, index: IndexPlan) -> str:
        """The name of the structure an index plan builds, as the engine's plans name it."""
        return f"{table}_{index.kind}"

    def expected_access(self, table: str, index: IndexPlan) -> str:
        """The normalised access path the index plan built (what 'forced' demands): a scan
        without an index, the index then the table, or the covering index alone."""
        if index.kind == "none" or not index.key:
            return "scan"
        name = self.index_name(table, index)
        if index.kind in ("covering", "covering_wrong_order"):
            return f"index-only:{name}"
        return f"index:{name}"

    def explain(self, conn: Any, sql: str, args: Sequence[Any]) -> AccessPath:
        """The plan the engine chooses for this statement, before it is timed."""
        raise EngineError(f"{self.engine.info.name} cannot explain statements")

    def bind(self, sql: str, args: Sequence[Any], values_matter: bool = True) -> tuple[str, tuple]:
        """The statement and arguments as the engine should receive them. Where the plan may
        depend on the values (``values_matter``: a range's selectivity), engines whose
        optimizer would otherwise plan once for every value inline literals here."""
        return sql, tuple(args)

    def key_join(self, table: str, table_ref: str, n: int) -> str:
        """The FROM clause of a batched look-up: a list of ``n`` keys (bound as ``key_args``
        gives them) joined to ``table_ref`` on ``id``, so that the engine looks each key up in
        the list's order, one index descent per key: a nested loop whose outer side is the
        list (never a hash or merge join, which would read the whole table or index; the plan
        shows which). By default a VALUES list of markers."""
        rows = ", ".join([f"({self.placeholder})"] * n)
        k = KEYS_ALIAS
        return f"(VALUES {rows}) AS {k}(id) JOIN {table_ref} ON {table}.id = {k}.id"

    def key_args(self, keys: Sequence[int]) -> tuple:
        """The arguments of ``key_join``'s statement for these keys, rendered before timing."""
        return tuple(int(k) for k in keys)

    def fetch(self, cursor: Any) -> int | None:
        """Consume the executed statement's rows through the driver's own path (no per-row
        Python work in the lab) and return how many there were, or None when counting would
        cost the timed section more than the driver's fetch (the runner then has the engine
        count them, untimed)."""
        return len(cursor.fetchall())

    def write_steps(self, sql: str, rows: Sequence[Sequence[Any]]) -> list[tuple[str, Any]]:
        """One transaction of a write workload as (statement, rows for executemany, or None
        for a statement sent as it is). Rendered before timing: an engine whose driver would
        build the statements row by row in Python renders them here instead."""
        return [(sql, rows)]

    def insert_sql(self, table: str) -> str:
        cols = ", ".join(COLUMNS)
        return (
            f"INSERT INTO {table} ({cols}) VALUES ({', '.join([self.placeholder] * len(COLUMNS))})"
        )

    # -- locking ----------------------------------------------------------------------------
    def lock_table(self, cursor: Any, table: str) -> None:
        """Take a table-level lock inside the current transaction (lock_granularity=table)."""
        raise EngineError(f"{self.engine.info.name} has no table-level lock")

    def unlock_tables(self, cursor: Any) -> None:
        """Release what ``lock_table`` took, after the commit (engines that need it)."""

    # -- loading ----------------------------------------------------------------------------
    def load(self, table: str, rows: Iterable[Sequence[Any]], batch: int = 10_000) -> None:
        """Load rows through the driver, a transaction per ``batch`` rows (untimed set-up)."""
        conn = self.engine.connect()
        try:
            cur = conn.cursor()
            sql = self.insert_sql(table)
            chunk: list[Sequence[Any]] = []
            for row in rows:
                chunk.append(row)
                if len(chunk) >= batch:
                    cur.executemany(sql, chunk)
                    conn.commit()
                    chunk.clear()
            if chunk:
                cur.executemany(sql, chunk)
            conn.commit()
        finally:
            conn.close()
