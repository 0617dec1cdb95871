"""The SQLite engine for real: knobs read back, index layouts, cold vs warm, the runner."""

from __future__ import annotations

import apsw
import pandas as pd
import pytest

from tunelab.engines import sqlite_builds
from tunelab.engines.base import EngineError
from tunelab.engines.sqlite import SQLiteEngine
from tunelab.host import cache
from tunelab.measure import runner
from tunelab.store import dataset
from tunelab.store.dataset import Dataset
from tunelab.sweep import spec, workloads

ROWS = 20_000


@pytest.fixture
def engine(tmp_path):
    eng = SQLiteEngine(tmp_path / "eng", "t")
    yield eng
    eng.teardown()


def build(eng, tmp_path, wtype="multipoint", index="none", page=4096, pool=100, **params):
    eng.provision({"page_size": page, "buffer_pool": pool, "index": index})
    w = workloads.Workload(wtype, {**workloads.DEFAULTS[wtype], **params})
    plan = w.index_plan(index)
    rows = dataset.rows_of(dataset.read(Dataset(ROWS, 5), tmp_path / "data"))
    eng.create_table(workloads.TABLE, plan)
    eng.dialect.load(workloads.TABLE, rows)
    eng.create_index(workloads.TABLE, plan)
    return w, rows


def query_plan(eng, w):
    conn = eng.connect()
    args = workloads.query_args(w, ROWS, 5)[0] if w.type != "scan" else ()
    sql = "EXPLAIN QUERY PLAN " + workloads.query_sql(w, "?")
    text = " | ".join(str(r[-1]) for r in conn.raw.execute(sql, args))
    conn.close()
    return text


def runner_of(eng, w, rows, index="none", access="optimizer"):
    stmts = workloads.statements(eng.dialect, w, w.index_plan(index), access, ROWS, 5)
    return workloads.runner(eng.dialect, w, rows, stmts, False)


def test_knobs_are_read_back_from_the_engine(engine, tmp_path):
    engine.provision({"page_size": 16384, "buffer_pool": 321, "index": "none"})
    assert engine.applied_knobs() == {"page_size": 16384, "buffer_pool": 321}


@pytest.mark.parametrize(
    ("wtype", "index", "expected"),
    [
        ("multipoint", "none", "SCAN accounts"),
        ("multipoint", "nonclustered", "USING INDEX accounts_nonclustered"),
        ("multipoint", "clustered", "USING PRIMARY KEY"),
        ("multipoint", "covering", "USING COVERING INDEX accounts_covering (hundreds2=?)"),
        ("multipoint", "covering_wrong_order", "SCAN accounts USING COVERING INDEX"),
        ("range", "nonclustered", "USING INDEX accounts_nonclustered (lat>? AND lat<?)"),
        ("point", "nonclustered", "USING INDEX accounts_nonclustered (id=?)"),
    ],
)
def test_each_index_kind_gives_the_access_path_it_promises(
    engine, tmp_path, wtype, index, expected
):
    w, _ = build(engine, tmp_path, wtype, index)
    assert expected in query_plan(engine, w)


def test_clustered_layout_keeps_equal_keys_on_few_pages(engine, tmp_path):
    # Cold multipoint: a clustered table reads far fewer pages than a scattered one.
    reads = {}
    for index in ("nonclustered", "clustered"):
        w, rows = build(engine, tmp_path, "multipoint", index, pool=10, queries=1)
        run = runner_of(engine, w, rows, index)
        engine.make_cold()
        conn = engine.connect()
        before = engine.counters([conn])
        run([conn])
        reads[index] = engine.counters([conn])["physical_reads"] - before["physical_reads"]
        conn.close()
    assert reads["clustered"] * 5 < reads["nonclustered"]


