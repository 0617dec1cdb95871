"""A repetition's row, one function per group of columns: the point measured, the timed
sections' clock, a cold read statement by statement, the cache state reached, the table,
the transactions, the engine's counters. ``runner.PointSession.repetition`` joins them in
this order, with the noise columns (``host.noise``) last."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunelab.engines.base import CacheState, Engine
from tunelab.host import noise, provenance
from tunelab.store import results
from tunelab.sweep import findings, workloads
from tunelab.sweep.spec import Point


def derived(c: dict[str, float], elapsed: float, page_size: int | None) -> dict[str, float]:
    """Hit ratios the way DB2 monitoring defines them, plus I/O rates. The application ratio
    does not count pages prefetch brought in; the system ratio does, and can go negative."""
    logical = c.get("logical_reads", 0.0)
    physical = c.get("physical_reads", 0.0)
    prefetch = c.get("prefetch_reads", 0.0)
    out: dict[str, float] = {
        "hit_ratio_app": (logical - (physical - prefetch)) / logical if logical else math.nan,
        "hit_ratio_sys": (logical - physical) / logical if logical else math.nan,
        "physical_reads_per_s": physical / elapsed if elapsed else math.nan,
    }
    if page_size:
        out["read_mb_s"] = physical * page_size / elapsed / 1e6 if elapsed else math.nan
    if "dev_read_requests" in c:  # the point's own device (os_read_ahead): what reached it
        requests, nbytes = c["dev_read_requests"], c.get("dev_read_bytes", math.nan)
        out["dev_read_mb_s"] = nbytes / elapsed / 1e6 if elapsed else math.nan
        out["dev_read_request_kib"] = nbytes / requests / 1024 if requests else math.nan
    return out


def query_times(times_ns: np.ndarray) -> dict[str, float]:
    """Per-statement figures of one repetition: the first statement apart from the rest (in
    a cold repetition each met a cold cache of its own, so they should match), and
    percentiles for many lookups."""
    if not len(times_ns):
        return {}
    t = times_ns / 1e9
    p50, p95, p99 = np.percentile(t, [50, 95, 99])
    return {
        "queries": len(t),
        "q_first_s": t[0],
        "q_rest_median_s": float(np.median(t[1:])) if len(t) > 1 else math.nan,
        "q_p50_s": p50,
        "q_p95_s": p95,
        "q_p99_s": p99,
        "q_max_s": t.max(),
    }


# What each statement of a cold repetition read, as its section's counters say (the device's
# bytes where the point has a device of its own, else what the process read from storage).
READ_BYTES = ("dev_read_bytes", "os_read_bytes")


def read_bytes(delta: dict[str, float]) -> float:
    return next((delta[k] for k in READ_BYTES if k in delta), math.nan)


@dataclass
class Section:
    """One timed section: its clock, the engine's counters' deltas, its noise, rows touched."""

    t0: int
    t1: int
    delta: dict[str, float]
    watched: noise.Watch
    touched: int | None


def cold_queries(sections: list[Section], states: list[CacheState]) -> dict[str, list]:
    """Per statement of a cold repetition: the state its eviction reached and what it read."""
    return {
        "cache_achieved": [st.achieved for st in states],
        "resident_fraction": [st.resident_fraction for st in states],
        "physical_reads": [s.delta.get("physical_reads", math.nan) for s in sections],
        "read_bytes": [read_bytes(s.delta) for s in sections],
    }


def cold(sections: list[Section], states: list[CacheState]) -> dict[str, float]:
    """The row's record of a cold read statement by statement: how many met a cold cache,
    and the bytes the first and (median) the later ones read."""
    if not states:  # warm: the same columns, empty (a sweep's read points share them)
        return dict.fromkeys(results.COLD_COLUMNS, math.nan)
    nbytes = [read_bytes(s.delta) for s in sections]
    return {
        "cold_queries": sum(st.achieved == "cold" for st in states),
        "q_first_read_bytes": nbytes[0],
        "q_rest_median_read_bytes": float(np.median(nbytes[1:])) if len(nbytes) > 1 else math.nan,
    }


@dataclass
class Measured:
    """What a repetition's timed part left: its sections; the cache state each statement of
    a cold read met after its own eviction (empty for any other repetition); the
    repetition's cache state; its client connections; the engine's gauges after it; each
    timed statement's time."""

    sections: list[Section]
    states: list[CacheState]
    state: CacheState
    connections: int
    gauges: dict[str, float]
    times: list[int]

    @functools.cached_property
    def times_ns(self) -> np.ndarray:
        return np.asarray(self.times, dtype=np.int64)

    @functools.cached_property
    def elapsed(self) -> float:
        """The sections' own time: a cold repetition's evictions between them are not in it."""
        return sum(s.t1 - s.t0 for s in self.sections) / 1e9

    @functools.cached_property
    def delta(self) -> dict[str, float]:
        """The engine's counters over every section."""
        total: dict[str, float] = {}
        for s in self.sections:
            for k, v in s.delta.items():
                total[k] = total.get(k, 0.0) + v
        return total


