"""Point look-ups in batches (``batch:``): the same seeded keys in the same order, a statement
per batch that the engine resolves key by key (one index descent each), on every engine that
runs here; the plan proves the look-ups, the counters that the work is the same."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pandas as pd
import pytest

from tunelab.engines import mariadb, mariadb_sql, postgres, postgres_sql, sqlite_sql
from tunelab.engines.db2_explain import PlanOperator, normalise_plan
from tunelab.engines.sqlite import SQLiteEngine
from tunelab.host import containers
from tunelab.measure import runner
from tunelab.run import recovery
from tunelab.sweep import spec, workloads

ROWS, SEED = 20_000, 5
POINT = workloads.Workload("point", {"lookups": 250, "fetch": "all", "batch": 100})


def test_batches_carry_the_seeded_keys_in_order_and_the_rest_in_a_last_one(tmp_path):
    eng = SQLiteEngine(tmp_path, "t")
    plan = POINT.index_plan("nonclustered")
    stmts = workloads.statements(eng.dialect, POINT, plan, "forced", ROWS, SEED)
    one_by_one = workloads.Workload("point", {**POINT.params, "batch": 1})
    keys = [a for (a,) in workloads.query_args(one_by_one, ROWS, SEED)]
    assert [len(json.loads(a[0])) for _, a in stmts.bound] == [100, 100, 50]
    assert [k for _, (a,) in stmts.bound for k in json.loads(a)] == keys
    assert stmts.bound[0][0] == (
        "SELECT accounts.* FROM json_each(?) AS k CROSS JOIN accounts INDEXED BY "
        "accounts_nonclustered ON accounts.id = k.value"
    )
    single = workloads.statements(eng.dialect, one_by_one, plan, "forced", ROWS, SEED)
    assert [a for _, (a,) in single.bound] == keys  # batch 1: a statement per key, as before


def test_each_engine_renders_its_key_list_before_timing():
    pg = postgres.PostgresEngine(Path("/nonexistent"), "t")
    assert pg.dialect.key_args([3, 1, 2]) == ("{3,1,2}",)
    assert pg.dialect.key_join("t", "t", 3) == "unnest(%s::int4[]) AS k(id) JOIN t ON t.id = k.id"
    assert postgres_sql.settings({})["enable_memoize"] == "off"
    my = mariadb.MariaDBEngine(Path("/nonexistent"), "t")
    assert my.dialect.key_args([3, 1, 2]) == ("[3, 1, 2]",)
    assert my.dialect.key_join("t", "t FORCE INDEX (x)", 3) == (
        "JSON_TABLE(%s, '$[*]' COLUMNS (id INT PATH '$')) AS k STRAIGHT_JOIN "
        "t FORCE INDEX (x) ON t.id = k.id"
    )
    # Db2: a VALUES list of typed markers, a marker per key.
    from tunelab.engines.db2 import DB2Engine

    db2 = DB2Engine(Path("/nonexistent"), "t")
    assert db2.dialect.key_join("t", "t", 2) == (
        "(VALUES (CAST(? AS INTEGER)), (CAST(? AS INTEGER))) AS k(id) JOIN t ON t.id = k.id"
    )
    assert db2.dialect.key_args([4, 5]) == (4, 5)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("batch: 0", "workloads[0].batch: 0 is not valid"),
        ("batch: 10001", "workloads[0].batch: 10001 out of range (allowed: 1..10000)"),
        ("batch: 2.5", "workloads[0].batch: 2.5 is not valid"),
    ],
)
def test_a_batch_out_of_range_is_refused_at_validation(write_sweep, body, expected):
    path = write_sweep(f"name: x\ndataset: {{rows: 1000}}\nworkloads: [{{type: point, {body}}}]\n")
    _, errors = spec.expand(path, "sqlite")
    assert any(str(e).startswith(f"{path}: {expected}") for e in errors), errors


def test_plans_show_the_look_ups_and_refuse_a_join_that_reads_everything():
    # PostgreSQL: the nested loop over unnest is the index's look-ups; a hash or merge join,
    # or Memoize, is named, so it never passes for them.
    keys = {"Node Type": "Function Scan", "Alias": "k", "Function Name": "unnest"}
    probe = {
        "Node Type": "Index Scan",
        "Index Name": "a_nc",
        "Scan Direction": "Forward",
        "Index Cond": "(id = k.id)",
    }
    loop = [{"Plan": {"Node Type": "Nested Loop", "Plans": [keys, probe]}}]
    assert postgres_sql.normalise_plan(loop) == "index:a_nc;forward"
    seq = {"Node Type": "Seq Scan", "Relation Name": "a"}
    hashed = [
        {"Plan": {"Node Type": "Hash Join", "Plans": [seq, {"Node Type": "Hash", "Plans": [keys]}]}}
    ]
    assert postgres_sql.normalise_plan(hashed) == "hash-join + scan"
    memo = {"Node Type": "Memoize", "Plans": [probe]}
    memoized = [{"Plan": {"Node Type": "Nested Loop", "Plans": [keys, memo]}}]
    assert postgres_sql.normalise_plan(memoized) == "memoize + index:a_nc;forward"
    # MariaDB: JSON_TABLE's row source left out, the eq_ref look-ups kept; a hash join named.
    doc = {
        "query_block": {
            "nested_loop": [
                {
                    "table": {
                        "table_name": "k",
                        "access_type": "ALL",
                        "table_function": "json_table",
                    }
                },
                {"table": {"table_name": "a", "access_type": "eq_ref", "key": "a_nc"}},
            ]
        }
    }
    assert mariadb_sql.normalise_plan(doc) == "index:a_nc;eq_ref"
    doc["query_block"]["nested_loop"][1]["table"]["access_type"] = "hash_ALL"
    assert mariadb_sql.normalise_plan(doc).startswith("hash-join")
    # SQLite: json_each's scan left out.
    lines = "SCAN k VIRTUAL TABLE INDEX 1:\nSEARCH a USING INDEX a_nc (id=?)"
    assert sqlite_sql.normalise_plan(lines) == "index:a_nc;search"
    assert sqlite_sql.normalise_plan("SCAN k VIRTUAL TABLE INDEX 1:\nSCAN a") == "scan"
    # Db2: a hash join between the VALUES list's GENROW and the table is named.
    ops = {
        1: PlanOperator(1, "RETURN", 10.0, inputs=[("O", 2, 1.0)]),
        2: PlanOperator(2, "HSJOIN", 9.0, inputs=[("O", 3, 1.0), ("O", 4, 1.0)], outputs=[1]),
        3: PlanOperator(3, "TBSCAN", 5.0, inputs=[("D", "LAB.A", 1.0)], outputs=[2]),
        4: PlanOperator(4, "GENROW", 1.0, outputs=[2]),
    }
    assert normalise_plan(ops) == "hsjoin + scan;tbscan"


# -- real engines: SQLite here; MariaDB and PostgreSQL where Docker runs them ---------------------


@pytest.fixture(scope="module")
def pg_image() -> str:
    reason = containers.docker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from tunelab.engines.images import ensure_image

    try:
        return ensure_image("postgres", postgres.PostgresEngine.info.image)
    except containers.ContainerError as exc:
        pytest.skip(f"no PostgreSQL image: {exc}")


def _measured(write_sweep, tmp_path, engine: str, pool: str) -> dict[int, pd.DataFrame]:
    """A warm point workload, one statement per key and in batches of 100, on one server."""
    path = write_sweep(
        f"""
        name: b
        engines: [{engine}]
        dataset: {{rows: {ROWS}, seed: {SEED}}}
        fixed: {{index: nonclustered, buffer_pool: {pool}}}
        workloads: [{{type: point, lookups: 1000, batch: [1, 100]}}]
        cache: warm
        access: forced
        repetitions: 2
        """,
        f"b-{engine}.yaml",
    )
    points, errors = spec.expand(path, engine)
    assert errors == []
    run_id = f"batch-{uuid.uuid4().hex[:6]}"
    out: dict[int, pd.DataFrame] = {}
    try:
        for p in points:
            csv = runner.run_point(
                p, tmp_path / f"{p.point_id}.csv", tmp_path / "w", tmp_path / "d", run_id
            )
            out[p.workload.params["batch"]] = pd.read_csv(csv)
    finally:
        recovery.clean(run_id)
    return out


def _same_look_ups(frames: dict[int, pd.DataFrame], path: str) -> None:
    one, batched = frames[1], frames[100]
    assert batched["queries"].eq(10).all() and one["queries"].eq(1000).all()
    for frame in frames.values():
        assert frame["rows_touched"].eq(1000).all()
        assert frame["access_matches"].all()  # the index's path, batched or not
    assert batched["access_path"].eq(path).all()  # its look-ups, not a hash or merge join
    # A descent per key: at least an index leaf and a table page asked of the pool for most
    # keys (a scan of the 20,000 rows asks for a few hundred pages in all), and no more than
    # a statement per key asks for. Fewer can be: SQLite's cursors keep each b-tree's root
    # page between the keys of one statement, where every new statement asks for it again.
    pages = batched["c_logical_reads"].median()
    assert pages >= 1.5 * 1000, pages
    assert pages <= 1.05 * one["c_logical_reads"].median()


def test_sqlite_batches_make_the_same_look_ups(write_sweep, tmp_path):
    frames = _measured(write_sweep, tmp_path, "sqlite", "2000")
    _same_look_ups(frames, "index:accounts_nonclustered;search")


@pytest.mark.docker
def test_mariadb_batches_make_the_same_look_ups(write_sweep, tmp_path, image):
    frames = _measured(write_sweep, tmp_path, "mariadb", "'64MiB'")
    _same_look_ups(frames, "index:accounts_nonclustered;eq_ref")


@pytest.mark.docker
def test_postgres_batches_make_the_same_look_ups(write_sweep, tmp_path, pg_image):
    frames = _measured(write_sweep, tmp_path, "postgres", "'64MiB'")
    _same_look_ups(frames, "index:accounts_nonclustered;forward")


def test_db2_gets_the_values_list_with_its_markers_and_the_guideline_last(tmp_path):
    from tunelab.engines.db2 import DB2Engine

    eng = DB2Engine(tmp_path, "t")
    w = workloads.Workload("point", {"lookups": 3, "fetch": "count", "batch": 2})
    stmts = workloads.statements(eng.dialect, w, w.index_plan("nonclustered"), "forced", ROWS, SEED)
    (first, args), (last, rest) = stmts.bound
    marker = "(CAST(? AS INTEGER))"
    assert (
        f"FROM (VALUES {marker}, {marker}) AS k(id) JOIN accounts ON accounts.id = k.id /*" in first
    )
    assert f"FROM (VALUES {marker}) AS k(id) JOIN" in last
    assert first.endswith('INDEX="IX_ACCOUNTS_NONCLUSTERED"/></OPTGUIDELINES> */')
    assert len(args) == 2 and len(rest) == 1