def test_a_clustered_tables_pages_lie_in_key_order_in_the_file(engine, tmp_path):
    # Loaded in id order, the key's b-tree splits its leaves all over the file (a cold
    # multipoint read then reads each page alone, with no read-ahead); rebuilt in key order,
    # each leaf is followed by the next page of the file.
    build(engine, tmp_path, "multipoint", "clustered")
    with apsw.Connection(str(engine.path)) as db:
        leaves = [
            r[0]
            for r in db.execute(
                "SELECT pageno FROM dbstat WHERE name = 'accounts' AND pagetype = 'leaf'"
                " ORDER BY path"
            )
        ]
    adjacent = sum(b == a + 1 for a, b in zip(leaves, leaves[1:])) / (len(leaves) - 1)
    assert len(leaves) > 100 and adjacent > 0.9
    plan = workloads.Workload("multipoint").index_plan("clustered")
    knobs = {"page_size": 4096, "buffer_pool": 100}
    lines = engine.planned_sql(knobs, Dataset(ROWS, 5), plan, workload="multipoint")
    assert "VACUUM  -- the table rebuilt in its key's order" in lines


def test_cold_scan_reads_from_the_device_and_warm_scan_does_not(engine, tmp_path):
    w, rows = build(engine, tmp_path, "scan", pool=100_000)
    run = runner_of(engine, w, rows)
    state = engine.make_cold()
    assert state.achieved == "cold" and state.resident_pages_after == 0
    # Every step the method names is one the report can say in words.
    assert set(state.method.split("+")) <= {*engine.info.cold_steps, *cache.EVICT_STEPS}
    conn = engine.connect()
    c0 = engine.counters([conn])
    assert run([conn]) in (ROWS, None)  # None: the runner has the engine count them, untimed
    c1 = engine.counters([conn])
    assert c1["physical_reads"] - c0["physical_reads"] > 0
    assert c1["os_read_bytes"] - c0["os_read_bytes"] > 0  # really from the device
    run([conn])  # the same connection: its page cache now holds the table
    c2 = engine.counters([conn])
    assert c2["physical_reads"] - c1["physical_reads"] == 0
    assert c2["logical_reads"] - c1["logical_reads"] > 0
    conn.close()


def sweep(write_sweep, body_extra: str = "", workload: str = "{type: scan}"):
    return write_sweep(
        f"""
        name: t
        dataset: {{rows: {ROWS}, seed: 5}}
        knobs: {{buffer_pool: [50]}}
        workloads: [{workload}]
        repetitions: 2
        {body_extra}
        """
    )


def test_run_point_writes_one_row_per_repetition_with_provenance(write_sweep, tmp_path):
    points, _ = spec.expand(sweep(write_sweep, "cache: both"))
    for p in points:
        out = runner.run_point(p, tmp_path / f"{p.cache}.csv", tmp_path / "w", tmp_path / "d")
        frame = pd.read_csv(out)
        assert frame["rep"].tolist() == [0, 1]
        assert (frame["rows_touched"] == ROWS).all()
        assert (frame["elapsed_s"] > 0).all()
        assert (frame["applied_buffer_pool"] == 50).all()
        assert frame["cache_achieved"].eq(p.cache).all()
        for col in (
            "engine_version",
            "host_cpu",
            "host_kernel",
            "host_fs",
            "git_commit",
            "started_at",
            "seed",
            "c_logical_reads",
            "hit_ratio_app",
        ):
            assert frame[col].notna().all(), col
        if p.cache == "cold":
            assert (frame["c_physical_reads"] > 0).all()
            assert frame["resident_fraction"].eq(0).all()


def test_every_insert_repetition_starts_from_the_same_table(write_sweep, tmp_path):
    points, _ = spec.expand(
        sweep(write_sweep, workload="{type: insert, rows: 5000, commit_every: 500}")
    )
    out = runner.run_point(points[0], tmp_path / "i.csv", tmp_path / "w", tmp_path / "d")
    frame = pd.read_csv(out)
    assert frame["rows_touched"].tolist() == [5000, 5000]
    assert frame["c_os_write_bytes"].gt(0).all()  # commits reach the file


