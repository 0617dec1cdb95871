"""Parsing real fio JSON output (fixtures captured by tests/data/capture_fio_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunelab.calibrate import measure, model, parse

DATA = Path(__file__).parent / "data"
PLAN = measure.Plan(
    file_bytes=32 << 20,
    runtime_ms=300,
    repetitions=2,
    seq_pages=(4096, 32768),
    write_pages=(1, 16, 256, 1000),
)


def text(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("name", ["fio_ext4_direct_rep1.json", "fio_ramfs_buffered.json"])
def test_jobs_match_the_plan_and_fio_own_numbers(name):
    doc = json.loads(text(name)[text(name).index("{") :])
    results = parse.parse(text(name))
    assert [r.name for r in results] == [j.name for j in PLAN.jobs()]
    for r, job, raw in zip(results, PLAN.jobs(), doc["jobs"], strict=True):
        assert r.block_bytes == job.block_bytes
        assert r.direction == ("write" if job.rw == "write" else "read")
        side = raw[r.direction]
        # io_bytes is whole requests of the job's size, and fio's bw is io_bytes / runtime
        assert r.io_bytes == r.ios * r.block_bytes == side["io_bytes"]
        assert r.bw_bytes_s == pytest.approx(r.io_bytes / r.runtime_s, rel=0.01)
        assert r.lat_mean_ms == pytest.approx(side["lat_ns"]["mean"] / 1e6)
        pct = r.percentiles_ms
        assert sorted(pct) == [50.0, 95.0, 99.0, 99.9]
        assert pct[50.0] <= pct[95.0] <= pct[99.0] <= pct[99.9]


def test_direct_run_names_its_device_and_memory_run_none():
    assert parse.device_names(text("fio_ext4_direct_rep1.json"))
    assert parse.device_names(text("fio_ramfs_buffered.json")) == []
    assert parse.fio_version(text("fio_ext4_direct_rep1.json")).startswith("fio-")


def test_refused_direct_io_output_is_an_error_naming_the_errno():
    raw = text("fio_ramfs_direct_refused.json")
    assert not raw.startswith("{")  # fio printed its error line before the JSON
    with pytest.raises(parse.FioOutputError, match="error 22"):
        parse.parse(raw)


@pytest.mark.parametrize("bad", ["", "fio: nothing here", '{"jobs": [', '{"no": 1}'])
def test_not_fio_json(bad):
    with pytest.raises(parse.FioOutputError):
        parse.parse(bad)


def test_reduce_real_repetitions_to_db2_figures():
    runs = [parse.parse(text(f"fio_ext4_direct_rep{i}.json")) for i in (1, 2)]
    figures, records, _ = measure.reduce(runs, PLAN)
    seq = [r.bw_bytes_s for run in runs for r in run if r.name == "seq-1048576"]
    drr = sum(seq) / len(seq) / model.MB_BYTES
    assert figures["device_read_rate_mb_s"] == pytest.approx(drr)
    assert figures["transferrate_ms"][32768] == pytest.approx(32768 / (drr * model.MB_BYTES) * 1e3)
    rand = {
        p: sum(r.lat_mean_ms for run in runs for r in run if r.name == f"rand-{p}") / 2
        for p in PLAN.random_pages
    }
    by_page = {p: rand[p] - figures["transferrate_ms"][p] for p in rand}
    assert figures["overhead_ms_by_page"] == pytest.approx(by_page)
    assert figures["overhead_ms"] == pytest.approx(max(0.0, sum(by_page.values()) / 4))
    assert {r["name"] for r in records} == {j.name for j in PLAN.jobs()}
    assert all(r["repetitions"] == 2 for r in records)
