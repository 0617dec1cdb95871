"""The DB2 engine for real: provision a Db2 Community container, read the knobs back from the
catalog, load a small dataset, build each index kind, make the cache cold and warm, watch the
monitor counters, capture and force the plans of the timed statements, compare the engine's
own time with the client's clock, and measure a point end to end.

Runs wherever the pinned image is in the local Docker engine (``pytest -m db2``; the CI
workflow .github/workflows/db2.yml pulls it). Elsewhere the whole module is skipped with the
reason printed (``-ra``). A Db2 start takes minutes: one module-scoped engine serves most tests.
"""

from __future__ import annotations

import time

import pytest

from tunelab.engines import db2, db2_explain, db2_sql
from tunelab.host import containers
from tunelab.measure import runner
from tunelab.run import recovery
from tunelab.store import dataset
from tunelab.store.dataset import Dataset
from tunelab.sweep import spec, workloads

ROWS = 20_000
SEED = 7
TABLE = workloads.TABLE


def _skip_reason() -> str | None:
    if reason := containers.docker_unavailable_reason():
        return reason
    tag = db2.image()
    if not db2.image_present(tag):
        return (
            f"DB2 Community image {tag} not present locally "
            "(docker pull it where a registry is reachable)"
        )
    return None


SKIP = _skip_reason()
pytestmark = [
    pytest.mark.db2,
    pytest.mark.slow,
    pytest.mark.skipif(SKIP is not None, reason=SKIP or ""),
    pytest.mark.timeout(3600),
]

