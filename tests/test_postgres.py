"""The PostgreSQL engine: its rules on their own, then real servers of the lab's image."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from tunelab.engines.base import EngineError, IndexPlan
from tunelab.engines.postgres import INFO, PostgresEngine
from tunelab.engines.postgres_sql import (
    INDEX_KINDS,
    expected_layout,
    index_ddl,
    normalise_plan,
    planner_switches,
    settings_text,
    table_ddl,
)
from tunelab.host import containers
from tunelab.measure import runner
from tunelab.run import recovery
from tunelab.store import dataset
from tunelab.sweep import spec, workloads

docker = pytest.mark.docker  # the tests below that start servers (the rest need nothing)

ROWS = 50_000
SEED = 7


# -- the engine's rules, no server -----------------------------------------------------------


def test_settings_file_includes_the_datadir_then_sets_the_lab_lines():
    text = settings_text({"page_size": 8192, "buffer_pool": 128, "io_concurrency": 8})
    lines = text.splitlines()
    assert lines[1] == "include_if_exists '/var/lib/postgresql/data/postgresql.conf'"
    for line in (
        "listen_addresses = '*'",
        "shared_buffers = '1024kB'",
        "effective_io_concurrency = 8",
        "autovacuum = off",
        "jit = off",
        "shared_preload_libraries = 'pg_stat_statements'",
        "pg_stat_statements.track = all",
        "pg_stat_statements.track_planning = on",
        "track_io_timing = on",
        "track_wal_io_timing = on",
        "checkpoint_timeout = '1d'",
        "max_wal_size = '4GB'",
    ):
        assert line in lines[2:], line
    # Not asked: the server's own shared_buffers (initdb's) stays.
    assert "shared_buffers" not in settings_text({"io_concurrency": 1})


def test_knobs_postgres_cannot_express_are_refused_with_the_reason(write_sweep):
    with pytest.raises(EngineError, match=r"page_size=16384 not allowed: .*BLCKSZ.* is 8192"):
        PostgresEngine.knob_rules.full_knobs({"page_size": 16384})
    with pytest.raises(EngineError, match="cannot express knob.s. direct_io"):
        PostgresEngine.knob_rules.full_knobs({"direct_io": True})
    with pytest.raises(EngineError, match="buffer_pool=8 out of range"):
        PostgresEngine.knob_rules.full_knobs({"buffer_pool": 8})  # below 16 pages (128 kB)
    with pytest.raises(EngineError, match="io_concurrency=1001 out of range"):
        PostgresEngine.knob_rules.full_knobs({"io_concurrency": 1001})
    full = PostgresEngine.knob_rules.full_knobs({"buffer_pool": 1024})
    assert full == {
        "page_size": 8192,
        "buffer_pool": 1024,
        "io_concurrency": 1,
        "maintenance_io_concurrency": 10,
        "lock_granularity": "row",
        "index": "none",
        "sync_mode": "none",
        "network_rtt_ms": 0,
    }
    # A sweep gets the note, and the page size's reason, before anything starts.
    path = write_sweep(
        "name: refused\nengines: [postgres]\ndataset: {rows: 1000}\n"
        "knobs: {direct_io: [true], page_size: [16384], prefetch_size: [32]}\n"
        "workloads: [{type: scan}]\n"
    )
    points, errors = spec.expand(path, "postgres")
    text = "\n".join(map(str, errors))
    assert points == []
    assert "cannot express knob 'direct_io': PostgreSQL 15 always reads through" in text
    assert "debug_io_direct exists from PostgreSQL 16 only" in text
    assert "cannot express knob 'prefetch_size': PostgreSQL has no such knob" in text
    assert "BLCKSZ" in text
    assert all(k.readback for k in INFO.knobs.values())
    assert INFO.image is not None and INFO.image.local == "tunelab/postgres:local"


MULTIPOINT = IndexPlan("?", ("hundreds2",), ("lat", "balance"))
POINT = IndexPlan("?", ("id",), tuple(c for c in dataset.COLUMNS if c != "id"))


def _plan(base: IndexPlan, kind: str) -> IndexPlan:
    return IndexPlan(kind, base.key, base.include)


def test_index_ddl_per_kind():
    ddl = {k: index_ddl("t", _plan(MULTIPOINT, k)) for k in INDEX_KINDS}
    assert ddl == {
        "none": [],
        "nonclustered": ["CREATE INDEX t_nonclustered ON t (hundreds2)"],
        "clustered": [
            "CREATE INDEX t_clustered ON t (hundreds2)",
            "CLUSTER t USING t_clustered",
        ],
        "covering": ["CREATE INDEX t_covering ON t (hundreds2) INCLUDE (lat, balance)"],
        "covering_wrong_order": [
            "CREATE INDEX t_covering_wrong_order ON t (lat, balance, hundreds2)"
        ],
    }
    assert table_ddl("t", _plan(MULTIPOINT, "covering")).endswith(
        "filler CHAR(40) NOT NULL, CONSTRAINT t_pkey PRIMARY KEY (id))"
    )
    # On id the plan's own index is the only one: none is a bare heap.
    assert "PRIMARY KEY" not in table_ddl("t", _plan(POINT, "none"))
    assert index_ddl("t", _plan(POINT, "covering")) == [
        "CREATE UNIQUE INDEX t_covering ON t (id) INCLUDE "
        "(name, hundreds1, hundreds2, lat, balance, filler)"
    ]
    assert index_ddl("t", _plan(POINT, "clustered")) == [
        "CREATE UNIQUE INDEX t_clustered ON t (id)",
        "CLUSTER t USING t_clustered",
    ]
    # An update's key covers nothing: a plain unique index, read with the heap.
    update = workloads.Workload("update", workloads.DEFAULTS["update"]).index_plan("covering")
    assert index_ddl("t", update) == ["CREATE UNIQUE INDEX t_covering ON t (id)"]
    eng = PostgresEngine(Path("/nonexistent"), "t")
    assert eng.dialect.expected_access("t", update) == "index:t_covering"
    assert planner_switches(update) == {"enable_seqscan": "off"}


@pytest.mark.parametrize("base", [MULTIPOINT, POINT], ids=["multipoint", "point"])
def test_every_kind_has_a_layout_of_its_own(base):
    layouts = [expected_layout("t", _plan(base, k)) for k in INDEX_KINDS]
    assert all(layouts.count(x) == 1 for x in layouts)
    # No key (a scan): whatever the knob says, the table has its primary key only.
    bare = expected_layout("t", IndexPlan("none"))
    assert list(bare) == ["t_pkey"]
    assert all(expected_layout("t", IndexPlan(k, ())) == bare for k in INDEX_KINDS)


def test_planner_switches_leave_only_the_built_path():
    assert planner_switches(_plan(MULTIPOINT, "none")) == {
        "enable_indexscan": "off",
        "enable_indexonlyscan": "off",
        "enable_bitmapscan": "off",
    }
    for kind in ("nonclustered", "clustered"):
        assert planner_switches(_plan(MULTIPOINT, kind)) == {"enable_seqscan": "off"}
    for kind in ("covering", "covering_wrong_order"):
        assert planner_switches(_plan(MULTIPOINT, kind)) == {
            "enable_seqscan": "off",
            "enable_bitmapscan": "off",
        }
    dialect = PostgresEngine(Path("/nonexistent"), "t").dialect
    assert dialect.forced == {}
    assert dialect.table_ref("accounts", _plan(MULTIPOINT, "covering"), "forced") == "accounts"
    assert dialect.forced["enable_bitmapscan"] == "off"
    assert dialect.table_ref("accounts", _plan(MULTIPOINT, "covering"), "optimizer") == "accounts"
    assert dialect.forced == {}


def test_plan_normalisation():
    def doc(plan):
        return [{"Plan": plan}]

    seq = {"Node Type": "Seq Scan", "Relation Name": "t"}
    assert normalise_plan(doc(seq)) == "scan"
    agg = {"Node Type": "Aggregate", "Plans": [seq]}
    assert normalise_plan(doc(agg)) == "scan"
    idx = {
        "Node Type": "Index Scan",
        "Index Name": "t_pkey",
        "Scan Direction": "Forward",
        "Index Cond": "(id = 5)",
    }
    assert normalise_plan(doc(idx)) == "index:t_pkey;forward"
    only = {"Node Type": "Index Only Scan", "Index Name": "t_cov", "Scan Direction": "Backward"}
    assert normalise_plan(doc(only)) == "index-only:t_cov;backward,full"
    bitmap = {
        "Node Type": "Bitmap Heap Scan",
        "Plans": [
            {
                "Node Type": "BitmapOr",
                "Plans": [
                    {"Node Type": "Bitmap Index Scan", "Index Name": "a"},
                    {"Node Type": "Bitmap Index Scan", "Index Name": "b"},
                ],
            }
        ],
    }
    assert normalise_plan(doc(bitmap)) == "index:a+b;bitmap"
    update = {"Node Type": "ModifyTable", "Plans": [idx]}
    assert normalise_plan(doc(update)) == "index:t_pkey;forward"
    join = {"Node Type": "Nested Loop", "Plans": [seq, only]}
    assert normalise_plan(doc(join)) == "scan + index-only:t_cov;backward,full"
    nothing = {"Node Type": "Result", "One-Time Filter": "false"}
    assert normalise_plan(doc(nothing)) == "none;Result"


def test_write_steps_render_psycopg_literals():
    eng = PostgresEngine(Path("/nonexistent"), "t")
    rows = [(1, "it's", 3, 4, 5, -6, "back\\slash"), (2, "b", 3, 4, 5, 6, "f")]
    [(insert, none)] = eng.dialect.write_steps(eng.dialect.insert_sql("t"), rows)
    assert none is None
    assert insert == (
        "INSERT INTO t (id, name, hundreds1, hundreds2, lat, balance, filler) VALUES "
        "(1, 'it''s', 3, 4, 5,  -6,  E'back\\\\slash'), (2, 'b', 3, 4, 5, 6, 'f')"
    )
    update = "UPDATE t SET balance = balance + 1 WHERE id = %s"
    assert eng.dialect.write_steps(update, [(3,), (4,)]) == [
        (
            "UPDATE t SET balance = balance + 1 WHERE id = 3; "
            "UPDATE t SET balance = balance + 1 WHERE id = 4",
            None,
        )
    ]
    with pytest.raises(EngineError, match="2 values for the markers"):
        eng.dialect.write_steps(update, [(3, 4)])


def test_psycopg_builds_rows_in_c():
    psycopg = pytest.importorskip("psycopg")
    from psycopg.adapt import Transformer

    # psycopg[binary]: libpq and the row loaders compiled (not the pure-Python fallback).
    assert psycopg.pq.__impl__ == "binary"
    assert Transformer.__module__ == "psycopg_binary._psycopg"


# -- real servers -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def image() -> str:
    """The image the engine runs (the official postgres:15 when present, else the lab's
    build); skips with the reason when there is no Docker engine or no image."""
    reason = containers.docker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from tunelab.engines.images import ensure_image

    try:
        return ensure_image("postgres", PostgresEngine.info.image)
    except containers.ContainerError as exc:
        pytest.skip(f"no PostgreSQL image: {exc}")


@pytest.fixture(scope="module")
def rows() -> list[tuple]:
    return dataset.rows_of(dataset.generate(dataset.Dataset(ROWS, SEED)))


def _engine(base, image) -> PostgresEngine:
    eng = PostgresEngine(base / "points" / "pt" / "engine", f"test-{uuid.uuid4().hex[:8]}")
    eng.image = image
    return eng


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, image, rows):
    """One server shared by the tests that only read (or put back what they change):
    128 MiB of shared buffers (the table, about 6 MB, is under a quarter: a scan fills the
    pool instead of cycling through a ring), the table loaded, no index."""
    eng = _engine(tmp_path_factory.mktemp("pg"), image)
    try:
        eng.provision({"buffer_pool": 16384})
        eng.create_table("accounts", IndexPlan("none", ()))
        eng.dialect.load("accounts", rows)
        eng.create_index("accounts", IndexPlan("none", ()))
        yield eng
    finally:
        eng.teardown()


def _scan(eng: PostgresEngine) -> tuple[int, float, dict[str, float]]:
    conn = eng.connect()
    try:
        before = eng.counters([conn])
        cur = conn.cursor()
        t0 = time.perf_counter()
        cur.execute("SELECT * FROM accounts")
        n = eng.dialect.fetch(cur)
        conn.commit()
        elapsed = time.perf_counter() - t0
        after = eng.counters([conn])
    finally:
        conn.close()
    return n, elapsed, {k: after[k] - before[k] for k in after}


@docker
def test_cold_scan_reads_from_disk_and_warm_does_not(loaded):
    state = loaded.make_cold()
    assert state.achieved == "cold", state
    assert state.method.startswith("restart+fadvise")
    assert state.resident_pages_after == 0 and state.total_pages > 0
    assert loaded.pool_pages() == 0
    heap_pages = loaded.admin_query("SELECT relpages FROM pg_class WHERE relname = 'accounts'")
    n, _, cold = _scan(loaded)
    assert n == ROWS
    assert cold["pg_heap_blks_read"] == heap_pages[0][0] > 0
    assert cold["physical_reads"] >= cold["pg_heap_blks_read"]
    assert cold["pg_blk_read_time_ms"] > 0  # track_io_timing
    assert cold["prefetch_reads"] == 0
    assert loaded.pool_pages() >= heap_pages[0][0]
    n, _, warm = _scan(loaded)
    assert n == ROWS
    assert warm["physical_reads"] == 0
    assert warm["logical_reads"] == warm["pg_heap_blks_hit"] + warm["pg_idx_blks_hit"] > 0
    assert warm["logical_reads"] >= heap_pages[0][0]


@docker
def test_cold_restart_is_a_new_server_in_the_same_container(loaded, server_run):
    """The lab's image restarts postgres in place (SIGUSR1 to its entrypoint, a fast
    shutdown): a new postmaster, empty shared buffers, the container's run untouched."""
    if not loaded.container.labels.get(containers.RESTART_SIGNAL_LABEL):
        pytest.skip("this image restarts through docker stop and start (not the lab's build)")
    started, _ = server_run(loaded.container, "postgres")
    born = loaded.admin_query("SELECT pg_postmaster_start_time()")[0][0]
    _scan(loaded)
    assert loaded.pool_pages() > 0
    state = loaded.make_cold()
    assert state.achieved == "cold"
    assert server_run(loaded.container, "postgres")[0] == started
    assert loaded.admin_query("SELECT pg_postmaster_start_time()")[0][0] > born
    assert loaded.pool_pages() == 0