def test_a_failing_point_keeps_the_rows_already_measured(write_sweep, tmp_path, monkeypatch):
    points, _ = spec.expand(sweep(write_sweep))
    calls = {"n": 0}
    real = SQLiteEngine.counters

    def failing_counters(self, conns):
        calls["n"] += 1
        if calls["n"] == 3:  # before-counters of the second repetition
            raise EngineError("engine went away")
        return real(self, conns)

    monkeypatch.setattr(SQLiteEngine, "counters", failing_counters)
    out = tmp_path / "p.csv"
    with pytest.raises(EngineError):
        runner.run_point(points[0], out, tmp_path / "w", tmp_path / "d")
    assert not out.exists()
    partial = pd.read_csv(out.with_suffix(".partial.csv"))
    assert partial["rep"].tolist() == [0]


def test_a_knob_the_engine_did_not_apply_fails_the_point(write_sweep, tmp_path, monkeypatch):
    points, _ = spec.expand(sweep(write_sweep))
    monkeypatch.setattr(SQLiteEngine, "applied_knobs", lambda self: {"buffer_pool": 2000})
    with pytest.raises(EngineError, match="buffer_pool: asked 50, engine reports 2000"):
        runner.run_point(points[0], tmp_path / "p.csv", tmp_path / "w", tmp_path / "d")


def test_a_points_trace_predicts_its_measured_physical_reads(write_sweep, tmp_path):
    from tunelab.bpsim.curves import lru_curve
    from tunelab.bpsim.traces import read_trace

    path = write_sweep(
        f"""
        name: t
        dataset: {{rows: {ROWS}, seed: 5}}
        knobs: {{buffer_pool: [100, 400]}}
        fixed: {{index: nonclustered}}
        workloads: [{{type: point, lookups: 2000, batch: 2000}}]
        repetitions: 1
        trace: true
        """
    )
    points, _ = spec.expand(path)
    trace = read_trace(
        runner.trace_point(points[0], tmp_path / "t.trace.npz", tmp_path / "w", tmp_path / "d")
    )
    assert len(trace.pages) > 2000 and trace.meta["point_id"] == points[0].point_id
    for p in points:
        out = runner.run_point(p, tmp_path / f"{p.point_id}.csv", tmp_path / "w", tmp_path / "d")
        measured = pd.read_csv(out)["c_physical_reads"].iloc[0]
        curve = lru_curve(trace.pages, sizes=[p.knobs["buffer_pool"]])
        predicted = curve["misses"].iloc[0]
        assert predicted == pytest.approx(measured, rel=0.05)


def test_points_of_a_run_reuse_a_copy_of_the_table_built_once(write_sweep, tmp_path):
    """Within a workflow run the first point builds the table and keeps a copy of the file;
    later points with the same data, layout and page size copy it instead of loading, and
    measure the same: same rows, same cold procedure, the same bytes on disk."""
    path = sweep(
        write_sweep,
        "cache: both\n        fixed: {index: nonclustered}",
        "{type: multipoint, queries: 2}",
    )
    points, _ = spec.expand(path)
    work, data = tmp_path / "w", tmp_path / "d"
    frames = {}
    for p in points:
        out = runner.run_point(p, tmp_path / f"{p.cache}.csv", work, data, "run1")
        frames[p.cache] = pd.read_csv(out)
    first, second = (frames[p.cache] for p in points)
    assert first["table_build"].eq("built").all() and second["table_build"].eq("reused").all()
    kept = list((work / sqlite_builds.KEPT_TABLES / "sqlite-tables").glob("*.db"))
    assert len(kept) == 1  # one table: one file
    assert first["rows_touched"].tolist() == second["rows_touched"].tolist()
    assert first["data_bytes"].iloc[0] == second["data_bytes"].iloc[0] == kept[0].stat().st_size
    assert frames["cold"]["cache_achieved"].eq("cold").all()
    assert frames["cold"]["resident_fraction"].eq(0).all()
    assert (frames["cold"]["c_physical_reads"] > 0).all()
    # Another page size is another table: built, not copied.
    other = spec.expand(
        sweep(
            write_sweep,
            "fixed: {index: nonclustered, page_size: 8192}",
            "{type: multipoint, queries: 2}",
        )
    )[0][0]
    out = runner.run_point(other, tmp_path / "p8k.csv", work, data, "run1")
    assert pd.read_csv(out)["table_build"].eq("built").all()
    assert len(list((work / sqlite_builds.KEPT_TABLES / "sqlite-tables").glob("*.db"))) == 2
    # A later run takes the tables the earlier ones kept.
    out = runner.run_point(points[0], tmp_path / "later.csv", work, data, "run2")
    assert pd.read_csv(out)["table_build"].eq("reused").all()
    assert pd.read_csv(out)["rows_touched"].tolist() == first["rows_touched"].tolist()
    # Outside a workflow run (no run id) nothing is kept.
    out = runner.run_point(points[0], tmp_path / "alone.csv", tmp_path / "w2", data)
    assert pd.read_csv(out)["table_build"].eq("built").all()
    assert not (tmp_path / "w2" / "runs").exists()
    assert not (tmp_path / "w2" / sqlite_builds.KEPT_TABLES).exists()


