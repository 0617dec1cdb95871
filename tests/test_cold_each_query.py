"""Cold means every timed query meets a cold cache (SQLite, for real): a cold repetition of
several queries evicts before each of them, untimed, and records per query the state it
reached and the bytes it read from the device. The table is large enough for the kernel's
read-ahead to matter: a cold query through the non-clustered index brings in most of the
file, which a later query of the same repetition would otherwise find in memory."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from tunelab.measure import runner
from tunelab.sweep import spec, workloads

ROWS = 50_000
QUERIES = 5


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """One data set for every test here (generated once)."""
    return tmp_path_factory.mktemp("data")


def cold_point(write_sweep, index: str) -> spec.Point:
    path = write_sweep(
        f"""
        name: t
        engines: [sqlite]
        dataset: {{rows: {ROWS}, seed: 7}}
        fixed: {{index: {index}, buffer_pool: "8MiB"}}
        workloads: [{{type: multipoint, queries: {QUERIES}}}]
        cache: cold
        access: forced
        repetitions: 2
        """,
        f"{index}.yaml",
    )
    points, errors = spec.expand(path)
    assert not errors, errors
    (point,) = points
    return point


@pytest.mark.parametrize("index", workloads.INDEX_KINDS)
def test_a_query_reads_as_much_from_the_device_late_in_a_cold_repetition_as_first(
    write_sweep, tmp_path, data_dir, index
):
    """The same queries in one order, then in the other: each reads from the device, within
    20 %, what it reads when it runs first (queries of different values may read different
    amounts, so each is compared with itself)."""
    point = cold_point(write_sweep, index)
    with runner.PointSession(point, tmp_path / "w", data_dir) as session:
        forward = session.repetition(0)
        session.setup.statements.bound.reverse()
        backward = session.repetition(1)
        first, second = (t.reset_index(drop=True) for t in session.times)
    for row, per_query in ((forward, first), (backward, second)):
        assert len(per_query) == QUERIES and per_query["cache_achieved"].eq("cold").all()
        assert row["cold_queries"] == QUERIES
        assert per_query["read_bytes"].sum() == row["c_os_read_bytes"]
        assert per_query["read_bytes"].iloc[0] == row["q_first_read_bytes"]
        assert per_query["read_bytes"].iloc[1:].median() == row["q_rest_median_read_bytes"]
    early = first["read_bytes"].to_numpy()  # query k at place k
    late = second["read_bytes"].to_numpy()[::-1]  # query k at place QUERIES - 1 - k
    assert early[0] > 0, "a cold query read nothing from the device: is the file on tmpfs?"
    for k in range(QUERIES):
        # the one that ran later of the two must not have found the other's pages in memory
        before, after = (early[k], late[k]) if k < QUERIES / 2 else (late[k], early[k])
        assert after >= 0.8 * before, (index, k, early.tolist(), late.tolist())
        assert abs(after - before) <= 0.2 * max(after, before), (index, k, early, late)


def test_a_cold_repetitions_time_is_its_queries_without_the_evictions(
    write_sweep, tmp_path, data_dir
):
    point = cold_point(write_sweep, "nonclustered")
    with runner.PointSession(point, tmp_path / "w", data_dir) as session:
        row = session.repetition(0)
        (per_query,) = session.times
        eng = session.setup.engine
        took = []
        for _ in range(3):  # what one eviction takes here, timed as the repetition does it
            t0 = time.perf_counter_ns()
            eng.make_cold()
            eng.connect().close()
            took.append(time.perf_counter_ns() - t0)
    assert per_query["cache_achieved"].eq("cold").all()
    assert per_query["resident_fraction"].eq(0).all()
    queries = per_query["elapsed_s"].sum()
    # Each query's section holds its statement and the read transaction's commit, no more.
    assert queries <= row["elapsed_s"] <= queries * 1.05 + 1e-3
    span = (row["timed_start_ns"], row["timed_end_ns"])
    between = (span[1] - span[0]) / 1e9 - row["elapsed_s"]
    # From the first query's start to the last one's end, the four evictions between them ran
    # outside the clock: the span exceeds the recorded time by at least half of four of them.
    assert between >= (QUERIES - 1) * min(took) / 1e9 / 2, (between, took)


def test_every_query_of_a_cold_point_lookup_meets_a_cold_cache(write_sweep, tmp_path, data_dir):
    """Look-ups a statement each, few enough to be cold each: every one evicts first."""
    path = write_sweep(
        f"""
        name: t
        engines: [sqlite]
        dataset: {{rows: {ROWS}, seed: 7}}
        fixed: {{index: nonclustered, buffer_pool: 2000}}
        workloads: [{{type: point, lookups: 4}}]
        cache: cold
        repetitions: 1
        """,
        "lookups.yaml",
    )
    (point,), errors = spec.expand(path)
    assert not errors, errors
    out = runner.run_point(point, tmp_path / "p.csv", tmp_path / "w", data_dir)
    row = pd.read_csv(out).iloc[0]
    per_query = pd.read_csv(runner.queries_path(out))
    assert row["cold_queries"] == 4 and per_query["cache_achieved"].eq("cold").all()
    assert (per_query["read_bytes"] > 0).all()  # each look-up went to the device
