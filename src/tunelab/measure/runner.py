"""Measure one point: provision the engine, build the table, then per repetition reset,
make cold or warm, read counters, time only the workload, read counters again.

Timed sections never overlap anything else of the lab: the measurement holds the
host-wide bench lock exclusively (``tunelab.host.benchlock``; Snakemake also gives timed jobs one
shared resource).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import math
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tunelab import engines
from tunelab.engines import abilities
from tunelab.engines.base import AccessPath, CacheState, Engine, EngineError
from tunelab.engines.server import ServerEngine
from tunelab.host import atomic, benchlock, cache, noise, ownership, provenance
from tunelab.measure import columns
from tunelab.measure.columns import Measured, Section
from tunelab.store import dataset, results
from tunelab.sweep import workloads
from tunelab.sweep.spec import Point

_PLACEMENT: list[noise.Placement] = []  # this measuring process's, once pinned


def placement(engine: str) -> noise.Placement | None:
    """The client's and a server engine's CPUs: the measuring process is pinned to the
    client's once, the engine's container gets the rest. An engine in the client's process
    (SQLite) is left where it was: pinning it would also bind its worker threads."""
    if not engines.info(engine).needs_container:
        return None
    if not _PLACEMENT:
        _PLACEMENT.append(noise.pin_client(noise.plan_cpus()))
    return _PLACEMENT[0]


@contextlib.contextmanager
def bench_slot(workdir: Path) -> Iterator[None]:
    ownership.make_dir(workdir)
    with benchlock.exclusive(benchlock.this_job("measure")):
        yield


def _same(asked: Any, got: Any) -> bool:
    if isinstance(asked, bool) or isinstance(got, bool):
        return bool(asked) == bool(got)
    if isinstance(asked, int | float) and isinstance(got, int | float):
        return math.isclose(float(asked), float(got), rel_tol=1e-6, abs_tol=1e-9)
    return str(asked).lower() == str(got).lower()


def check_applied(
    point: Point, applied: dict[str, Any], complete: bool = True, means: dict | None = None
) -> None:
    """Every asked knob as the engine reports it must be what was asked (or what it ``means``
    for this workload: ``index`` builds nothing for a workload without a predicate);
    ``complete``: and every asked knob must have been read back (False right after
    provisioning, before the table whose layout and locking come from the catalog exists)."""
    asked = {**point.knobs, **{k: v for k, v in (means or {}).items() if k in point.knobs}}
    wrong = [
        f"{k}: asked {v!r}, engine reports {applied[k]!r}"
        for k, v in asked.items()
        if k in applied and not _same(v, applied[k])
    ]
    if complete:
        wrong += [f"{k}: asked {v!r}, not read back" for k, v in asked.items() if k not in applied]
    if wrong:
        raise EngineError(f"{point.engine} did not apply the knobs as asked: " + "; ".join(wrong))


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after}


def _prepare_table(eng: Engine, w: workloads.Workload, plan: Any, source: dataset.Source) -> str:
    """The table the workload runs on; how it came ("built", "reused", "empty")."""
    if w.type == "insert":
        return eng.builds.empty(workloads.TABLE, plan)
    return eng.builds.build(workloads.TABLE, plan, source, changes=w.writes)


def check_access(point: Point, eng: Engine, plans: list[AccessPath], expected: str) -> str:
    """The point's access path as one string; with ``access: forced`` every plan must be the
    one the index knob built, or the point fails (a curve of scans labelled 'index' misleads)."""
    paths = list(dict.fromkeys(p.path for p in plans))
    wrong = sorted({p.base for p in plans if p.base != expected})
    if point.access == "forced" and expected != "insert" and wrong:
        raise EngineError(
            f"{point.engine} did not use the access path the index knob built "
            f"(access: forced): expected {expected}, the plan is {' | '.join(wrong)}"
        )
    return " | ".join(paths)


def timed(eng: Engine, conns: list[Any], run: Any, times: list[int]) -> Section:
    """Counters, the timed run alone, counters again; nothing else inside the clock. Call it
    with the collector paused (``collector_paused``)."""
    pids = eng.pids()  # with the connections open (a server's backends)
    before = eng.counters(conns)
    with noise.watch(pids, eng.placement) as watched:  # reads /proc outside t0..t1
        t0 = time.perf_counter_ns()
        touched = run(conns, times)
        t1 = time.perf_counter_ns()
    after = eng.counters(conns)
    return Section(t0, t1, _delta(before, after), watched, touched)


def cold_reads(
    eng: Engine, stmts: workloads.Statements, times: list[int]
) -> tuple[list[Section], list[CacheState]]:
    """A cold read, statement by statement: each after an eviction of its own (untimed, as are
    the connection and the counters), so every timed statement meets the cold state its row
    records, not just the first (whose pages the later ones would find in memory)."""
    sections, states = [], []
    with collector_paused():  # one collection for the repetition, not one per statement
        for one in stmts.one_by_one():
            states.append(eng.make_cold())
            conns = [eng.connect()]
            try:
                run = lambda c, t, one=one: workloads.run_reads(eng.dialect, c, one, t)  # noqa: E731
                sections.append(timed(eng, conns, run, times))
            finally:
                conns[0].close()
    return sections, states


def cold_state(states: list[CacheState]) -> CacheState:
    """A repetition's cold state: cold when every eviction was; the worst one's figures."""
    worst = max(states, key=lambda s: s.resident_fraction or 0.0)
    achieved = "cold" if all(s.achieved == "cold" for s in states) else "partial"
    return CacheState("cold", achieved, worst.method, worst.resident_pages_after, worst.total_pages)


def _prepare_cache(
    eng: Engine,
    w: workloads.Workload,
    point: Point,
    run: Any,
    kept: list[Any],
    follows_itself: bool = True,
) -> tuple:
    """The connections of a repetition, with the cache as asked. ``kept``: a warm read's
    connections from the repetition before, which ran the same workload on them (on a pool
    in the server or, as SQLite's, in the connections): that was its warm-up when it ran just
    before (``follows_itself``); after other points (whose cold repetitions may have dropped
    the OS cache) they run the workload once more, untimed."""
    threads = w.params.get("threads", 1)
    if point.cache == "cold":
        state = eng.make_cold()
        conns = [eng.connect() for _ in range(threads)]
        return conns, state
    if kept and not follows_itself:
        conns, method = kept, cache.WARM_UP
        workloads.warm_up(w, conns, run)
    elif kept:
        conns, method = kept, cache.WARM_BY_PREVIOUS
    else:
        eng.settle()
        conns = [eng.connect() for _ in range(threads)]
        workloads.warm_up(w, conns, run)
        method = cache.WARM_UP
    if w.writes:
        # The warm-up read the table; the timed write must start outside that transaction.
        for c in conns:
            c.commit()
    resident, total = cache.residency(eng.data_files())
    return conns, CacheState("warm", "warm", method, resident, total)


def rows_touched(eng: Engine, statements: workloads.Statements, sections: list[Section]) -> int:
    """The rows the timed sections touched; where the fetch path did not count them, the
    engine counts them, untimed."""
    counts = [s.touched for s in sections]
    if None not in counts:
        return sum(counts)
    conn = eng.connect()
    try:
        return workloads.result_rows(conn, statements)
    finally:
        conn.close()


@dataclass
class Setup:
    """An engine provisioned for a point, its table built (reads) and what the point needs."""

    engine: Engine
    workload: workloads.Workload
    plan: Any
    source: dataset.Source
    applied: dict[str, Any]
    table_lock: bool
    statements: workloads.Statements
    table_build: str = ""  # how the read workloads' table came: "built" or "reused"

    def runner(self) -> workloads.Run:
        # Only the insert workload needs the data set's rows here (the rows it inserts).
        rows = self.source.rows if self.workload.type == "insert" else []
        d = self.engine.dialect
        return workloads.runner(d, self.workload, rows, self.statements, self.table_lock)


@contextlib.contextmanager
def provisioned(
    point: Point, workdir: Path, data_dir: Path, run_dir: Path | None = None
) -> Iterator[Setup]:
    """Provision the point's engine, check its knobs, build the table; tear down after.
    With ``run_dir`` (a workflow run's directory) a server engine may be kept for later
    points and reused from earlier ones, restarted only when a knob needs it."""
    source = dataset.Source(point.dataset, data_dir)
    w = point.workload
    plan = w.index_plan(point.knobs.get("index", "none"))
    run_id = run_dir.name if run_dir is not None else uuid.uuid4().hex[:12]
    ownership.make_dir(workdir)  # stamped: `tunelab recover` removes it after a kill
    eng = engines.create(point.engine, workdir / "engine", run_id)
    eng.run_dir = run_dir
    eng.placement = placement(point.engine)
    with eng:
        eng.provision(point.knobs)
        applied = eng.applied_knobs()
        check_applied(point, applied, complete=False)
        table_lock = point.knobs.get("lock_granularity") == "table"
        stmts = workloads.statements(
            eng.dialect, w, plan, point.access, point.dataset.rows, point.dataset.seed
        )
        setup = Setup(eng, w, plan, source, applied, table_lock, stmts)
        if not w.writes:
            setup.table_build = _prepare_table(eng, w, plan, source)
            read_back_table(setup, point)
        yield setup


def read_back_table(setup: Setup, point: Point) -> None:
    """Once the table is built: its index layout (from the catalog) and the lock granularity
    a transaction gets join the applied knobs, and every asked knob must now be read back."""
    layout = setup.engine.layout.applied(workloads.TABLE, setup.plan, setup.table_lock)
    setup.applied.update({k: v for k, v in layout.items() if k in point.knobs})
    check_applied(point, setup.applied, means={"index": setup.plan.kind})


def _explained(setup: Setup, point: Point, plans_sink: list[dict] | None) -> dict[str, Any]:
    """Plans of the timed statements, captured before any timing and kept (a refused plan
    too, it explains the failure); the row's access columns."""
    eng, w = setup.engine, setup.workload
    expected = (
        "insert" if w.type == "insert" else eng.dialect.expected_access(workloads.TABLE, setup.plan)
    )
    conn = eng.connect()
    try:
        plans = workloads.explain(eng.dialect, conn, w, setup.statements)
    finally:
        conn.close()
    if plans_sink is not None:
        plans_sink.extend(
            {"statement": sql, "args": list(args), "access_path": p.path, "plan": p.raw}
            for (sql, args), p in zip(setup.statements.to_explain(), plans)
        )
    path = check_access(point, eng, plans, expected)
    matches = all(p.base == expected for p in plans)
    return {
        "access_mode": point.access,
        "access_path": path,
        "access_expected": expected,
        "access_matches": matches,
    }


class PointSession:
    """One point's engine, provisioned and its table built, kept open between the point's
    repetitions: a sweep measured in rounds keeps several open (an engine without a server)
    or opens one again for each run of repetitions (a server engine: one server at a time).
    A warm read's connections go from one repetition of the point to its next: the
    repetition before ran the same workload on them, on the same unchanged table."""

    def __init__(
        self, point: Point, workdir: Path, data_dir: Path, run_dir: Path | None = None
    ) -> None:
        self.point, self.workdir, self.data_dir, self.run_dir = point, workdir, data_dir, run_dir
        self.plans: list[dict] = []  # the timed statements' plans, once per point
        self.times: list[pd.DataFrame] = []  # each timed statement's time, per repetition
        self._stack = contextlib.ExitStack()
        self._kept: list[Any] = []
        self._read_back = False
        self.base: dict[str, Any] = {}

    def __enter__(self) -> PointSession:
        point = self.point
        self.base = columns.point(point)
        try:
            self.setup = self._stack.enter_context(
                provisioned(point, self.workdir, self.data_dir, self.run_dir)
            )
            eng = self.setup.engine
            self.base["engine_version"] = eng.version()
            self.base["host_fs"] = provenance.filesystem(eng.workdir)
            self.page_size = self.setup.applied.get("page_size") or point.knobs.get("page_size")
            self.run = self.setup.runner()
            where = eng.placement or noise.Placement(noise.usable_cpus())
            self.base.update({**where.columns(), **eng.cpu_columns()})
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._close_kept()
        finally:
            self._stack.close()

    def _close_kept(self) -> None:
        for c in self._kept:
            c.close()
        self._kept = []

    def set_up_anew(self) -> None:
        """Give the next repetition a set-up of its own, as a block's part of a pass gets when
        another block ran before it: a block that ends one pass and begins the next (the
        order turns) would otherwise measure on, and its two rounds would share what the
        set-up did. A server restarts (a cold repetition restarts it anyway); warm
        connections go, so the next repetition warms up again."""
        self._close_kept()
        eng = self.setup.engine
        if isinstance(eng, ServerEngine) and self.point.cache != "cold":
            eng.restart()

    def repetition(
        self, rep: int, extra: dict[str, Any] | None = None, follows_itself: bool = True
    ) -> dict[str, Any]:
        """Measure one repetition; its row (``extra``: columns such as its round).
        ``follows_itself``: nothing ran on the host since this point's previous repetition."""
        table_build = self._prepare()
        started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        measured = self._time(follows_itself)
        row = self._row(rep, extra, started, table_build, measured)
        self._keep_times(rep, measured)
        return row

    def _prepare(self) -> str:
        """A write's table made anew; before the point's first repetition, the knobs read
        back and the plans captured, into the row's base. How the table came."""
        point, setup = self.point, self.setup
        table_build = setup.table_build
        if setup.workload.writes:
            table_build = _prepare_table(setup.engine, setup.workload, setup.plan, setup.source)
        if not self._read_back:
            if setup.workload.writes:
                read_back_table(setup, point)
            self.base.update({f"{results.APPLIED_PREFIX}{k}": v for k, v in setup.applied.items()})
            self.base.update(_explained(setup, point, None if self.plans else self.plans))
            self._read_back = True
        return table_build

    def _time(self, follows_itself: bool) -> Measured:
        """The timed sections with the cache as asked: a cold read statement by statement,
        anything else in one section on connections a warm read keeps for its next one."""
        point, eng, w = self.point, self.setup.engine, self.setup.workload
        times: list[int] = []
        if point.cache == "cold" and not w.writes:
            sections, states = cold_reads(eng, self.setup.statements, times)
            return Measured(sections, states, cold_state(states), 1, eng.gauges(), times)
        conns, state = _prepare_cache(eng, w, point, self.run, self._kept, follows_itself)
        self._kept = []
        try:
            with collector_paused():
                sections = [timed(eng, conns, self.run, times)]
            gauges = eng.gauges()
        finally:
            if point.cache == "warm" and not w.writes:
                self._kept = conns  # warm for the next repetition: its warm-up was this one
            else:
                for c in conns:
                    c.close()
        return Measured(sections, [], state, len(conns), gauges, times)

    def _row(
        self,
        rep: int,
        extra: dict[str, Any] | None,
        started: str,
        table_build: str,
        m: Measured,
    ) -> dict[str, Any]:
        """The repetition's row: the point's base, then one group of columns after another."""
        eng, w = self.setup.engine, self.setup.workload
        touched = rows_touched(eng, self.setup.statements, m.sections)
        return {
            **self.base,
            "rep": rep,
            **(extra or {}),
            "started_at": started,
            **columns.timing(m, touched),
            **(columns.cold(m.sections, m.states) if not w.writes else {}),
            **columns.cache(m.state),
            **columns.table(eng, self.page_size, m, table_build),
            **columns.transactions(w, touched),
            **columns.counters(m, self.page_size),
            **noise.columns([s.watched for s in m.sections]),
        }

    def _keep_times(self, rep: int, m: Measured) -> None:
        """Each timed statement's time (and, cold, what its eviction reached and it read)."""
        if len(m.times_ns):
            query = np.arange(len(m.times_ns))
            per_query = {"rep": rep, "query": query, "elapsed_s": m.times_ns / 1e9}
            if m.states:
                per_query |= columns.cold_queries(m.sections, m.states)
            self.times.append(pd.DataFrame(per_query))


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a timed section, after a full collection
    just before it: its pauses are the measuring process's, not the workload's. Fetching
    100,000 rows allocates enough objects to start thousands of young-generation collections
    inside the section; measured in a process with the lab's modules loaded, the fetch took
    39 ms (median of 40) with the collector paused against 42 ms with it running, and a full
    collection, which could fall into any repetition, took 44 ms. Objects are still freed by
    reference counting meanwhile; only cycles wait until the section ends."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def measure(
    point: Point,
    workdir: Path,
    data_dir: Path,
    rows_sink: list[dict],
    run_dir: Path | None = None,
    plans_sink: list[dict] | None = None,
    times_sink: list[pd.DataFrame] | None = None,
) -> list[dict]:
    """Run every repetition of ``point``, back to back (one point alone: each repetition is
    its own round); each finished row is appended to ``rows_sink`` at once, so a later
    failure loses nothing already measured. The plans of the timed statements go to
    ``plans_sink``, each statement's time to ``times_sink``."""
    session = PointSession(point, workdir, data_dir, run_dir)
    try:
        with session:
            for rep in range(point.repetitions):
                extra = {"round": rep, "order_in_round": 0}
                rows_sink.append(session.repetition(rep, extra))
    finally:
        if plans_sink is not None:
            plans_sink.extend(session.plans)
        if times_sink is not None:
            times_sink.extend(session.times)
    return rows_sink


def plans_path(out: Path) -> Path:
    """The raw plans of a point's timed statements, beside its results."""
    return Path(out).with_suffix(".plans.json")


def write_plans(plans: list[dict], out: Path) -> None:
    """The raw plans of a point's timed statements beside its results file ``out``; nothing
    when none were captured."""
    if plans:
        text = json.dumps(plans, indent=1, default=str)
        atomic.write(plans_path(out), lambda f: f.write(text.encode()))


def queries_path(out: Path) -> Path:
    """Each timed statement's time (rep, query, elapsed_s), beside the point's results
    (compressed, and not matching ``*.csv``, which names the point files)."""
    return Path(out).with_suffix(".queries.csv.gz")


def run_point(
    point: Point, out: Path, workdir: Path, data_dir: Path, run_id: str | None = None
) -> Path:
    """Measure ``point`` and write its rows to ``out``, then its check file
    (``results.write_point``). On failure the rows already measured go to
    ``<out>.partial.csv`` and the error is raised again. ``run_id`` names the workflow run
    whose points may share a server engine (see ``provisioned``)."""
    rows: list[dict] = []
    plans: list[dict] = []
    times: list[pd.DataFrame] = []
    workdir = Path(workdir).resolve()  # container bind mounts need absolute host paths
    point_dir = workdir / "points" / point.point_id
    run_dir = workdir / "runs" / run_id if run_id else None
    try:
        try:
            with bench_slot(workdir):
                measure(point, point_dir, data_dir, rows, run_dir, plans, times)
        finally:
            # First, so that on a full disk the rows below find room again.
            shutil.rmtree(point_dir, ignore_errors=True)  # the engine removed its data already
        write_plans(plans, out)
        if times:
            # Between two points, where nothing is timed: the fastest gzip level (the file is
            # about 20 % larger than at the default level, written four times sooner).
            atomic.write_csv(pd.concat(times, ignore_index=True), queries_path(out), level=1)
        return results.write_point(rows, out, point.repetitions, point.repetitions_min)
    except BaseException:
        # Keep what was measured (the workflow deletes a failed job's outputs, not this file);
        # a failure to save it must not hide the error that stopped the point.
        with contextlib.suppress(Exception):
            if rows:
                results.write_rows(rows, out.with_suffix(".partial.csv"), overwrite=True)
        with contextlib.suppress(Exception):  # the plans explain a failure too (access: forced)
            write_plans(plans, out)
        raise


def trace_point(point: Point, out: Path, workdir: Path, data_dir: Path) -> Path:
    """Capture the page-reference trace of the point's workload (untimed) for the buffer-pool
    simulator, on an engine that can trace (SQLite), and write it to ``out``."""
    from tunelab.bpsim.traces import write_trace

    workdir = Path(workdir).resolve()
    trace_dir = workdir / "trace" / point.point_id
    with bench_slot(workdir), provisioned(point, trace_dir, data_dir) as s:
        if s.workload.writes:
            _prepare_table(s.engine, s.workload, s.plan, s.source)
        trace = abilities.page_traces(s.engine).capture_trace(s.runner())
    shutil.rmtree(trace_dir, ignore_errors=True)
    trace.meta.update({"sweep": point.sweep, "point_id": point.point_id})
    return write_trace(out, trace)