def test_a_table_kept_by_other_build_code_is_not_taken(engine, tmp_path, monkeypatch):
    """The key of a kept table names the SQLite library and the code that builds it: after
    a change to either, the table is built again, not taken from an earlier run."""
    plan, source = _in_a_run(engine, tmp_path)
    assert engine.builds.build(workloads.TABLE, plan, source, changes=False) == "built"
    assert engine.builds.build(workloads.TABLE, plan, source, changes=False) == "reused"
    monkeypatch.setattr(sqlite_builds, "build_fingerprint", lambda: "other-code")
    assert engine.builds.build(workloads.TABLE, plan, source, changes=False) == "built"


def _in_a_run(engine: SQLiteEngine, tmp_path) -> tuple:
    """The engine as a workflow run's point has it (tables kept), and a multipoint
    workload's non-clustered layout over a small data set."""
    engine.run_dir = tmp_path / "w" / "runs" / "r"
    engine.provision({"page_size": 4096, "buffer_pool": 100, "index": "nonclustered"})
    w = workloads.Workload("multipoint", dict(workloads.DEFAULTS["multipoint"]))
    return w.index_plan("nonclustered"), dataset.Source(Dataset(ROWS, 5), tmp_path / "data")


def test_a_table_copy_is_made_only_after_a_complete_build(engine, tmp_path, monkeypatch):
    """A build that fails leaves nothing a later point could take for the table."""
    plan, source = _in_a_run(engine, tmp_path)

    def broken(table, index):
        raise EngineError("index build failed")

    monkeypatch.setattr(engine, "create_index", broken)
    with pytest.raises(EngineError):
        engine.builds.build(workloads.TABLE, plan, source, changes=False)
    assert not list((tmp_path / "w" / sqlite_builds.KEPT_TABLES).glob("sqlite-tables/*.db"))
    monkeypatch.undo()
    assert engine.builds.build(workloads.TABLE, plan, source, changes=False) == "built"
    assert engine.builds.build(workloads.TABLE, plan, source, changes=False) == "reused"


