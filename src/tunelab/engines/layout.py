"""The built table's layout read back from the engine: the ``index`` kind its catalog holds and
the ``lock_granularity`` a transaction of the workload gets.

An engine holds one ``Layout`` (``Engine.layout``, of its class's ``layout_class``); each engine
gives a subclass that reads its own catalog and locks. The runner records what ``applied``
returns and fails a point whose table is not what it asked.
"""

from __future__ import annotations

from typing import Any

from tunelab.engines.base import Engine, EngineError, IndexPlan


class Layout:
    """The read-backs of one engine (``engine``) once its table is built."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def applied(self, table: str, index: IndexPlan, table_lock: bool) -> dict[str, Any]:
        """``index`` and ``lock_granularity`` as the built table really has them: the index
        kind whose layout equals what the catalog holds, and the granularity a transaction of
        the workload gets (``table_lock``: it takes the table lock first)."""
        have = self.catalog(table)
        kinds = [index.kind, *self.engine.info.knobs["index"].values]
        found = next(
            (
                k
                for k in dict.fromkeys(kinds)
                if self.expected(table, IndexPlan(k, index.key, index.include)) == have
            ),
            f"unrecognised {have}",
        )
        granularity = self.lock_granularity(table, table_lock)
        return {"index": found, "lock_granularity": granularity}

    def catalog(self, table: str) -> Any:
        """The table's physical layout as the engine's catalog describes it (comparable with
        ``expected``): clustering key and each index's columns."""
        raise EngineError(f"{self.engine.info.name} cannot read its index layout back")

    def expected(self, table: str, index: IndexPlan) -> Any:
        """What ``catalog`` shows after ``create_table``/``create_index`` of ``index``."""
        raise EngineError(f"{self.engine.info.name} cannot read its index layout back")

    def lock_granularity(self, table: str, table_lock: bool) -> str:
        """The lock granularity a write transaction on ``table`` gets, read from the engine."""
        raise EngineError(f"{self.engine.info.name} cannot read its lock granularity back")