@docker
def test_counters_hold_exactly_the_timed_reads(loaded):
    """PostgreSQL 15 flushes a backend's statistics lazily (at most once a second, when
    idle): without the forced flushes the second scan below would show no read at all, and
    the admin's VACUUM reads could land in the first one's delta."""
    pages = loaded.admin_query("SELECT relpages FROM pg_class WHERE relname = 'accounts'")[0][0]
    loaded.admin_execute("VACUUM (ANALYZE) accounts")  # the admin reads every page
    conn = loaded.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT count(*) FROM accounts")  # the planner's first reads of the table
        conn.commit()
        for _ in range(3):  # well within a second of each other
            before = loaded.counters([conn])
            cur.execute("SELECT count(*) FROM accounts")
            assert cur.fetchone() == (ROWS,)
            conn.commit()
            after = loaded.counters([conn])
            assert after["logical_reads"] - before["logical_reads"] == pages
    finally:
        conn.close()


@docker
def test_data_files_are_the_relations_on_the_host(loaded):
    files = loaded.data_files()
    main, pkey = (
        loaded.admin_query("SELECT pg_relation_filepath(%s::regclass)", (r,))[0][0]
        for r in ("accounts", "accounts_pkey")
    )
    names = {f.name for f in files}
    heap = main.rsplit("/", 1)[1]
    # The heap with its free space and visibility maps (VACUUM wrote them), the primary key.
    assert {heap, f"{heap}_fsm", f"{heap}_vm", pkey.rsplit("/", 1)[1]} <= names
    assert all(f.is_relative_to(loaded.home / "datadir") for f in files)
    assert sum(f.stat().st_size for f in files) >= loaded.data_bytes("accounts") > ROWS * 100


