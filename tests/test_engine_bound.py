"""Every timed number is the engine's work, and every row proves it (SQLite, for real): the
plan that ran, forced or as the optimizer chose; the engine's own time beside the client's
clock; the native fetch path; each statement's time."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tunelab.engines.base import AccessPath, EngineError
from tunelab.measure import runner
from tunelab.sweep import spec, workloads

ROWS = 20_000


def sweep(write_sweep, knobs: str, workload: str, extra: str = "", name: str = "s.yaml"):
    return write_sweep(
        f"""
        name: t
        engines: [sqlite]
        dataset: {{rows: {ROWS}, seed: 5}}
        knobs: {knobs}
        fixed: {{buffer_pool: 2000}}
        workloads: [{workload}]
        repetitions: 2
        {extra}
        """,
        name,
    )


def measured(path, tmp_path) -> dict[str, pd.DataFrame]:
    points, errors = spec.expand(path)
    assert not errors, errors
    out = {}
    for p in points:
        csv = runner.run_point(p, tmp_path / f"{p.point_id}.csv", tmp_path / "w", tmp_path / "d")
        out[p.point_id] = pd.read_csv(csv)
    return out


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        ("none", "scan"),
        ("nonclustered", "index:accounts_nonclustered"),
        ("clustered", "index:PRIMARY"),
        ("covering", "index-only:accounts_covering"),
        ("covering_wrong_order", "index-only:accounts_covering_wrong_order"),
    ],
)
def test_forced_access_runs_and_records_the_path_the_index_knob_built(
    write_sweep, tmp_path, index, expected
):
    path = sweep(
        write_sweep,
        f"{{index: [{index}]}}",
        "{type: range, selectivity: [0.001, 0.5]}",
        "access: forced",
    )
    for frame in measured(path, tmp_path).values():
        assert frame["access_mode"].eq("forced").all()
        assert frame["access_expected"].eq(expected).all()
        assert frame["access_path"].str.split(";").str[0].eq(expected).all()
        assert frame["access_matches"].all()


def test_the_raw_plan_of_every_timed_statement_sits_beside_the_results(write_sweep, tmp_path):
    path = sweep(
        write_sweep, "{index: [nonclustered]}", "{type: multipoint, queries: 3}", "access: forced"
    )
    (pid,) = measured(path, tmp_path)
    plans = json.loads(runner.plans_path(tmp_path / f"{pid}.csv").read_text())
    assert len(plans) == 3  # three distinct statements (one per hundreds2 value)
    for p in plans:
        assert "INDEXED BY accounts_nonclustered" in p["statement"]
        assert p["plan"].startswith("SEARCH accounts USING INDEX accounts_nonclustered")
        assert p["access_path"] == "index:accounts_nonclustered;search"


def test_a_forced_point_whose_plan_differs_fails_naming_both_paths(write_sweep, tmp_path):
    # A real plan: the same query on a table that has no index is a scan.
    from tunelab.engines.sqlite import SQLiteEngine

    path = sweep(write_sweep, "{index: [nonclustered]}", "{type: multipoint}", "access: forced")
    point = spec.expand(path)[0][0]
    eng = SQLiteEngine(tmp_path / "e", "r")
    eng.provision(point.knobs)
    eng.create_table(workloads.TABLE, workloads.Workload("scan").index_plan("none"))
    conn = eng.connect()
    plan = eng.dialect.explain(conn, "SELECT lat FROM accounts WHERE hundreds2 = ?", (3,))
    conn.close()
    assert plan.path == "scan"
    with pytest.raises(EngineError, match="expected index:accounts_nonclustered, the plan is scan"):
        runner.check_access(point, eng, [plan], "index:accounts_nonclustered")
    optimizer = spec.Point(**{**point.__dict__, "access": "optimizer"})
    assert runner.check_access(optimizer, eng, [plan, AccessPath("scan", "")], "x") == "scan"


def test_optimizer_access_records_a_plan_that_differs_from_the_knob(write_sweep, tmp_path):
    # At 90 % selectivity SQLite's planner prefers a scan to the non-clustered index: the
    # row says so instead of plotting a scan as an index point; forced keeps the index.
    knobs, workload = "{index: [nonclustered]}", "{type: range, selectivity: 0.9}"
    (chosen,) = measured(sweep(write_sweep, knobs, workload), tmp_path).values()
    assert chosen["access_path"].eq("scan").all()
    assert chosen["access_expected"].eq("index:accounts_nonclustered").all()
    assert not chosen["access_matches"].any()
    forced = sweep(write_sweep, knobs, workload, "access: forced", "f.yaml")
    (frame,) = measured(forced, tmp_path / "f").values()
    assert frame["access_path"].eq("index:accounts_nonclustered;search").all()
    assert frame["access_matches"].all()


def test_engine_time_is_the_engines_and_the_client_share_is_what_is_left(write_sweep, tmp_path):
    path = sweep(write_sweep, "{index: [none]}", "{type: scan, fetch: [all, count]}", "cache: warm")
    frames = measured(path, tmp_path)
    for pid, frame in frames.items():
        assert frame["rows_touched"].eq(ROWS).all(), pid  # count returns the count of rows
        assert (frame["engine_elapsed_s"] > 0).all()
        assert (frame["engine_elapsed_s"] <= frame["elapsed_s"]).all()
        share = 1 - frame["engine_elapsed_s"] / frame["elapsed_s"]
        assert frame["client_share"].tolist() == pytest.approx(share.tolist())
        # The native fetch path leaves almost nothing to the client.
        assert frame["client_share"].median() < 0.2, pid
    by_fetch = {f["wl_fetch"][0]: f["elapsed_s"].median() for f in frames.values()}
    assert by_fetch["count"] < by_fetch["all"]  # no rows built for the client


def test_each_statement_is_timed_and_the_first_is_kept_apart(write_sweep, tmp_path):
    path = sweep(
        write_sweep, "{index: [nonclustered]}", "{type: point, lookups: 200}", "cache: warm"
    )
    ((pid, frame),) = measured(path, tmp_path).items()
    assert frame["queries"].eq(200).all()
    assert (frame["q_p50_s"] <= frame["q_p95_s"]).all()
    assert (frame["q_p95_s"] <= frame["q_p99_s"]).all()
    assert (frame["q_p99_s"] <= frame["q_max_s"]).all()
    per_query = pd.read_csv(runner.queries_path(tmp_path / f"{pid}.csv"))
    assert len(per_query) == 2 * 200
    for rep, times in per_query.groupby("rep"):
        row = frame[frame["rep"] == rep].iloc[0]
        assert times["elapsed_s"].iloc[0] == pytest.approx(row["q_first_s"])
        assert times["elapsed_s"].sum() <= row["elapsed_s"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("access: always", "access: 'always' not allowed (allowed: optimizer, forced)"),
        (
            "workloads: [{type: insert, rows: 100, fetch: count}]",
            "workloads[0].fetch: unknown key (allowed: commit_every, rows, threads, type)",
        ),
        ("workloads: [{type: scan, fetch: some}]", "workloads[0].fetch: 'some' not allowed"),
    ],
)
def test_bad_access_or_fetch_is_refused_at_validation(write_sweep, body, expected):
    text = "name: x\ndataset: {rows: 1000}\n" + body + "\n"
    if "workloads" not in body:
        text += "workloads: [{type: scan}]\n"
    path = write_sweep(text, "x.yaml")
    _, errors = spec.expand(path, "sqlite")
    assert any(str(e).startswith(f"{path}: {expected}") for e in errors), errors


def test_a_refused_forced_point_keeps_its_plans_to_explain_why(write_sweep, tmp_path, monkeypatch):
    # A hint that does not reach the engine: at 90 % SQLite's own choice is a scan.
    from tunelab.engines.sqlite_sql import SQLiteDialect

    monkeypatch.setattr(SQLiteDialect, "table_ref", lambda self, table, index, access: table)
    path = sweep(
        write_sweep, "{index: [nonclustered]}", "{type: range, selectivity: 0.9}", "access: forced"
    )
    point = spec.expand(path)[0][0]
    out = tmp_path / "p.csv"
    with pytest.raises(EngineError, match="access: forced"):
        runner.run_point(point, out, tmp_path / "w", tmp_path / "d")
    assert not out.exists()
    (plan,) = json.loads(runner.plans_path(out).read_text())
    assert plan["access_path"] == "scan" and plan["plan"] == "SCAN accounts"
