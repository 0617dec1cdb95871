"""The table a point measures, built once and reused: the build every engine shares, and
what an engine keeps of it (by default, nothing).

An engine holds one ``Builds`` (``Engine.builds``); an engine that keeps tables across the
points of a run gives its own subclass (``Engine.builds_class``): ``ServerBuilds`` keeps them
on the run's server, ``SQLiteBuilds`` keeps copies of the file. The engine and the index plan
are those of ``tunelab.engines.base``, which imports this module (so it names neither).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tunelab.store.dataset import Dataset, Source

# Bumped when the way a table is built changes, so no table built the old way is reused.
TABLE_BUILD = 1


class Builds:
    """The point's table of one engine (``engine``): built from scratch, or reused where the
    engine keeps what it built."""

    def __init__(self, engine: Any):
        self.engine = engine

    def key(self, table: str, index: Any, data: Dataset) -> str:
        """What makes two built tables the same: the data set, the index layout and the knobs
        the table's files are made with (the fresh knobs, e.g. the page size)."""
        eng = self.engine
        fresh = {k: eng.knobs.get(k) for k in sorted(eng.info.fresh_knobs)}
        text = json.dumps(
            [
                TABLE_BUILD,
                eng.info.name,
                table,
                data.key,
                index.kind,
                index.key,
                index.include,
                fresh,
            ],
            default=str,
        )
        return hashlib.sha1(text.encode()).hexdigest()[:12]

    def build(self, table: str, index: Any, source: Source, changes: bool) -> str:
        """The point's table with its rows and index. The same table built earlier in the run
        (same ``key``) is reused where the engine keeps one (``reuse``); else it is built:
        created and bulk-loaded (or, where the engine kept the same rows loaded for another
        index layout, that loaded table put in place: ``load_key``), indexed, then offered to
        later points (``keep``). ``changes``: the point's workload writes to it. Returns
        "reused" or "built"."""
        eng = self.engine
        key = self.key(table, index, source.dataset)
        if self.reuse(table, key, changes):
            return "reused"
        self.forget(table)
        loaded = self.load_key(table, index, source.dataset)
        if loaded is None or not self.reuse_loaded(table, loaded):
            eng.create_table(table, index)
            eng.bulk_load(table, source)
            if loaded is not None:
                self.keep_loaded(table, loaded)
        eng.create_index(table, index)
        self.keep(table, key, changes)
        return "built"

    def empty(self, table: str, index: Any) -> str:
        """The table with no rows, indexed (an insert workload fills it and maintains the
        index as it goes); never kept. Returns "empty"."""
        self.forget(table)
        self.engine.create_table(table, index)
        self.engine.create_index(table, index)
        return "empty"

    # -- what an engine keeps: nothing, unless it says otherwise -------------------------------
    def load_key(self, table: str, index: Any, data: Dataset) -> str | None:
        """What makes two tables the same once loaded, before their secondary index: for an
        engine that keeps that stage too (``keep_loaded``), so that index layouts over the
        same rows load them once; None: it keeps none."""
        return None

    def reuse_loaded(self, table: str, key: str) -> bool:
        """Put the table loaded under ``load_key`` ``key`` in place, as it was right after its
        load; False when the engine has none."""
        return False

    def keep_loaded(self, table: str, key: str) -> None:
        """``table`` was just created and loaded under ``key``: keep it as it is now."""

    def reuse(self, table: str, key: str, changes: bool = True) -> bool:
        """Put the table built under ``key`` in place, exactly as it was built (no point has
        written to it since); False when the engine has none.
        ``changes``: the point's workload writes to it (else it may read the kept one)."""
        return False

    def forget(self, table: str) -> None:
        """``table`` is about to be built again: whatever was kept under its name is gone."""

    def keep(self, table: str, key: str, changes: bool) -> None:
        """``table`` was just built under ``key``; keep it for later points where it stays as
        built (``changes``: the workload is about to write to it)."""