@docker
def test_engine_time_is_the_lab_roles_statements(loaded):
    conn = loaded.connect()
    try:
        first = loaded.counters([conn])["engine_time_ns"]
        # Reading the counters (the admin's queries, the forced flush) is not counted.
        assert loaded.counters([conn])["engine_time_ns"] == first
        cur = conn.cursor()
        cur.execute("SELECT pg_sleep(0.05)")
        conn.commit()
        spent = loaded.counters([conn])["engine_time_ns"] - first
        assert 50e6 <= spent < 1e9
        before = loaded.counters([conn])
        t0 = time.perf_counter()
        cur.execute("SELECT * FROM accounts")
        assert loaded.dialect.fetch(cur) == ROWS
        conn.commit()
        elapsed_ns = (time.perf_counter() - t0) * 1e9
        engine_ns = loaded.counters([conn])["engine_time_ns"] - before["engine_time_ns"]
        assert 0 < engine_ns < elapsed_ns
    finally:
        conn.close()


@docker
def test_password_never_shown(loaded):
    import psycopg

    pw = loaded.password
    attrs = containers.client().api.inspect_container(loaded.container.id)
    assert not any(pw in arg for arg in attrs["Config"]["Cmd"] or [])
    assert attrs["Config"]["Cmd"] == ["postgres", "-c", "config_file=/etc/tunelab/postgresql.conf"]
    raw_logs = containers.client().containers.get(loaded.container.id).logs().decode()
    assert pw not in raw_logs
    shown = [
        repr(loaded.applied_knobs()),
        repr(loaded.counters([])),
        loaded.version(),
        "\n".join(loaded.planned_sql(loaded.knobs, dataset.Dataset(10, 1), IndexPlan("none"))),
        repr(loaded.container),
        (loaded.home / "conf" / "postgresql.conf").read_text(),
    ]
    assert not any(pw in text for text in shown)
    # The role got a SCRAM verifier; no statement text the server keeps holds it either.
    ((verifier, superuser),) = loaded.admin_query(
        "SELECT rolpassword, rolsuper FROM pg_authid WHERE rolname = 'tunelab'"
    )
    assert verifier.startswith("SCRAM-SHA-256$") and superuser is False
    kept = loaded.admin_query(
        "SELECT count(*) FROM pg_stat_statements WHERE query LIKE %s OR query LIKE %s",
        (f"%{pw}%", "%SCRAM-SHA-256$%"),
    )
    assert kept == [(0,)]
    # ...and it is what TCP logins need.
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(
            host="127.0.0.1",
            port=loaded.container.host_port,
            user="tunelab",
            password=pw + "x",
            dbname="postgres",
        )


