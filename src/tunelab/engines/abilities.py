"""What an engine may do beyond ``Engine``: page-reference traces of a workload and the
statements a point would run, each a protocol an engine class provides or not."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from tunelab.engines.base import EngineError, IndexPlan
from tunelab.store.dataset import Dataset


@runtime_checkable
class PageTraces(Protocol):
    """Page-reference traces for the buffer-pool simulator; an engine that provides them
    declares ``EngineInfo.traces``."""

    def capture_trace(self, run: Any) -> Any:
        """The page-reference trace (tunelab.bpsim.traces.Trace) of ``run(conns)``."""
        ...


@runtime_checkable
class PlannedSQL(Protocol):
    """What `tunelab plan --sql` prints of a point before its timed statements."""

    def planned_sql(
        self,
        knobs: dict[str, Any],
        dataset: Dataset,
        index: IndexPlan,
        *,
        workload: str | None = None,
        cache: str | None = None,
    ) -> list[str]:
        """Every statement/command a point would run, in the order a point runs them.
        ``workload`` (a type) puts the table's build where the runner does it: once before a
        read's repetitions; before every repetition of a write, and an insert's index on the
        empty table with no load. ``cache`` ("cold", "warm") keeps only that state's steps;
        None lists both, each marked."""
        ...


def page_traces(engine: Any) -> PageTraces:
    """``engine`` as a tracer; EngineError when it cannot trace."""
    if not isinstance(engine, PageTraces):
        raise EngineError(f"{engine.info.name} cannot capture page-reference traces")
    return engine


def planned_sql(
    engine: Any, knobs: dict[str, Any], dataset: Dataset, index: IndexPlan, **point: Any
) -> list[str]:
    """``engine``'s planned statements (see ``PlannedSQL``); none where it plans none."""
    if not isinstance(engine, PlannedSQL):
        return []
    return engine.planned_sql(knobs, dataset, index, **point)
