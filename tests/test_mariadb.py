"""The MariaDB / InnoDB engine against real containers of the lab's image."""

from __future__ import annotations

import subprocess
import uuid

import pymysql
import pytest

from tunelab import containers, dataset
from tunelab.engines.base import EngineError, IndexPlan
from tunelab.engines.mariadb import MIN_POOL_MIB, MariaDBEngine

pytestmark = pytest.mark.docker

ROWS = 50_000


@pytest.fixture(scope="module")
def rows() -> list[tuple]:
    return dataset.rows_of(dataset.generate(dataset.Dataset(ROWS, 7)))


def _engine(tmp_path, image) -> MariaDBEngine:
    eng = MariaDBEngine(tmp_path / "points" / "pt" / "engine", f"test-{uuid.uuid4().hex[:8]}")
    eng.image = image
    return eng


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, image, rows):
    """One server shared by the read-only tests: 16 KiB pages, a 64 MiB pool that holds the
    whole table (a scan only warms what fits in the LRU's old sublist), table loaded."""
    eng = _engine(tmp_path_factory.mktemp("mdb"), image)
    try:
        eng.provision({"page_size": 16384, "buffer_pool": 4096})
        eng.create_table("accounts", IndexPlan("none", ()))
        eng.load("accounts", rows)
        eng.create_index("accounts", IndexPlan("none", ()))
        yield eng
    finally:
        eng.teardown()


def _scan(eng: MariaDBEngine) -> tuple[int, dict[str, float]]:
    conn = eng.connect()
    try:
        before = eng.counters([conn])
        cur = conn.cursor()
        cur.execute("SELECT * FROM accounts")
        n = 0
        while batch := cur.fetchmany(10_000):
            n += len(batch)
        conn.commit()
        after = eng.counters([conn])
    finally:
        conn.close()
    return n, {k: after[k] - before[k] for k in after}


def test_cold_scan_reads_from_disk_and_warm_does_not(loaded):
    state = loaded.make_cold()
    assert state.achieved == "cold", state
    assert state.resident_pages_after == 0 and state.total_pages > 0
    assert loaded.pool_pages() == 0
    n, cold = _scan(loaded)
    assert n == ROWS
    assert cold["physical_reads"] > 0 and cold["data_read_bytes"] > 0
    n, warm = _scan(loaded)
    assert n == ROWS
    assert warm["logical_reads"] > 0
    assert warm["physical_reads"] == 0
    # With default read-ahead most pages of a cold scan come from linear read-ahead.
    assert 0 < cold["prefetch_reads"] <= cold["physical_reads"]


def test_data_files_are_the_table_on_the_host(loaded):
    files = loaded.data_files()
    assert [f.name for f in files] == ["accounts.ibd"]
    assert files[0].is_relative_to(loaded.workdir / "mariadb-data")
    assert files[0].stat().st_size >= loaded.data_bytes("accounts") > ROWS * 60


def test_container_is_labelled_and_bound_to_loopback(loaded):
    attrs = containers.client().api.inspect_container(loaded.container.id)
    assert attrs["Config"]["Labels"][containers.LABEL] == "1"
    assert attrs["Config"]["Labels"][containers.RUN_LABEL] == loaded.run_id
    assert attrs["Config"]["Labels"][containers.POINT_LABEL] == "pt"
    bindings = attrs["HostConfig"]["PortBindings"]["3306/tcp"]
    assert bindings == [{"HostIp": "127.0.0.1", "HostPort": str(loaded.container.host_port)}]


def test_password_never_shown(loaded):
    pw = loaded._password
    attrs = containers.client().api.inspect_container(loaded.container.id)
    assert not any(pw in arg for arg in attrs["Config"]["Cmd"] or [])
    raw_logs = containers.client().containers.get(loaded.container.id).logs().decode()
    assert pw not in raw_logs
    shown = [
        repr(loaded.applied_knobs()),
        repr(loaded.counters([])),
        loaded.version(),
        "\n".join(loaded.planned_sql(loaded.knobs, dataset.Dataset(10, 1), IndexPlan("none"))),
        repr(loaded.container),
    ]
    assert not any(pw in text for text in shown)
    # ...and it is what TCP logins need.
    with pytest.raises(pymysql.err.OperationalError):
        pymysql.connect(host="127.0.0.1", port=loaded.container.host_port, user="root",
                        password=pw + "x")  # fmt: skip