@docker
def test_table_lock_makes_other_writers_wait_and_rows_do_not(loaded):
    import psycopg

    assert loaded.layout.lock_granularity("accounts", True) == "table"
    assert loaded.layout.lock_granularity("accounts", False) == "row"
    a, b = loaded.connect(), loaded.connect()
    try:
        ca, cb = a.cursor(), b.cursor()
        cb.execute("SET lock_timeout = '200ms'")
        b.commit()
        # Row locks: another row can be written, the same row waits.
        ca.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
        cb.execute("UPDATE accounts SET balance = balance - 1 WHERE id = 2")
        b.rollback()
        with pytest.raises(psycopg.errors.LockNotAvailable):
            cb.execute("UPDATE accounts SET balance = balance - 1 WHERE id = 1")
        b.rollback()
        a.rollback()
        # The table lock: every other writer waits; readers do not.
        loaded.dialect.lock_table(ca, "accounts")
        ca.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
        t0 = time.monotonic()
        with pytest.raises(psycopg.errors.LockNotAvailable):
            cb.execute("UPDATE accounts SET balance = balance - 1 WHERE id = 2")
        assert time.monotonic() - t0 >= 0.19
        b.rollback()
        cb.execute("SELECT count(*) FROM accounts")
        assert cb.fetchone() == (ROWS,)
        b.commit()
        a.rollback()  # the table as it was
        cb.execute("UPDATE accounts SET balance = balance WHERE id = 2")
        b.rollback()
    finally:
        a.close()
        b.close()


