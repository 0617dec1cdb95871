"""The log scanner: write points record their log traffic, `tunelab logscan` turns the rows
into IBM's scanner fields and the calculator's input; real servers where Docker runs."""

from __future__ import annotations

import math
import uuid

import pandas as pd
import pytest

from tunelab import engines
from tunelab.hadr import scan
from tunelab.measure import runner
from tunelab.report import logscan
from tunelab.run import recovery
from tunelab.sweep import spec, workloads


def rows(**over) -> pd.DataFrame:
    base = {
        "engine": ["e", "e"],
        "sweep": ["s", "s"],
        "point_id": ["p", "p"],
        "rep": [0, 1],
        "workload": ["insert", "insert"],
        "elapsed_s": [2.0, 4.0],
        "c_log_bytes": [8 * 2**20, 8 * 2**20],
        "c_log_writes": [100, 50],
        "transactions": [10, 10],
        "open_transactions": [1, 1],
    }
    return pd.DataFrame({**base, **over})


def test_each_write_repetition_is_an_interval_with_the_scanners_fields():
    table = logscan.intervals(rows(), "r.csv")
    assert list(table.columns) == list(logscan.CSV_COLUMNS)
    work = scan.parse_csv(logscan.csv_text(table), "x")
    first, second = work.intervals
    assert first.label == "e/s/p#0"
    assert math.isclose(first.rate, 4.0) and math.isclose(second.rate, 2.0)  # MB/s of 2^20
    assert math.isclose(first.flush_pages, 8 * 256 / 100)  # 4 KiB pages per flush
    assert math.isclose(second.flush_seconds, 4.0 / 50)
    assert math.isclose(first.trans_pages, 8 * 256 / 10)
    lines = logscan.text_lines(table)
    assert "4.000 MB/s" in lines[0] and "20.5 pg/f" in lines[0] and "nOpenTrans" in lines[0]
    assert lines[-1] == "2 intervals, 6.000 sec, average 2.667 MB/s"


def test_reads_and_repetitions_without_log_are_left_out():
    frame = pd.concat(
        [
            rows(),
            rows(workload=["scan", "scan"], c_log_bytes=[0, 0], transactions=[math.nan, math.nan]),
        ]
    )
    assert len(logscan.intervals(frame, "r.csv")) == 2
    with pytest.raises(logscan.LogscanError, match=r"^r.csv: rows: no write repetition"):
        logscan.intervals(rows(c_log_writes=[0, 0]), "r.csv")


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    old = tmp_path / "old.csv"
    rows().drop(columns=["c_log_bytes", "transactions"]).to_csv(old, index=False)
    assert logscan.main([str(old)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{old}: columns: no c_log_bytes, transactions") and err.count("\n") == 1
    assert logscan.main([str(tmp_path / "missing")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert logscan.main(["--nope", str(old)]) == 2
    assert capsys.readouterr().err.startswith("tunelab logscan: unrecognized arguments")


def test_transactions_count_the_commits_the_write_plan_makes():
    class Steps:  # the plan only needs statements per transaction
        def write_steps(self, sql, rows):
            return [(sql, rows)]

    for threads, every, n in [(1, 1000, 100_000), (4, 1000, 100_000), (3, 7, 100), (2, 500, 999)]:
        w = workloads.Workload("insert", {"rows": n, "threads": threads, "commit_every": every})
        plan = workloads.write_plan(Steps(), w, "INSERT", [(i,) for i in range(n)])
        assert workloads.transactions(w, n) == sum(len(t) for t in plan)


# -- real servers ----------------------------------------------------------------------------
@pytest.fixture(params=["postgres", "mariadb"])
def server_engine(request) -> str:
    from tunelab.engines.images import ensure_image
    from tunelab.host import containers

    reason = containers.docker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    ensure_image(request.param, engines.info(request.param).image)
    return request.param


@pytest.mark.docker
def test_a_write_point_records_its_log_and_logscan_reads_it(server_engine, tmp_path, capsys):
    sweep = tmp_path / "logs.yaml"
    sweep.write_text(
        f"name: logs\nengines: [{server_engine}]\ndataset: {{rows: 3000, seed: 3}}\n"
        "knobs: {index: [none]}\n"
        "workloads: [{type: insert, rows: 2000, commit_every: 250}]\ncache: warm\n"
        "repetitions: 2\n"
    )
    points, errors = spec.expand(sweep, server_engine)
    assert errors == [] and len(points) == 1
    run_id = f"log-{uuid.uuid4().hex[:6]}"
    try:
        out = runner.run_point(
            points[0],
            tmp_path / "r" / server_engine / "logs.csv",
            tmp_path / "w",
            tmp_path / "d",
            run_id,
        )
    finally:
        recovery.clean(run_id)
    df = pd.read_csv(out)
    assert (df["transactions"] == 8).all() and (df["open_transactions"] == 1).all()
    # Every inserted row is logged: at least its ~40 bytes of values, and each commit
    # flushes (a write and a sync at least once over the section).
    assert (df["c_log_bytes"] > 2000 * 40).all(), df["c_log_bytes"].tolist()
    assert (df["c_log_writes"] >= 1).all()
    if server_engine == "postgres":  # MariaDB 10.11 counts the redo log's fsyncs no more
        assert (df["c_log_syncs"] >= 1).all()
    assert logscan.main([str(tmp_path / "r"), "--csv"]) == 0
    work = scan.parse_csv(capsys.readouterr().out, "out")
    assert len(work.intervals) == 2
    for i, row in zip(work.intervals, df.itertuples()):
        assert math.isclose(i.trans_pages, row.c_log_bytes / 4096 / 8)
