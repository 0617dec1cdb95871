"""Sweep validation (every error class, all errors at once) and grid expansion."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tunelab.cli import main
from tunelab.sweep import spec

GOOD = """
    name: good
    dataset: {rows: 1000, seed: 7}
    knobs:
      page_size: [1024, 4096]
      buffer_pool: [10, 100, "64KiB"]
    fixed:
      index: nonclustered
    workloads:
      - type: range
        selectivity: [0.01, 0.1]
      - type: scan
    cache: both
    repetitions: 2
"""


def messages(path, engine=None):
    _, errors = spec.expand(path, engine)
    return [str(e) for e in errors]


def test_grid_is_the_product_of_knobs_workloads_and_cache(write_sweep):
    points, errors = spec.expand(write_sweep(GOOD))
    assert errors == []
    # 2 page sizes x 3 pools x (2 range selectivities + 1 scan) x 2 cache states
    assert len(points) == 2 * 3 * 3 * 2
    assert len({p.point_id for p in points}) == len(points)
    assert {p.knobs["index"] for p in points} == {"nonclustered"}
    assert {p.cache for p in points} == {"cold", "warm"}
    assert all(p.repetitions == 2 and p.dataset.seed == 7 for p in points)


def test_point_ids_are_stable_between_expansions(write_sweep):
    path = write_sweep(GOOD)
    first = [p.point_id for p in spec.expand(path)[0]]
    assert first == [p.point_id for p in spec.expand(path)[0]]


def test_buffer_pool_size_in_bytes_becomes_pages_of_the_points_page_size(write_sweep):
    points, _ = spec.expand(write_sweep(GOOD))
    pools = {(p.knobs["page_size"], p.knobs["buffer_pool"]) for p in points}
    assert (1024, 64) in pools and (4096, 16) in pools


def test_overrides_replace_knob_lists_for_that_engine(write_sweep):
    path = write_sweep(
        """
        name: o
        dataset: {rows: 1000}
        knobs: {page_size: [1024]}
        overrides:
          sqlite:
            knobs: {page_size: [2048, 8192]}
        workloads: [{type: scan}]
        """
    )
    points, errors = spec.expand(path, "sqlite")
    assert errors == []
    assert sorted(p.knobs["page_size"] for p in points) == [2048, 8192]


H = "name: x\ndataset: {rows: 1000}\n"
SCAN = "workloads: [{type: scan}]\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "name: x\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\ncolour: red\n",
            "x.yaml: colour: unknown key (allowed: access, cache, dataset, description, engines",
        ),
        (
            "name: x\ndataset: {rows: many}\nworkloads: [{type: scan}]\n",
            "x.yaml: dataset.rows: 'many' has the wrong type (allowed: integer)",
        ),
        (
            "name: x\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\nrepetitions: 0\n",
            "x.yaml: repetitions: 0 out of range (allowed: >= 1)",
        ),
        (
            H + "knobs: {page_size: 4096}\n" + SCAN,
            "x.yaml: knobs.page_size: 4096 is not valid (allowed: a list or null)",
        ),
        (
            "name: x\ndataset: {rows: 1000}\nworkloads: [{type: sort}]\n",
            "x.yaml: workloads[0].type: 'sort' not allowed (allowed: insert, update, scan",
        ),
        (
            "name: x\ndataset: {rows: 1000}\nworkloads: [{type: scan, rows: 5}]\n",
            "x.yaml: workloads[0].rows: unknown key (allowed: fetch, type)",
        ),
        ("name: x\nworkloads: [{type: scan}]\n", "x.yaml: dataset: missing"),
        (
            H + "knobs: {page_size: [3000]}\n" + SCAN,
            "x.yaml: knobs.page_size: 3000 must be a power of two (allowed: integer 512..65536",
        ),
        (
            H + "knobs: {page_size: [131072]}\n" + SCAN,
            "x.yaml: knobs.page_size: 131072 out of range (allowed: integer 512..65536",
        ),
        (
            H + "knobs: {prefetch_size: [4]}\n" + SCAN,
            "x.yaml: knobs.prefetch_size: sqlite cannot express knob 'prefetch_size'",
        ),
        (
            H + "fixed: {lock_granularity: row}\n" + SCAN,
            "x.yaml: fixed.lock_granularity: 'row' not allowed (allowed: database)",
        ),
        (
            "name: x\ndataset: {rows: 1000}\nworkloads: [{type: range, selectivity: 1.5}]\n",
            "x.yaml: workloads[0].selectivity: 1.5 out of range (allowed: 0 < s <= 1)",
        ),
        (
            "name: x\ndataset: {rows: 1000}\nworkloads: [{type: insert, rows: 2000}]\n",
            "x.yaml: workloads[0].rows: 2000 exceeds dataset.rows (1000)",
        ),
        ("name: x\ndataset: {rows: 1000\n", "x.yaml: line 3: not valid YAML"),
        ("- just\n- a list\n", "x.yaml: a sweep file must be a mapping of keys"),
        (
            "name: x\nengines: [mariadb]\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\n",
            "x.yaml: engines: this sweep does not run on sqlite (allowed: mariadb)",
        ),
        (
            "name: x\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\ncache: [cold, warm]\n",
            "x.yaml: cache: ['cold', 'warm'] not allowed (allowed: cold, warm, both)",
        ),
    ],
)
def test_each_error_names_file_field_and_what_is_allowed(write_sweep, body, expected):
    path = write_sweep(body, "x.yaml")
    got = messages(path, "sqlite")
    assert any(m.startswith(str(path.parent / expected)) for m in got), got


def test_every_error_of_every_file_is_reported_in_one_call(write_sweep, capsys):
    a = write_sweep(
        "name: a\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\ncache: hot\n"
        "knobs: {page_size: [3]}\n",
        "a.yaml",
    )
    b = write_sweep(
        "name: b\ndataset: {rows: 1000}\nknobs: {buffer_pool: [0], page_size: [7]}\n"
        "workloads: [{type: scan}]\n",
        "b.yaml",
    )
    assert main(["validate", str(a), str(b)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith(f"{a}: cache: 'hot' not allowed") for line in err)
    assert any(line.startswith(f"{a}: knobs.page_size: 3 out of range") for line in err)
    assert any(line.startswith(f"{b}: knobs.buffer_pool: 0 out of range") for line in err)
    assert any(line.startswith(f"{b}: knobs.page_size: 7 out of range") for line in err)


def test_duplicate_sweep_names_are_refused(write_sweep):
    body = "name: same\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\n"
    a, b = write_sweep(body, "a.yaml"), write_sweep(body, "b.yaml")
    errors = spec.validate_files([a, b]).errors
    assert [str(e) for e in errors] == [f"{b}: name: 'same' is also the name of {a}"]


def test_cli_bad_input_exits_2_without_traceback(write_sweep, tmp_path):
    bad = write_sweep("name: x\ndataset: {rows: 1000}\nworkloads: [{type: scan}]\nfoo: 1\n")
    for args in (
        ["validate", str(bad)],
        ["plan", str(bad)],
        ["validate", str(tmp_path / "nope.yaml")],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "tunelab.cli", *args], capture_output=True, text=True
        )
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr
        assert proc.stderr.count("\n") >= 1 and proc.stderr.startswith(str(tmp_path))


def test_plan_prints_one_json_point_per_line(write_sweep, capsys):
    path = write_sweep(GOOD)
    assert main(["plan", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 36
    import json

    first = json.loads(lines[0])
    assert set(first) >= {"point_id", "engine", "knobs", "workload", "cache", "repetitions"}


def test_engines_lists_knobs_and_says_sqlite_locks_the_database(capsys):
    assert main(["engines", "--json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    lock = next(r for r in rows if r["engine"] == "sqlite" and r["knob"] == "lock_granularity")
    assert lock["allowed"] == "database" and "whole database" in lock["meaning"]
    prefetch = [r for r in rows if r["engine"] == "sqlite" and r["knob"] == "prefetch_size"]
    assert prefetch and prefetch[0]["allowed"] == "not a knob"


def test_the_default_sweep_pack_is_valid():
    from tests.conftest import REPO
    from tunelab.run import pipeline

    pattern = str(REPO / "workflows" / "sweeps" / "*.yaml")
    for engine in ("sqlite", "mariadb", "db2"):
        try:
            plan = pipeline.plan(pattern, engine)
        except ModuleNotFoundError:  # an engine module not installed with this checkout
            continue
        assert len(plan.sweeps) >= 5, engine


def test_engines_table_prints_every_engine(capsys):
    assert main(["engines"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("sqlite", "mariadb", "db2"))


def test_preflight_says_what_an_engine_lacks_before_anything_starts(capsys):
    assert main(["preflight", "sqlite"]) == 0
    code = main(["preflight", "db2"])
    out, err = capsys.readouterr()
    if code == 2:  # no DB2 image on this host: the line names it and how to get it
        assert "docker pull icr.io/db2_community/db2:" in err and "Traceback" not in err
    else:
        assert code == 0 and "engine db2: ready" in out


def test_a_warning_is_one_line_beside_the_errors_and_never_an_error(write_sweep, capsys):
    text = """
        name: w
        engines: [db2]
        dataset: {rows: 1000}
        knobs: {prefetch_size: [48]}
        fixed: {extent_size: 32}
        workloads: [{type: scan}]
    """
    good = write_sweep(text, "good.yaml")
    bad = write_sweep(text.replace("name: w", "name: v").replace("[48]", "[48, 0]"), "bad.yaml")
    found = spec.validate_files([good, bad], "db2")
    assert [str(w) for w in found.warnings] == [
        f"{good}: knobs.prefetch_size: warning: 48 is not a multiple of extent_size 32 "
        "(IBM advises 32, 64, 96, ... or automatic)",
        f"{bad}: knobs.prefetch_size: warning: 48 is not a multiple of extent_size 32 "
        "(IBM advises 32, 64, 96, ... or automatic)",
    ]
    assert [e.file for e in found.errors] == [str(bad)] and list(found.points) == ["w"]
    assert main(["validate", "--engine", "db2", str(good), str(bad)]) == 2  # the error decides
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and sum(": warning: " in line for line in err) == 2