WORKLOADS = {
    t: workloads.Workload(t, workloads.DEFAULTS[t]) for t in ("multipoint", "range", "point")
}


@docker
@pytest.mark.parametrize("wtype", list(WORKLOADS))
@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_each_index_kind_reads_back_and_forces_its_path(loaded, rows, kind, wtype):
    """Built, read back from the catalog as the kind asked, and under access: forced every
    statement's EXPLAIN shows the path the kind built (covering: index-only; none: scan)."""
    w = WORKLOADS[wtype]
    plan = w.index_plan(kind)
    try:
        loaded.create_table("layout", plan)
        loaded.dialect.load("layout", rows)
        loaded.create_index("layout", plan)  # checks the catalog itself, too
        assert loaded.layout.applied("layout", plan, False) == {
            "index": kind,
            "lock_granularity": "row",
        }
        if kind == "covering" and wtype == "multipoint":
            assert loaded.layout.catalog("layout")["layout_covering"] == {
                "key": ("hundreds2",),
                "include": ("lat", "balance"),
                "unique": False,
                "primary": False,
                "clustered": False,
            }
        if kind == "clustered":
            assert loaded.layout.catalog("layout")["layout_clustered"]["clustered"] is True
        sql = workloads.query_sql(w, "%s", loaded.dialect.table_ref("layout", plan, "forced"))
        expected = loaded.dialect.expected_access("layout", plan)
        assert (
            expected
            == {
                "none": "scan",
                "nonclustered": "index:layout_nonclustered",
                "clustered": "index:layout_clustered",
                "covering": "index-only:layout_covering",
                "covering_wrong_order": "index-only:layout_covering_wrong_order",
            }[kind]
        )
        conn = loaded.connect()
        try:
            for args in workloads.query_args(w, ROWS, SEED)[:2]:
                got = loaded.dialect.explain(conn, sql, args)
                assert got.base == expected, (got.path, args)
                assert json.loads(got.raw)[0]["Plan"]  # the JSON as EXPLAIN printed it
            conn.commit()
        finally:
            conn.close()
        if kind == "covering" and wtype == "multipoint":
            # The optimizer alone picks the index-only scan too: VACUUM set the visibility map.
            loaded.dialect.table_ref("layout", plan, "optimizer")
            conn = loaded.connect()
            try:
                got = loaded.dialect.explain(conn, sql, workloads.query_args(w, ROWS, SEED)[0])
                assert got.base == expected, got.path
            finally:
                conn.close()
    finally:
        loaded.dialect.table_ref("layout", plan, "optimizer")
        loaded.admin_execute("DROP TABLE IF EXISTS layout")
        loaded.tables.discard("layout")