def test_table_lock_blocks_other_writers_until_unlock(loaded):
    a, b = loaded.connect(), loaded.connect()
    try:
        ca, cb = a.cursor(), b.cursor()
        cb.execute("SET SESSION lock_wait_timeout = 1")
        loaded.lock_table(ca, "accounts")
        ca.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
        with pytest.raises(pymysql.err.OperationalError) as err:
            cb.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 2")
        assert err.value.args[0] == 1205  # lock wait timeout
        a.commit()
        loaded.unlock_tables(ca)
        cb.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 2")
        b.commit()
    finally:
        a.close()
        b.close()


def test_bad_buffer_pool_is_refused_before_any_start(tmp_path, image):
    assert MariaDBEngine.check_point({"page_size": 65536, "buffer_pool": 320})  # 20 MiB
    assert MariaDBEngine.check_point({"page_size": 4096, "buffer_pool": 1000})  # not whole MiB
    assert not MariaDBEngine.check_point({"page_size": 4096, "buffer_pool": 1024})
    assert not MariaDBEngine.check_point(
        {"page_size": 65536, "buffer_pool": MIN_POOL_MIB[65536] * 16}
    )
    eng = _engine(tmp_path, image)
    with pytest.raises(EngineError, match="below InnoDB's minimum"):
        eng.provision({"page_size": 16384, "buffer_pool": 352})  # 5.5 MiB < 6 MiB
    assert eng.container is None and eng.starts == 0


def test_knobs_read_back_in_place_and_restart(tmp_path, image, rows):
    eng = _engine(tmp_path, image)
    try:
        asked = {
            "page_size": 8192,
            "buffer_pool": 1024,  # 8 MiB
            "read_ahead_threshold": 20,
            "random_read_ahead": True,
            "direct_io": False,
        }
        eng.provision(asked)
        assert eng.starts == 1
        applied = eng.applied_knobs()
        assert {k: applied[k] for k in asked} == asked
        assert applied["innodb_buffer_pool_dump_load"] == "OFF/OFF"
        assert 0 < applied["innodb_buffer_pool_pages_total"] <= 1024

        eng.create_table("accounts", IndexPlan("none", ()))
        eng.load("accounts", rows[:2000])
        # In place: pool size and read-ahead change without a restart.
        asked |= {"buffer_pool": 2048, "read_ahead_threshold": 0, "random_read_ahead": False}
        eng.provision(asked)
        assert eng.starts == 1
        applied = eng.applied_knobs()
        assert {k: applied[k] for k in asked} == asked
        assert applied["innodb_buffer_pool_pages_total"] > 1024

        # A cold restart keeps what was set in place.
        eng.make_cold()
        assert eng.starts == 2
        assert {k: eng.applied_knobs()[k] for k in asked} == asked

        # direct_io needs a restart; the data stays.
        asked["direct_io"] = True
        eng.provision(asked)
        assert eng.starts == 3
        assert eng.applied_knobs()["direct_io"] is True
        assert eng.data_bytes("accounts") > 0

        # A new page size needs a new data directory.
        asked |= {"page_size": 4096, "buffer_pool": 4096}
        eng.provision(asked)
        assert eng.starts == 4
        applied = eng.applied_knobs()
        assert {k: applied[k] for k in asked} == asked
        assert eng.data_bytes("accounts") is None and eng.data_files() == []
        cid = eng.container.id
    finally:
        eng.teardown()
    assert not eng._home.exists()
    lab = containers.client().containers.list(all=True, filters={"id": cid})
    assert lab == []


PLANS = {
    # multipoint: WHERE hundreds2 = ?, selecting hundreds2, lat, balance
    "none": ({"PRIMARY": ["id"]}, None),
    "nonclustered": ({"PRIMARY": ["id"], "accounts_nonclustered": ["hundreds2"]}, "ref"),
    "clustered": ({"PRIMARY": ["hundreds2", "id"]}, "ref"),
    "covering": (
        {"PRIMARY": ["id"], "accounts_covering": ["hundreds2", "lat", "balance"]},
        "Using index",
    ),
    "covering_wrong_order": (
        {"PRIMARY": ["id"], "accounts_covering_wrong_order": ["lat", "balance", "hundreds2"]},
        None,
    ),
}


