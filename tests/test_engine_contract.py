"""The engine contract: one registry, declared abilities, every asked knob read back."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import pandas as pd
import pytest

from tunelab import engines
from tunelab.engines import abilities, readahead
from tunelab.engines.base import Engine, EngineError, IndexPlan
from tunelab.engines.server import ServerEngine
from tunelab.host import blockdev, cache, containers
from tunelab.measure import runner
from tunelab.report import labels
from tunelab.run import recovery
from tunelab.sweep import loading, spec

REPO = Path(__file__).resolve().parents[1]


def test_the_registry_is_the_one_list_of_engines():
    names = engines.names()
    assert {"sqlite", "mariadb", "db2", "postgres"} <= set(names)
    schema = loading.schema()
    assert schema["$defs"]["engine"]["enum"] == names
    # No engine name is written into the schema files themselves.
    for path in (
        REPO / "src/tunelab/schemas/sweep.schema.json",
        REPO / "workflows/schemas/config.schema.yaml",
    ):
        text = path.read_text()
        assert not [n for n in names if f'"{n}"' in text or f" {n}," in text], path


@pytest.mark.parametrize("name", engines.names())
def test_each_engine_declares_what_it_is(name):
    cls = engines.engine_class(name)
    info = cls.info
    assert issubclass(cls, Engine) and info.name == name
    assert issubclass(cls, ServerEngine) == info.needs_container
    if info.needs_container:
        assert info.image is not None
        if info.image.build_script:
            assert (REPO / "containers" / info.image.build_script).is_file()
    assert info.traces == issubclass(cls, abilities.PageTraces)
    # The engine names its own cold steps for the report; evicting the OS cache is cache's.
    assert info.cold_steps and not set(info.cold_steps) & set(cache.EVICT_STEPS), name
    for knob in info.knobs.values():
        assert knob.readback or knob.name in ("index", "lock_granularity"), (name, knob.name)
    assert {"index", "lock_granularity"} <= set(info.knobs), name
    # Defaults pass the engine's own checks.
    assert cls.knob_rules.full_knobs({}) == {**info.defaults()}


def test_full_knobs_names_the_knob_and_the_allowed_values():
    cls = engines.engine_class("sqlite")
    with pytest.raises(EngineError, match=r"page_size=3000 must be a power of two"):
        cls.knob_rules.full_knobs({"page_size": 3000})
    with pytest.raises(EngineError, match="cannot express knob.*direct_io"):
        cls.knob_rules.full_knobs({"direct_io": True})


def test_report_labels_name_only_knobs_some_engine_has():
    every = {k for n in engines.names() for k in engines.info(n).knobs}
    assert set(labels.KNOBS) <= every


def test_restart_keys_come_from_the_knobs():
    info = engines.info("mariadb")
    assert info.fresh_knobs == {"page_size", "engine_version"}  # a version: a server of its own
    assert info.restart_knobs == {"page_size", "direct_io", "engine_version"}
    assert engines.info("db2").restart_knobs == frozenset()


# -- every asked knob is read back from the running engine --------------------------------------
KNOB_SWEEPS = {
    "sqlite": "fixed: {page_size: 8192, buffer_pool: 500, index: covering, "
    "lock_granularity: database, os_read_ahead: 256}\n",
    "mariadb": "fixed: {page_size: 8192, buffer_pool: '16MiB', read_ahead_threshold: 20, "
    "random_read_ahead: true, direct_io: false, index: covering, lock_granularity: table, "
    "engine_version: '10.11', os_read_ahead: 256}\n",
    "postgres": "fixed: {page_size: 8192, buffer_pool: '16MiB', io_concurrency: 4, "
    "index: covering, lock_granularity: table, engine_version: 15, os_read_ahead: 256}\n",
}


def _available(name: str) -> str | None:
    if name == "sqlite":
        return None
    if reason := containers.docker_unavailable_reason():
        return reason
    src = engines.info(name).image
    try:
        containers.client().images.get(src.local)
    except Exception:
        return f"{src.local} is not built (containers/{src.build_script})"
    return None


@pytest.mark.parametrize("name", sorted(KNOB_SWEEPS))
def test_every_knob_column_has_its_applied_column(name, tmp_path, rows_dir):
    if reason := _available(name):
        pytest.skip(reason)
    sweep = tmp_path / f"{name}.yaml"
    knobs = KNOB_SWEEPS[name]
    every = set(engines.info(name).knobs)
    if blockdev.unavailable_reason() is not None:  # the host gives no device: that knob aside
        knobs, every = knobs.replace(", os_read_ahead: 256", ""), every - {"os_read_ahead"}
    sweep.write_text(
        f"name: contract\nengines: [{name}]\ndataset: {{rows: 2000, seed: 5}}\n"
        + knobs
        + "workloads: [{type: update, rows: 50, commit_every: 10}]\ncache: warm\nrepetitions: 1\n"
    )
    (point,), errors = spec.expand(sweep, name)
    assert errors == []
    assert set(point.knobs) == every  # every knob asked
    run_id = f"contract-{uuid.uuid4().hex[:6]}"
    try:
        out = runner.run_point(point, tmp_path / "p.csv", tmp_path / "w", rows_dir, run_id)
    finally:
        # The run's kept server goes with its containers, and its data directory's device
        # (os_read_ahead) with the run's directory, as at a run's end.
        recovery.clean(run_id)
        blockdev.release_under(tmp_path / "w", lambda _: None)
    assert blockdev.loops_backed_under(tmp_path / "w") == []
    frame = pd.read_csv(out)
    knobs = {c[len("knob_") :] for c in frame if c.startswith("knob_")}
    applied = {c[len("applied_") :] for c in frame if c.startswith("applied_")}
    assert knobs and knobs <= applied, knobs - applied
    row = frame.iloc[0]
    assert row["applied_index"] == "covering"
    assert row["applied_lock_granularity"] == row["knob_lock_granularity"]


def test_a_knob_the_engine_did_not_read_back_fails_the_point(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "name: s\nengines: [sqlite]\ndataset: {rows: 500, seed: 1}\n"
        "workloads: [{type: multipoint, queries: 2}]\nrepetitions: 1\ncache: warm\n"
    )
    (point,), _ = spec.expand(sweep, "sqlite")
    with pytest.raises(EngineError, match="index: asked 'nonclustered', engine reports 'none'"):
        asked = dataclasses.replace(point, knobs={**point.knobs, "index": "nonclustered"})
        runner.check_applied(asked, {**point.knobs, "index": "none"})
    with pytest.raises(EngineError, match="lock_granularity: asked 'database', not read back"):
        applied = {k: v for k, v in point.knobs.items() if k != "lock_granularity"}
        runner.check_applied(point, applied)
    runner.check_applied(point, dict(point.knobs))  # complete and equal: no error


@pytest.mark.parametrize(
    "kind", ["none", "nonclustered", "clustered", "covering", "covering_wrong_order"]
)
def test_sqlite_reads_each_index_layout_back_from_its_catalog(kind, tmp_path):
    eng = engines.create("sqlite", tmp_path / "e", "r")
    plan = (
        IndexPlan(kind, ("hundreds1",), ("id", "hundreds2"))
        if kind != "none"
        else (IndexPlan("none", ("hundreds1",)))
    )
    with eng:
        eng.provision({})
        eng.create_table("accounts", plan)
        eng.create_index("accounts", plan)
        got = eng.layout.applied("accounts", plan, table_lock=False)
    assert got == {"index": kind, "lock_granularity": "database"}, json.dumps(got)


@pytest.fixture
def rows_dir(tmp_path):
    return tmp_path / "data"


def test_a_sweep_for_every_engine_skips_one_that_cannot_vary_its_knob(tmp_path):
    """A sweep that names no engines runs where its swept knobs can vary; elsewhere it is
    skipped with the engine's reason, while a sweep that names the engine is an error."""
    sweep = tmp_path / "pages.yaml"
    body = "dataset: {rows: 500}\nknobs: {page_size: [4096, 16384]}\nworkloads: [{type: scan}]\n"
    sweep.write_text("name: pages\n" + body)
    found = spec.validate_files([sweep], "postgres", skip_other_engines=True)
    assert found.errors == [] and "cannot vary page_size: BLCKSZ" in found.skipped[str(sweep)]
    assert spec.validate_files([sweep], "sqlite", skip_other_engines=True).points
    sweep.write_text("name: pages\nengines: [postgres]\n" + body)
    found = spec.validate_files([sweep], "postgres", skip_other_engines=True)
    assert found.skipped == {} and "page_size" in str(found.errors[0])