@docker
def test_knobs_read_back_in_place_and_restart(tmp_path, image, rows):
    eng = _engine(tmp_path, image)
    try:
        asked = {"buffer_pool": 1024, "io_concurrency": 4}  # 8 MiB
        eng.provision(asked)
        assert eng.starts == 1
        applied = eng.applied_knobs()
        assert {k: applied[k] for k in asked} == asked
        assert applied["page_size"] == 8192
        assert (applied["pg_shared_buffers"], applied["pg_autovacuum"], applied["pg_jit"]) == (
            "8MB",
            "off",
            "off",
        )
        eng.create_table("accounts", IndexPlan("none", ()))
        eng.dialect.load("accounts", rows[:2000])

        # In place: a reload, no restart; new connections see it.
        asked["io_concurrency"] = 32
        eng.provision(asked)
        assert eng.starts == 1
        assert eng.applied_knobs()["io_concurrency"] == 32
        conn = eng.connect()
        assert conn.execute("SHOW effective_io_concurrency").fetchone() == ("32",)
        conn.close()

        # shared_buffers is set at start: a restart; the data stays.
        asked["buffer_pool"] = 2048
        eng.provision(asked)
        assert eng.starts == 2
        assert {k: eng.applied_knobs()[k] for k in asked} == asked
        assert eng.data_bytes("accounts") > 0

        # A cold restart keeps what was set in place.
        assert eng.make_cold().achieved == "cold"
        assert eng.starts == 3
        assert {k: eng.applied_knobs()[k] for k in asked} == asked
        # Not asked: the server's default, unchecked.
        eng.provision({"io_concurrency": 32})
        assert "buffer_pool" not in eng.applied_knobs()
        cid, home, run_id = eng.container.id, eng.home, eng.run_id
    finally:
        eng.teardown()
    assert not home.exists()
    assert containers.client().containers.list(all=True, filters={"id": cid}) == []
    left = containers.client().containers.list(
        all=True, filters={"label": f"{containers.RUN_LABEL}={run_id}"}
    )
    assert left == []


def _public_tables(container_id: str) -> list[str]:
    """The kept server's tables, asked inside the container (local connections: trust)."""
    c = containers.client().containers.get(container_id)
    code, out = c.exec_run(
        [
            "psql",
            "-U",
            "postgres",
            "-tAc",
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
        ],
        user="postgres",
    )
    assert code == 0, out
    return out.decode().split()


