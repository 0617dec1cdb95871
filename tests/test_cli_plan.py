"""`tunelab plan --sql`: each point's statements in the order the runner runs them, with only
the steps of its own cache state."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunelab import cli
from tunelab.engines import db2, db2_sql, mariadb
from tunelab.engines.base import IndexPlan
from tunelab.store.dataset import Dataset

SWEEP = """
name: plan-order
engines: [sqlite]
dataset: {rows: 1000, seed: 3}
knobs:
  buffer_pool: [64]
fixed:
  index: nonclustered
workloads:
  - type: insert
    rows: 1000
  - type: scan
cache: both
repetitions: 2
"""


@pytest.fixture
def blocks(write_sweep, capsys) -> dict[str, list[str]]:
    """Printed lines per point, keyed "<workload> <cache>"."""
    assert cli.main(["plan", str(write_sweep(SWEEP)), "--sql"]) == 0
    out: dict[str, list[str]] = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("-- point "):
            workload, cache = line.split("(", 1)[1].split(",")[:2]
            key = f"{workload} {cache.strip()}"
            out[key] = []
        else:
            out[key].append(line)
    return out


def _at(lines: list[str], start: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(start))


def test_an_insert_point_indexes_the_empty_table_then_times_the_inserts(blocks):
    lines = blocks["insert cold"]
    text = "\n".join(lines)
    create = _at(lines, "CREATE TABLE accounts")
    index = _at(lines, "CREATE UNIQUE INDEX accounts_nonclustered")
    timed = _at(lines, "-- timed: INSERT INTO accounts")
    assert _at(lines, "-- every repetition") < create < index < _at(lines, "-- cold:") < timed
    assert "the empty table" in lines[index + 1]
    # no load: the only INSERT is the timed one
    assert [line for line in lines if "INSERT INTO" in line] == [lines[timed]]
    assert "EXPLAIN" not in text  # an insert has no plan to capture


def test_a_read_point_loads_then_indexes_once(blocks):
    lines = blocks["scan cold"]
    create = _at(lines, "CREATE TABLE accounts")
    load = _at(lines, "INSERT INTO accounts")
    assert "-- every repetition" not in "\n".join(lines)
    assert create < load < _at(lines, "ANALYZE accounts") < _at(lines, "EXPLAIN QUERY PLAN")
    assert _at(lines, "EXPLAIN QUERY PLAN") < _at(lines, "-- cold:") < _at(lines, "-- timed")


@pytest.mark.parametrize("workload", ["insert", "scan"])
def test_warm_points_print_no_cold_steps_and_cold_points_no_warm_up(blocks, workload):
    warm, cold = "\n".join(blocks[f"{workload} warm"]), "\n".join(blocks[f"{workload} cold"])
    assert "-- cold" not in warm and "evict" not in warm
    assert "-- warm: " in warm
    assert "-- warm" not in cold and "-- cold: " in cold


def test_server_engines_order_an_insert_point_the_same_way(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    plan = IndexPlan("nonclustered", ("id",))
    ds = Dataset(1000, 1)
    knobs = {"page_size": 16384, "buffer_pool": 1024, "index": "nonclustered"}
    for eng, load, cold in (
        (mariadb.MariaDBEngine, "LOAD DATA LOCAL INFILE", "restart"),
        (db2.DB2Engine, "OF DEL MESSAGES ON SERVER", db2_sql.cold_commands()["stop"][:40]),
    ):
        offline = eng(Path("/nonexistent"), "plan")
        k = {**knobs, "page_size": 8192} if eng is db2.DB2Engine else knobs
        lines = offline.planned_sql(k, ds, plan, workload="insert", cache="warm")
        text = "\n".join(lines)
        assert load not in text and cold not in text  # no load, no cold steps
        create = _at(lines, "CREATE TABLE")
        index = next(i for i, line in enumerate(lines) if "CREATE UNIQUE INDEX" in line)
        assert _at(lines, "-- every repetition") < create < index
        assert "-- warm: SELECT * FROM accounts once" in text
        assert "EXPLAIN PLAN" not in text and "EXPLAIN FORMAT" not in text  # nor explained
        # without a workload and cache: every statement a point could run, as before
        everything = "\n".join(offline.planned_sql(k, ds, plan))
        assert load in everything and cold in everything