def test_points_that_share_a_server_are_measured_one_after_the_other():
    """The measurement priority orders a pack by server (fresh knobs), then by restart knobs:
    each combination's points form one run of consecutive jobs."""
    from tunelab.run import pipeline

    plan = pipeline.plan(str(REPO / "workflows/sweeps/*.yaml"), "mariadb")
    info = engines.info("mariadb")
    jobs = [(s, p) for s, pts in plan.sweeps.items() for p in pts]
    ordered = sorted(jobs, key=lambda j: -plan.measure_priority(j[0], j[1].point_id))
    keys = [info.server_order(p.knobs) for _, p in ordered]
    runs = [k for i, k in enumerate(keys) if i == 0 or k != keys[i - 1]]
    assert len(runs) == len(set(keys)) > 1  # no combination comes back after another
    # Distinct, and above every untimed job's: a run measures before it merges and renders.
    priorities = sorted(plan.measure_priority(s, p.point_id) for s, p in jobs)
    assert len(set(priorities)) == len(jobs)
    assert priorities[0] > pipeline.SHORT_UNTIMED > 0
    # Within a server's run, the points that read the same table come together: each table
    # is built once per server and restart combination, then reused.
    tables = [
        (*info.server_order(p.knobs), pipeline.table_order(p.workload, p.knobs, p.dataset))
        for _, p in ordered
    ]
    table_runs = [k for i, k in enumerate(tables) if i == 0 or k != tables[i - 1]]
    assert len(table_runs) == len(set(tables)) < len(tables)