@pytest.mark.parametrize("kind", list(PLANS))
def test_index_layouts(loaded, rows, kind):
    expected, plan_hint = PLANS[kind]
    plan = IndexPlan(kind, ("hundreds2",), ("lat", "balance"))
    try:
        loaded.create_table("layout", plan)
        loaded.load("layout", rows[:3000])
        loaded.create_index("layout", plan)  # checks the catalogue itself, too
        have: dict[str, list[str]] = {}
        for name, col in loaded._query(
            "SELECT index_name, column_name FROM information_schema.STATISTICS "
            "WHERE table_schema='tunelab' AND table_name='layout' ORDER BY 1, seq_in_index"
        ):
            have.setdefault(name, []).append(col)
        assert have == {k.replace("accounts_", "layout_"): v for k, v in expected.items()}
        explain = loaded._query(
            "EXPLAIN SELECT hundreds2, lat, balance FROM tunelab.layout WHERE hundreds2 = 5"
        )
        text = " ".join(str(c) for c in explain[0])
        if plan_hint:
            assert plan_hint in text
        if kind == "none":
            assert "ALL" in text
    finally:
        loaded._query("DROP TABLE IF EXISTS tunelab.layout")
        loaded._tables.discard("layout")


def test_point_key_without_index_has_no_primary_key(loaded, rows):
    try:
        loaded.create_table("pk", IndexPlan("none", ("id",)))
        loaded.create_index("pk", IndexPlan("none", ("id",)))
        loaded.create_table("pk", IndexPlan("nonclustered", ("id",)))
        loaded.create_index("pk", IndexPlan("nonclustered", ("id",)))
        uniq = loaded._query(
            "SELECT DISTINCT non_unique FROM information_schema.STATISTICS "
            "WHERE table_schema='tunelab' AND table_name='pk' AND index_name='pk_nonclustered'"
        )
        assert uniq == [(0,)]
    finally:
        loaded._query("DROP TABLE IF EXISTS tunelab.pk")
        loaded._tables.discard("pk")


def test_teardown_removes_container_even_after_a_failure(tmp_path, image):
    eng = _engine(tmp_path, image)
    eng.provision({"page_size": 16384})
    cid = eng.container.id
    with pytest.raises(RuntimeError, match="mid-point"), eng:
        raise RuntimeError("failure mid-point")
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"id={cid}"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert out.strip() == ""


def test_points_of_a_run_share_a_server_until_a_restart_knob_changes(image, tmp_path):
    """Warm points with the same page size reuse the kept server (no start); a new page size
    needs a new data directory, so a new server replaces the kept one."""
    import pandas as pd

    from tunelab import runner, spec

    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "name: share\nengines: [mariadb]\ndataset: {rows: 5000, seed: 3}\n"
        "knobs: {page_size: [16384, 8192], buffer_pool: ['16MiB', '32MiB']}\n"
        "workloads: [{type: scan}]\ncache: warm\nrepetitions: 1\n"
    )
    points, errors = spec.expand(sweep, "mariadb")
    assert errors == [] and len(points) == 4
    run_id = f"share-{uuid.uuid4().hex[:6]}"
    starts, kept = [], []
    try:
        for p in points:
            out = runner.run_point(p, tmp_path / f"{p.point_id}.csv", tmp_path / "w",
                                   tmp_path / "d", run_id)  # fmt: skip
            row = pd.read_csv(out).iloc[0]
            assert row["applied_buffer_pool"] == p.knobs["buffer_pool"]
            starts.append(int(row["engine_starts"]))
            kept.append([c.id for c in containers.client().containers.list(
                filters={"label": f"{containers.RUN_LABEL}={run_id}"})])  # fmt: skip
        assert starts == [1, 0, 1, 0]
        assert all(len(k) == 1 for k in kept)
        assert kept[0] == kept[1] and kept[2] == kept[3] and kept[1] != kept[2]
    finally:
        containers.clean(run_id)
    assert (
        containers.client().containers.list(
            all=True, filters={"label": f"{containers.RUN_LABEL}={run_id}"}
        )
        == []
    )
