"""``flat_then_falls`` on real rows (SQLite, in-process): "more memory often does not improve
performance unless you can make the pool(s) larger than the data" (the talk). Where the pool
holds the data comes from the rows (the pool as applied times the page size against the
table with its indexes), never from the claim.

The counter of pages SQLite's cache reads from the OS makes the two shapes plain: a warm scan
of a table larger than the cache reads every page again (its LRU cache keeps evicting the
pages it needs next), so the reads stay level until the cache holds the table and then stop;
warm random look-ups find more of their pages in a larger cache, so the reads fall before
it holds the table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tunelab.analysis import claim_verdict, claims, decisions
from tunelab.measure import runner
from tunelab.sweep import claimspec, spec
from tunelab.sweep.claimspec import FLAT_THEN_FALLS

ROWS = 20_000
ROUNDS = 6
POOLS = (16, 64, 4096)  # pages of 4 KiB: the last holds the table (about 1.5 MB)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data")


def measured(write_sweep, tmp_path: Path, data_dir: Path, workload: str) -> pd.DataFrame:
    """A sweep of the pool measured in rounds, as the lab measures an in-process engine:
    every point once per round, side by side."""
    path = write_sweep(
        f"""
        name: t
        engines: [sqlite]
        dataset: {{rows: {ROWS}, seed: 7}}
        knobs: {{buffer_pool: {list(POOLS)}}}
        fixed: {{index: nonclustered}}
        workloads: [{workload}]
        cache: warm
        repetitions: {ROUNDS}
        """,
        "t.yaml",
    )
    points, errors = spec.expand(path)
    assert not errors, errors
    rows = []
    for i, point in enumerate(points):
        with runner.PointSession(point, tmp_path / f"w{i}", data_dir) as session:
            for r in range(ROUNDS):
                rows.append(session.repetition(r, {"round": r, "order_mode": "rounds"}))
    return pd.DataFrame(rows)


def judged(frame: pd.DataFrame, metric: str) -> claim_verdict.Verdict:
    claim = {"kind": FLAT_THEN_FALLS, "along": "buffer_pool", "metric": metric}
    (v,) = claims.evaluate_sweep([claim], frame, "sqlite")
    return v


def test_a_warm_scan_reads_as_much_until_the_cache_holds_the_table(write_sweep, tmp_path, data_dir):
    frame = measured(write_sweep, tmp_path, data_dir, "{type: scan}")
    pool = frame["applied_buffer_pool"] * frame["page_size_bytes"]
    assert (pool < frame["data_bytes"]).sum() == 2 * ROUNDS, "two pools below the table"
    v = judged(frame, "physical_reads")
    assert v.verdict == decisions.HOLDS, v.line("t")
    (context,) = v.contexts
    assert context["curve"]["shape"] == "level, then falls", context["curve"]
    assert context["curve"]["medians"][-1] < 0.05 * context["curve"]["medians"][0]
    assert "once the pool holds the data" in v.evidence


def test_random_look_ups_read_less_before_the_cache_holds_the_table(
    write_sweep, tmp_path, data_dir
):
    frame = measured(write_sweep, tmp_path, data_dir, "{type: point, lookups: 2000}")
    v = judged(frame, "physical_reads")
    assert v.verdict == decisions.CONTRADICTED, v.line("t")
    assert v.word == claim_verdict.FAILS_WORD  # a claim of the sweep, not a finding
    assert any(c.startswith("a gain below the data: buffer_pool 16 → 64") for c in v.causes)


def test_a_sweep_whose_pools_all_hold_the_data_decides_nothing(write_sweep, tmp_path, data_dir):
    frame = measured(write_sweep, tmp_path, data_dir, "{type: scan}")
    big = frame.assign(data_bytes=1)  # every pool holds a table of one byte
    v = judged(big, "physical_reads")
    assert v.verdict == decisions.INCONCLUSIVE
    assert v.causes == ["fewer than two pools swept below the data"]


def test_the_kind_is_along_the_pool_alone(write_sweep):
    path = write_sweep(
        """
        name: t
        engines: [sqlite]
        dataset: {rows: 1000, seed: 7}
        knobs: {buffer_pool: [16, 64], page_size: [4096, 8192]}
        workloads: [{type: scan}]
        repetitions: 2
        """
    )
    points, errors = spec.expand(path)
    assert not errors, errors
    ok = {"kind": FLAT_THEN_FALLS, "along": "buffer_pool"}
    assert claimspec.validate([ok], points, "sqlite") == []
    ((_, fld, _, allowed),) = claimspec.validate([{**ok, "along": "page_size"}], points, "sqlite")
    assert (fld, allowed) == ("expect.along", "buffer_pool")