def point(p: Point) -> dict[str, Any]:
    """What was measured and where: the point as its sweep asked it, the host, the code."""
    w = p.workload
    return {
        "sweep": p.sweep,
        "sweep_file": p.sweep_file,
        "point_id": p.point_id,
        "engine": p.engine,
        **{f"{results.KNOB_PREFIX}{k}": v for k, v in p.knobs.items()},
        "workload": w.type,
        **{f"{results.WORKLOAD_PREFIX}{k}": v for k, v in w.params.items()},
        "dataset_rows": p.dataset.rows,
        "seed": p.dataset.seed,
        "cache_requested": p.cache,
        # what the sweep asked: measuring stops between them when its claims are decided
        "repetitions_min": p.repetitions_min,
        "repetitions_max": p.repetitions,
        # the findings its measuring stopped by (a later version re-judges these rows)
        "findings_digest": findings.digest_for(p.sweep_file),
        **provenance.host(),
        **provenance.code(),
    }


def timing(m: Measured, touched: int) -> dict[str, Any]:
    """The timed sections' clock, the rows they touched, the engine's share of the time and
    the per-statement figures."""
    elapsed = m.elapsed
    engine_s = m.delta.get("engine_time_ns", math.nan) / 1e9
    return {
        "rows_touched": touched,
        "elapsed_s": elapsed,
        # CLOCK_MONOTONIC is system-wide: lets anyone check timed sections never overlap
        "timed_start_ns": m.sections[0].t0,
        "timed_end_ns": m.sections[-1].t1,
        "throughput_rows_s": touched / elapsed if elapsed else math.nan,
        "engine_elapsed_s": engine_s,
        # Engine time is summed over the client connections: compare it with the
        # connections' wall time, so several threads cannot push the share below 0.
        "client_share": 1 - engine_s / (elapsed * m.connections) if elapsed else math.nan,
        **query_times(m.times_ns),
    }


def cache(state: CacheState) -> dict[str, Any]:
    """The cache state the repetition reached, how, and how much of the table was resident."""
    return {
        "cache_achieved": state.achieved,
        "cache_method": state.method,
        "resident_fraction": state.resident_fraction,
    }


def table(eng: Engine, page_size: Any, m: Measured, table_build: str) -> dict[str, Any]:
    """The table's pages and size, what the engine wrote, its starts, how the table came."""
    data_bytes = eng.data_bytes(workloads.TABLE)
    elapsed = m.elapsed
    return {
        "page_size_bytes": page_size,
        "data_bytes": data_bytes,
        "data_mb_s": data_bytes / elapsed / 1e6 if data_bytes and elapsed else math.nan,
        "written_bytes": m.delta.get("os_write_bytes", math.nan),
        "engine_starts": eng.starts,
        "table_build": table_build,
    }


def transactions(w: workloads.Workload, touched: int) -> dict[str, Any]:
    """The log scanner's per-transaction figures: the commits the timed section made, and
    the transactions open at a time (one per client thread, while it writes)."""
    return {
        "transactions": workloads.transactions(w, touched) if w.writes else math.nan,
        "open_transactions": w.params["threads"] if w.writes else math.nan,
    }


def counters(m: Measured, page_size: Any) -> dict[str, Any]:
    """The engine's counters over the timed sections, its gauges after them, and the hit
    ratios and rates that follow."""
    return {
        **{f"{results.COUNTER_PREFIX}{k}": v for k, v in m.delta.items()},
        **m.gauges,
        **derived(m.delta, m.elapsed, page_size),
    }