@docker
def test_points_of_a_run_share_a_server_restarted_for_buffer_pool(image, tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "name: share\nengines: [postgres]\ndataset: {rows: 5000, seed: 3}\n"
        "knobs: {buffer_pool: ['16MiB', '32MiB'], io_concurrency: [1, 16]}\n"
        "workloads: [{type: scan}]\ncache: warm\nrepetitions: 1\n"
    )
    points, errors = spec.expand(sweep, "postgres")
    assert errors == [] and len(points) == 4
    run_id = f"share-{uuid.uuid4().hex[:6]}"
    starts, kept, builds = [], [], []
    try:
        for p in points:
            out = runner.run_point(
                p, tmp_path / f"{p.point_id}.csv", tmp_path / "w", tmp_path / "d", run_id
            )
            row = pd.read_csv(out).iloc[0]
            assert row["applied_buffer_pool"] == p.knobs["buffer_pool"]
            assert row["applied_io_concurrency"] == p.knobs["io_concurrency"]
            starts.append(int(row["engine_starts"]))
            builds.append(row["table_build"])
            ids = [
                c.id
                for c in containers.client().containers.list(
                    filters={"label": f"{containers.RUN_LABEL}={run_id}"}
                )
            ]
            kept.append(ids)
            assert _public_tables(ids[0]) == ["accounts"]  # kept for the next point
        # A new server, an io_concurrency change in place, a restart for 32 MiB, in place again.
        assert starts == [1, 0, 1, 0]
        # One table (same data and layout) built once; a restart keeps it.
        assert builds == ["built", "reused", "reused", "reused"]
        assert all(len(k) == 1 for k in kept) and len({k[0] for k in kept}) == 1
    finally:
        recovery.clean(run_id)
    left = containers.client().containers.list(
        all=True, filters={"label": f"{containers.RUN_LABEL}={run_id}"}
    )
    assert left == []


@docker
def test_measured_points_end_to_end(image, tmp_path):
    """A cold forced read and warm writes under table locks, through the runner: the rows
    carry the layout and locking read back, the cold achieved, the path that ran."""
    run_id = f"e2e-{uuid.uuid4().hex[:6]}"
    reads = tmp_path / "reads.yaml"
    reads.write_text(
        f"name: reads\nengines: [postgres]\ndataset: {{rows: {ROWS}, seed: {SEED}}}\n"
        "fixed: {buffer_pool: '64MiB', lock_granularity: table}\n"
        "knobs: {index: [covering]}\naccess: forced\n"
        "workloads: [{type: multipoint, queries: 2}]\ncache: cold\nrepetitions: 2\n"
    )
    writes = tmp_path / "writes.yaml"
    writes.write_text(
        "name: writes\nengines: [postgres]\ndataset: {rows: 5000, seed: 3}\n"
        "fixed: {lock_granularity: table}\nknobs: {index: [nonclustered]}\naccess: forced\n"
        "workloads:\n  - {type: update, rows: 2000, commit_every: 500}\n"
        "  - {type: insert, rows: 2000, commit_every: 500}\ncache: warm\nrepetitions: 1\n"
    )
    frames = {}
    try:
        for sweep in (reads, writes):
            points, errors = spec.expand(sweep, "postgres")
            assert errors == []
            for p in points:
                out = runner.run_point(
                    p, tmp_path / f"{p.point_id}.csv", tmp_path / "w", tmp_path / "d", run_id
                )
                frames[p.workload.type] = pd.read_csv(out)
    finally:
        recovery.clean(run_id)
    df = frames["multipoint"]
    assert len(df) == 2
    assert (df["applied_index"] == "covering").all()
    assert (df["applied_lock_granularity"] == "table").all()
    assert (df["cache_achieved"] == "cold").all() and (df["resident_fraction"] == 0).all()
    assert df["access_matches"].all()
    assert (df["access_path"] == "index-only:accounts_covering;forward").all()
    assert (df["c_physical_reads"] > 0).all() and (df["c_logical_reads"] > 0).all()
    assert (df["engine_elapsed_s"] > 0).all() and (df["engine_elapsed_s"] < df["elapsed_s"]).all()
    assert (df["rows_touched"] > 0).all()
    assert (df["engine_version"].str.startswith("PostgreSQL 15.")).all()
    for wtype in ("update", "insert"):
        df = frames[wtype]
        assert (df["rows_touched"] == 2000).all(), wtype
        assert (df["applied_lock_granularity"] == "table").all(), wtype
        assert (df["applied_index"] == "nonclustered").all(), wtype
        assert (df["engine_elapsed_s"] > 0).all(), wtype
        assert (df["c_pg_xact_commit"] >= 4).all(), wtype
    assert (frames["update"]["access_path"] == "index:accounts_nonclustered;forward").all()