def test_the_reports_that_draw_most_start_first():
    """Reports run two at a time after the measurements: the ones with more swept dimensions
    (a figure each), then more points, start first, so the two slots end close together;
    every report's priority lies below the checks' and the short jobs' (which run first)."""
    from tunelab.run import pipeline

    plan = pipeline.plan(str(REPO / "workflows/sweeps/*.yaml"), "sqlite")
    priorities = {s: plan.report_priority(s) for s in plan.sweeps}
    assert len(set(priorities.values())) == len(priorities)
    assert all(0 < p < pipeline.CHECK_SOON < pipeline.SHORT_UNTIMED for p in priorities.values())
    first = max(priorities, key=priorities.get)
    assert first == "range-index-vs-scan"  # index and selectivity swept, cold and warm
    assert priorities["scan-vs-page-size"] > priorities["scan-vs-buffer-pool"]  # 2 knobs vs 1


@pytest.mark.parametrize("engine", ["mariadb", "postgres"])
def test_a_pack_builds_each_table_once_per_server(engine):
    """A kept server keeps one table under the lab's table name: it survives a restart, and
    a point that reads another table, or writes, replaces it. In the measurement order each
    table a pack reads is built once per server (fresh-knob combination), also where several
    restart combinations read it (PostgreSQL's buffer-pool sweeps) and inserts fall between."""
    from tunelab.run import pipeline

    plan = pipeline.plan(str(REPO / "workflows/sweeps/*.yaml"), engine)
    info = engines.info(engine)
    jobs = [(s, p) for s, pts in plan.sweeps.items() for p in pts]
    ordered = [
        p for _, p in sorted(jobs, key=lambda j: -plan.measure_priority(j[0], j[1].point_id))
    ]
    kept, server, builds, tables = None, None, 0, set()
    for p in ordered:
        fresh, _ = info.server_order(p.knobs)
        fresh += " on its own device" * readahead.wanted(p.knobs)  # another server (keep_key)
        if fresh != server:
            kept, server = None, fresh  # a new server: a new data directory
        if p.workload.writes:
            kept = None  # its table is built again for every repetition
            continue
        table = pipeline.table_order(p.workload, p.knobs, p.dataset)
        tables.add((fresh, table))
        builds += kept != table
        kept = table
    restarts = [info.server_order(p.knobs) for p in ordered]
    assert len(set(restarts)) > 2
    assert builds == len(tables)
