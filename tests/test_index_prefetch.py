"""PostgreSQL's prefetch for reads through an index (`index-prefetch`): the knobs reach the
server, every point's plan is a bitmap heap scan, and prefetch changes the wait for the reads,
not which pages are read."""

from __future__ import annotations

import uuid
from pathlib import Path

import pandas as pd
import pytest

from tunelab.engines.postgres import PostgresEngine, settings
from tunelab.host import containers
from tunelab.measure import runner
from tunelab.run import recovery
from tunelab.sweep import spec

REPO = Path(__file__).resolve().parents[1]
SWEEP = REPO / "workflows" / "sweeps" / "index-prefetch.yaml"


def test_the_sweep_runs_bitmap_heap_scans_on_postgres_only():
    points, errors = spec.expand(SWEEP, "postgres")
    assert errors == []
    assert {p.knobs["io_concurrency"] for p in points} == {0, 1, 16, 128}
    assert {p.workload.type for p in points} == {"range", "multipoint"}
    assert all(p.cache == "cold" and p.access == "forced" for p in points)
    for engine in ("sqlite", "mariadb"):
        _, errors = spec.expand(SWEEP, engine)
        assert "does not run on" in str(errors[0])


def test_both_prefetch_depths_are_server_settings_applied_in_place():
    conf = settings(
        PostgresEngine.knob_rules.full_knobs(
            {"io_concurrency": 64, "maintenance_io_concurrency": 100}
        )
    )
    assert conf["effective_io_concurrency"] == "64"
    assert conf["maintenance_io_concurrency"] == "100"
    info = PostgresEngine.info
    assert not (info.knobs["io_concurrency"].restart or info.knobs["io_concurrency"].fresh)
    assert not info.knobs["maintenance_io_concurrency"].restart
    with pytest.raises(Exception, match="maintenance_io_concurrency=1001"):
        PostgresEngine.knob_rules.full_knobs({"maintenance_io_concurrency": 1001})


@pytest.fixture(scope="module")
def pg_image() -> str:
    reason = containers.docker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from tunelab.engines.images import ensure_image

    try:
        return ensure_image("postgres", PostgresEngine.info.image)
    except containers.ContainerError as exc:
        pytest.skip(f"no PostgreSQL image: {exc}")


@pytest.mark.docker
def test_prefetch_changes_the_wait_not_the_pages(write_sweep, tmp_path, pg_image):
    """The sweep's shape on a smaller table, cold: each depth read back, a bitmap heap scan at
    every point, the same pages read whatever the depth, and the reads' wait recorded."""
    path = write_sweep(
        """
        name: p
        engines: [postgres]
        dataset: {rows: 50000, seed: 3}
        knobs: {io_concurrency: [0, 64], maintenance_io_concurrency: [10, 100]}
        fixed: {index: nonclustered, buffer_pool: "8MiB"}
        workloads: [{type: range, selectivity: 0.01}, {type: multipoint, queries: 2}]
        cache: cold
        access: forced
        repetitions: 2
        """
    )
    points, errors = spec.expand(path, "postgres")
    assert errors == []
    run_id = f"pf-{uuid.uuid4().hex[:6]}"
    frames = []
    try:
        for p in points:
            csv = runner.run_point(
                p, tmp_path / f"{p.point_id}.csv", tmp_path / "w", tmp_path / "d", run_id
            )
            frames.append(pd.read_csv(csv))
    finally:
        recovery.clean(run_id)
    rows = pd.concat(frames, ignore_index=True)
    assert (rows["applied_io_concurrency"] == rows["knob_io_concurrency"]).all()
    assert (
        rows["applied_maintenance_io_concurrency"] == rows["knob_maintenance_io_concurrency"]
    ).all()
    assert rows["access_path"].eq("index:accounts_nonclustered;bitmap").all()
    assert rows["cache_achieved"].eq("cold").all()
    assert (rows["c_read_wait_ms"] > 0).all()
    for workload, group in rows.groupby("workload"):
        assert group["c_physical_reads"].nunique() == 1, workload  # the same pages, all depths
        assert group["c_physical_reads"].iloc[0] > 0