KNOBS = {
    "page_size": 8192,
    "buffer_pool": 1000,  # 8 MB: more than the 20k-row table, so a second scan stays warm
    "extent_size": 8,
    "prefetch_size": 32,
    "overhead_ms": 5.5,
    "transferrate_ms": 0.1,
    "direct_io": False,  # FILE SYSTEM CACHING: the host's page cache matters for cold
    "lock_granularity": "table",
    "index": "none",
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("data")
    return dataset.rows_of(dataset.read(Dataset(ROWS, SEED), data_dir))


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("db2") / "points" / "lifecycle" / "engine"
    eng = db2.DB2Engine(workdir, "pytest-db2")
    try:
        eng.provision(KNOBS)
        yield eng
    finally:
        eng.teardown()


def build(eng, rows, wtype="multipoint", kind="none"):
    w = workloads.Workload(wtype, workloads.DEFAULTS[wtype])
    plan = w.index_plan(kind)
    eng.create_table(TABLE, plan)
    eng.dialect.load(TABLE, rows)
    eng.create_index(TABLE, plan)
    return w, plan


def one(eng, sql):
    return eng.query(sql)[0]


def scan(eng) -> int:
    conn = eng.connect()
    try:
        cur = conn.cursor()
        cur.execute(f"SELECT * FROM {TABLE}")
        n = len(cur.fetchall())
        conn.commit()
        return n
    finally:
        conn.close()


def test_knobs_are_read_back_from_the_catalog_and_monitor(engine):
    applied = engine.applied_knobs()
    for k in ("page_size", "buffer_pool", "extent_size", "prefetch_size", "direct_io"):
        assert applied[k] == KNOBS[k], k
    assert applied["overhead_ms"] == pytest.approx(KNOBS["overhead_ms"])
    assert applied["transferrate_ms"] == pytest.approx(KNOBS["transferrate_ms"])
    bp = one(
        engine,
        f"SELECT NPAGES, PAGESIZE FROM SYSCAT.BUFFERPOOLS WHERE BPNAME = "
        f"'{db2_sql.bufferpool_name(8192)}'",
    )
    assert tuple(map(int, bp)) == (KNOBS["buffer_pool"], 8192)
    ts = one(
        engine,
        "SELECT PAGESIZE, EXTENTSIZE, PREFETCHSIZE FROM SYSCAT.TABLESPACES "
        f"WHERE TBSPACE = '{db2_sql.tablespace_name(8192)}'",
    )
    assert tuple(map(int, ts)) == (8192, 8, 32)
    assert "Db2" in engine.version() or "DB2" in engine.version()


def test_table_in_its_space_with_the_asked_locksize(engine, rows):
    build(engine, rows)
    tbspace, locksize = one(engine, db2_sql.table_sql(TABLE)["table"])
    assert tbspace.strip() == db2_sql.tablespace_name(8192)
    assert locksize.strip() == "T"
    assert engine.applied_knobs()["lock_granularity"] == "table"
    assert int(one(engine, f"SELECT COUNT(*) FROM {TABLE}")[0]) == ROWS
    files = engine.data_files()
    assert files and all(f.is_file() and f.stat().st_size > 0 for f in files)
    assert engine.data_bytes(TABLE) > ROWS * 80  # rows are about 100 bytes


@pytest.mark.parametrize("kind", workloads.INDEX_KINDS)
def test_each_index_kind_is_built_as_the_catalog_reports(engine, rows, kind):
    _, plan = build(engine, rows, "multipoint", kind)
    got = db2_sql.index_kind(plan.key, engine.query(db2_sql.table_sql(TABLE)["indexes"]))
    assert got == db2_sql.expected_kind(plan) == kind
    if kind == "clustered":
        # After REORG ... INDEX and RUNSTATS (detailed) the rows follow the index order.
        factor = float(
            one(
                engine,
                f"SELECT CLUSTERFACTOR FROM SYSCAT.INDEXES WHERE TABNAME = '{TABLE.upper()}'",
            )[0]
        )
        assert factor > 0.9


def test_cold_reads_from_disk_and_warm_does_not(engine, rows):
    build(engine, rows, "scan")
    state = engine.make_cold()
    assert state.achieved == "cold", state
    assert state.total_pages and state.resident_pages_after is not None
    before = engine.counters([])
    assert scan(engine) == ROWS
    cold = runner._delta(before, engine.counters([]))
    assert cold["physical_reads"] > 0
    assert cold["logical_reads"] >= cold["physical_reads"] - cold["prefetch_reads"]
    before = engine.counters([])
    assert scan(engine) == ROWS
    warm = runner._delta(before, engine.counters([]))
    assert warm["logical_reads"] > 0
    assert warm["physical_reads"] == 0  # the pool holds the whole table


def test_table_lock_blocks_a_second_transaction_and_the_counters_see_it(engine, rows):
    build(engine, rows, "update")
    holder, waiter = engine.connect(), engine.connect()
    try:
        before = engine.counters([])
        engine.dialect.lock_table(holder.cursor(), TABLE)
        cur = waiter.cursor()
        cur.execute("SET CURRENT LOCK TIMEOUT 2")
        with pytest.raises(Exception, match="SQL0911N|57033|40001"):
            cur.execute(f"UPDATE {TABLE} SET balance = balance + 1 WHERE id = 1")
        holder.commit()
        after = engine.counters([])
    finally:
        waiter.rollback()
        holder.close()
        waiter.close()
    assert after["lock_waits"] > before["lock_waits"]
    assert after["lock_wait_time_ms"] >= before["lock_wait_time_ms"]


def test_a_point_measured_end_to_end_leaves_no_container(write_sweep, tmp_path):
    path = write_sweep(
        """
        name: db2-e2e
        engines: [db2]
        dataset: {rows: 5000, seed: 3}
        knobs:
          page_size: [4096]
        fixed:
          buffer_pool: 200
          extent_size: 4
          prefetch_size: 16
        workloads:
          - type: scan
        cache: cold
        repetitions: 2
        """
    )
    points, errors = spec.expand(path, "db2")
    assert errors == [] and len(points) == 1
    rows_out: list[dict] = []
    workdir = tmp_path / "points" / points[0].point_id  # as runner.run_point lays it out
    runner.measure(points[0], workdir, tmp_path / "data", rows_out)
    assert len(rows_out) == 2
    for r in rows_out:
        assert r["cache_achieved"] == "cold"
        assert r["rows_touched"] == 5000
        assert r["c_physical_reads"] > 0
        assert r["applied_buffer_pool"] == 200 and r["applied_page_size"] == 4096
    left = containers.client().containers.list(
        all=True, filters={"label": [f"{containers.POINT_LABEL}={points[0].point_id}"]}
    )
    assert left == []


def test_points_of_a_run_share_one_server(write_sweep, tmp_path):
    """In a workflow run the second point attaches to the kept server (no start), with its
    own buffer pool and table space; the run's clean-up removes the server."""
    import uuid

    import pandas as pd

    path = write_sweep(
        """
        name: db2-share
        engines: [db2]
        dataset: {rows: 5000, seed: 3}
        knobs:
          page_size: [4096, 8192]
        fixed: {buffer_pool: 300, extent_size: 4, prefetch_size: 16}
        workloads: [{type: scan}]
        cache: warm
        repetitions: 1
        """
    )
    points, errors = spec.expand(path, "db2")
    assert errors == [] and len(points) == 2
    run_id = f"share-{uuid.uuid4().hex[:6]}"
    try:
        starts = []
        for p in points:
            out = runner.run_point(
                p, tmp_path / f"{p.point_id}.csv", tmp_path / "w", tmp_path / "d", run_id
            )
            row = pd.read_csv(out).iloc[0]
            assert row["applied_page_size"] == p.knobs["page_size"]
            starts.append(int(row["engine_starts"]))
        assert starts == [1, 0]
    finally:
        recovery.clean(run_id)


# -- timed statements: plans, forcing, fetch, engine time ------------------------------------------
def explained(eng, w, plan, access):
    stmts = workloads.statements(eng.dialect, w, plan, access, ROWS, SEED)
    conn = eng.connect()
    try:
        return stmts, workloads.explain(eng.dialect, conn, w, stmts)
    finally:
        conn.close()


def workload(wtype, **params):
    return workloads.Workload(wtype, {**workloads.DEFAULTS[wtype], **params})


def test_guidelines_are_enabled_and_the_explain_tables_exist(engine):
    assert "YES" in engine._clp("db2set DB2_OPTPROFILE", "read DB2_OPTPROFILE").split()
    count = one(engine, db2_explain.explain_tables_sql()["check"])[0]
    assert int(count) == len(db2_explain.EXPLAIN_TABLES)


@pytest.mark.parametrize("kind", workloads.INDEX_KINDS)
def test_forced_multipoint_plans_are_what_each_index_kind_built(engine, rows, kind):
    w, plan = build(engine, rows, "multipoint", kind)
    expected = engine.dialect.expected_access(TABLE, plan)
    stmts, plans = explained(engine, w, plan, "forced")
    assert len(plans) == len(stmts.to_explain()) == w.params["queries"]
    for p in plans:
        assert p.base == expected, p.raw
        assert ("IXSCAN" in p.raw) is (kind != "none")


@pytest.mark.parametrize("kind", workloads.INDEX_KINDS)
def test_forced_range_plans_hold_at_half_the_table(engine, rows, kind):
    # At 50 % the optimizer would scan; the guideline keeps whatever the knob built.
    _, plan = build(engine, rows, "range", kind)
    w = workload("range", selectivity=0.5, queries=2)
    expected = engine.dialect.expected_access(TABLE, plan)
    _, plans = explained(engine, w, plan, "forced")
    assert [p.base for p in plans] == [expected] * 2, [p.raw for p in plans]
    # Both fetch paths return the rows the range holds (count sums them as BIGINT).
    for fetch in ("all", "count"):
        wf = workload("range", selectivity=0.5, queries=2, fetch=fetch)
        stmts = workloads.statements(engine.dialect, wf, plan, "forced", ROWS, SEED)
        run = workloads.runner(engine.dialect, wf, rows, stmts, False)
        conn = engine.connect()
        try:
            assert run([conn]) == 2 * round(0.5 * ROWS), fetch
        finally:
            conn.close()


@pytest.mark.parametrize(
    ("selectivity", "expected"),
    [(0.5, "scan"), (0.001, "index:IX_ACCOUNTS_NONCLUSTERED")],
)
def test_the_optimizer_sees_each_ranges_own_selectivity(engine, rows, selectivity, expected):
    # Literals, not markers: at half the table a scan is cheaper than the scattered index.
    _, plan = build(engine, rows, "range", "nonclustered")
    w = workload("range", selectivity=selectivity)
    stmts, (p,) = explained(engine, w, plan, "optimizer")
    assert "?" not in stmts.bound[0][0]
    assert p.base == expected, p.raw


def test_engine_time_is_positive_and_inside_the_clients_clock(engine, rows):
    w, plan = build(engine, rows, "scan")
    stmts = workloads.statements(engine.dialect, w, plan, "optimizer", ROWS, SEED)
    run = workloads.runner(engine.dialect, w, rows, stmts, False)
    conn = engine.connect()
    try:
        run([conn])  # warm, and compiled
        before = engine.counters([conn])
        t0 = time.perf_counter_ns()
        assert run([conn]) == ROWS
        t1 = time.perf_counter_ns()
        after = engine.counters([conn])
    finally:
        conn.close()
    delta = runner._delta(before, after)
    engine_s, elapsed_s = delta["engine_time_ns"] / 1e9, (t1 - t0) / 1e9
    assert engine_s > 0
    assert engine_s <= elapsed_s + 0.001  # TOTAL_RQST_TIME is in whole milliseconds
    assert delta["db2_conn_rqsts_completed_total"] > 0
    assert delta["db2_conn_total_section_time"] <= delta["db2_conn_total_rqst_time"]