def test_a_reading_point_reads_the_kept_table_itself_and_cannot_change_it(engine, tmp_path):
    """A workload that only reads links to the kept file (no copy) through query-only
    connections; a writing one still gets a copy; the kept file stays as built."""
    import hashlib

    plan, source = _in_a_run(engine, tmp_path)
    assert engine.builds.build(workloads.TABLE, plan, source, changes=False) == "built"
    (kept,) = (tmp_path / "w" / sqlite_builds.KEPT_TABLES).glob("sqlite-tables/*.db")
    built = hashlib.sha256(kept.read_bytes()).hexdigest()

    assert engine.builds.build(workloads.TABLE, plan, source, changes=False) == "reused"
    assert engine.path.is_symlink() and engine.path.resolve() == kept.resolve()
    assert engine.data_files() == [engine.path]  # what the cold procedure evicts: the table
    conn = engine.connect()
    try:
        cur = conn.cursor()
        assert cur.execute(f"SELECT count(*) FROM {workloads.TABLE}").fetchone() == (ROWS,)
        with pytest.raises(apsw.ReadOnlyError):
            cur.execute(f"DELETE FROM {workloads.TABLE}")
    finally:
        conn.close()
    with pytest.raises(EngineError, match="read only"):
        engine.create_index(workloads.TABLE, plan)

    assert engine.builds.build(workloads.TABLE, plan, source, changes=True) == "reused"
    assert not engine.path.is_symlink()  # a copy of its own
    conn = engine.connect()
    try:
        conn.cursor().execute(f"DELETE FROM {workloads.TABLE}")
        conn.commit()
    finally:
        conn.close()
    engine.teardown()
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == built


def test_a_warm_reads_repetitions_are_warmed_by_the_one_before(write_sweep, tmp_path):
    """The first warm repetition runs the workload once untimed; each later one keeps the
    connections of the one before, so SQLite's page cache (in the connection) is still warm:
    no page is missed, as after a warm-up of its own."""
    path = write_sweep(
        f"""
        name: t
        dataset: {{rows: {ROWS}, seed: 5}}
        knobs: {{buffer_pool: [100000]}}
        workloads: [{{type: scan}}]
        cache: warm
        repetitions: 3
        """
    )
    point = spec.expand(path)[0][0]
    frame = pd.read_csv(runner.run_point(point, tmp_path / "w.csv", tmp_path / "w", tmp_path / "d"))
    assert frame["cache_method"].tolist() == ["untimed warm-up run"] + 2 * [
        "the previous repetition (the same workload, just before)"
    ]
    assert frame["c_physical_reads"].eq(0).all() and frame["c_logical_reads"].gt(0).all()


def test_index_layouts_over_the_same_rows_load_them_once(engine, tmp_path, monkeypatch):
    """A second index layout over the same rows starts from the loaded copy of the first
    (no second load), and its file is the very file a build from scratch makes."""
    engine.run_dir = tmp_path / "w" / "runs" / "r"
    engine.provision({"page_size": 4096, "buffer_pool": 100})
    w = workloads.Workload("multipoint", dict(workloads.DEFAULTS["multipoint"]))
    source = dataset.Source(Dataset(ROWS, 5), tmp_path / "data")
    assert engine.builds.build(workloads.TABLE, w.index_plan("none"), source, False) == "built"
    loads = []
    real_load = engine.bulk_load
    monkeypatch.setattr(engine, "bulk_load", lambda *a: loads.append(a) or real_load(*a))
    covering = w.index_plan("covering")
    assert engine.builds.build(workloads.TABLE, covering, source, False) == "built"
    assert loads == []  # the rows came from the loaded copy
    from_copy = engine.path.read_bytes()
    # The clustered layout is another table (WITHOUT ROWID): loaded anew.
    assert engine.builds.build(workloads.TABLE, w.index_plan("clustered"), source, False) == "built"
    assert len(loads) == 1
    # From scratch (no run, nothing kept): the same bytes.
    scratch = SQLiteEngine(tmp_path / "scratch", "")
    scratch.provision({"page_size": 4096, "buffer_pool": 100})
    assert scratch.builds.build(workloads.TABLE, covering, source, False) == "built"
    assert scratch.path.read_bytes() == from_copy
    scratch.teardown()


def test_a_full_disk_is_known_by_the_engine_not_by_name():
    import apsw

    from tunelab import engines

    assert engines.disk_full(apsw.FullError("database or disk is full"))
    assert not engines.disk_full(apsw.SQLError("no such table"))
    assert not engines.disk_full(OSError("not an engine's"))
