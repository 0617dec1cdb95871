"""Counts a sweep may ask for, bounded where they are validated: a value that would fail once
the run has started (or never end) is one line naming file and field, exit 2, before
anything starts. The same reader, with its limits, reads every YAML file of the lab."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_input_safety import alias_bomb, billion_laughs, one_line, validate
from tunelab.cli import main

BASE = "name: x\nengines: [{engine}]\ndataset: {{rows: 1000, seed: 1}}\n"


def sweep(body: str, engine: str = "sqlite") -> str:
    return BASE.format(engine=engine) + body


@pytest.mark.parametrize(
    ("body", "lines"),
    [
        (
            sweep("workloads: [{type: point, lookups: 1000000000000}]\n"),
            ["workloads[0].lookups: 1000000000000 out of range (allowed: 1..1000000)"],
        ),
        (
            sweep("workloads: [{type: insert, rows: 1000, threads: 100000}]\n"),
            ["workloads[0].threads: 100000 out of range (allowed: 1..64)"],
        ),
        (
            sweep("workloads: [{type: multipoint, queries: 101}]\n"),
            ["workloads[0].queries: 101 out of range (allowed: 1..100)"],
        ),
        (
            sweep("workloads: [{type: range, queries: [1, 10001]}]\n"),
            ["workloads[0].queries: 10001 out of range (allowed: 1..10000)"],
        ),
        (
            sweep("workloads: [{type: scan}]\n").replace("rows: 1000,", "rows: 100000000,"),
            ["dataset.rows: 100000000 out of range (allowed: <= 10000000)"],
        ),
        (
            sweep("workloads: [{type: scan}]\n").replace("rows: 1000,", "rows: 1000.0,"),
            ["dataset.rows: 1000.0 has the wrong type (allowed: integer)"],
        ),
        (
            sweep("workloads: [{type: point, lookups: 1000.0}]\n"),
            ["workloads[0].lookups: 1000.0 is not valid (allowed: an integer or a list)"],
        ),
        (
            sweep("knobs: {buffer_pool: [64.0, 128]}\nworkloads: [{type: scan}]\n"),
            ["knobs.buffer_pool: 64.0 must be an integer (allowed: integer 1..10000000"],
        ),
        (
            sweep("workloads: [{type: scan}]\n1: a\nzz: b\nnull: c\n"),
            [
                "1: unknown key (allowed: access, cache",
                "None: unknown key (allowed: access",
                "zz: unknown key (allowed: access",
            ],
        ),
        (
            sweep("workloads: [{type: scan, 7: a, zz: b}]\n"),
            [
                "workloads[0].7: unknown key (allowed: fetch, type)",
                "workloads[0].zz: unknown key (allowed: fetch, type)",
            ],
        ),
        (
            sweep("fixed: {network_rtt_ms: .nan}\nworkloads: [{type: scan}]\n", "postgres"),
            ["fixed.network_rtt_ms: '.nan' is not a finite number"],
        ),
        (
            sweep("fixed: {overhead_ms: .inf}\nworkloads: [{type: scan}]\n", "db2"),
            ["fixed.overhead_ms: '.inf' is not a finite number"],
        ),
        (
            sweep("workloads: [{type: range, selectivity: [0.1, -.inf]}]\n"),
            ["workloads[0].selectivity[1]: '-.inf' is not a finite number"],
        ),
        (
            sweep("workloads: [{type: point, lookups: 1.0e+999}]\n"),
            ["workloads[0].lookups: '1.0e+999' is not a finite number"],
        ),
        # cold: an eviction before every timed statement, so no more than 100 of them
        (
            sweep("workloads: [{type: point, lookups: 5000}]\ncache: cold\n"),
            ["workloads[0].lookups: 5000 timed statements cannot each meet a cold cache"],
        ),
        (
            sweep("workloads: [{type: point, lookups: 5000, batch: 10}]\ncache: both\n"),
            ["workloads[0].lookups: 500 timed statements cannot each meet a cold cache"],
        ),
        (
            sweep("workloads: [{type: scan}, {type: range, queries: [100, 101]}]\n"),
            [
                "workloads[1].queries: 101 timed statements cannot each meet a cold cache (cache: "
                "cold evicts before every statement, untimed) (allowed: at most 100 statements a "
                "cold repetition: fewer queries, or cache: warm)"
            ],
        ),
    ],
)
def test_a_count_that_would_fail_later_is_one_line_now(write_sweep, capsys, body, lines):
    path = write_sweep(body)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    got = err.splitlines()
    assert "Traceback" not in err and len(got) == len(lines), err
    for line, want in zip(got, lines, strict=True):
        assert line.startswith(f"{path}: {want}"), err


@pytest.mark.parametrize(
    "body",
    [
        "workloads: [{type: point, lookups: 5000, batch: 5000}]\ncache: cold\n",  # one query
        "workloads: [{type: point, lookups: 5000}]\ncache: warm\n",
        "workloads: [{type: multipoint, queries: 100}]\ncache: both\n",
        "workloads: [{type: insert, rows: 1000}]\ncache: cold\n",  # timed as one, not per query
    ],
)
def test_cold_asks_for_no_more_statements_than_can_each_meet_a_cold_cache(
    write_sweep, capsys, body
):
    assert main(["validate", str(write_sweep(sweep(body)))]) == 0, capsys.readouterr().err


def test_a_pool_larger_than_the_hosts_memory_is_refused_naming_it(write_sweep, capsys):
    gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    pool = f"{int(gib) + 8}GiB"
    path = write_sweep(
        sweep(f"fixed: {{buffer_pool: {pool}}}\nworkloads: [{{type: scan}}]\n", "postgres")
    )
    assert main(["validate", str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    pages = (int(gib) + 8) * 2**30 // 8192
    assert line == (
        f"{path}: fixed.buffer_pool: a pool of {pages} pages of 8192 bytes is "
        f"{int(gib) + 8}.0 GiB, more than this host's memory ({gib:.1f} GiB) "
        "(allowed: at most the host's memory)"
    )
    # In pages, at the engine's own page size, the same.
    path = write_sweep(
        sweep(f"fixed: {{buffer_pool: {pages}}}\nworkloads: [{{type: scan}}]\n", "postgres")
    )
    assert main(["validate", str(path)]) == 2
    assert "more than this host's memory" in capsys.readouterr().err


@pytest.fixture
def small_disk(tmp_path: Path):
    """A folder on a file system of 1 MiB (tmpfs; mounting needs root)."""
    folder = tmp_path / "small"
    folder.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {proc.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_data_set_larger_than_the_free_disk_is_refused_naming_the_folder(small_disk, write_sweep):
    body = sweep("workloads: [{type: scan}]\n").replace("rows: 1000,", "rows: 100000,")
    path = write_sweep(body)
    data = small_disk / "data"  # made by the run: its parent's free space counts
    proc = subprocess.run(
        [sys.executable, "-m", "tunelab.cli", "validate", "--data-dir", str(data), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"{path}: dataset.rows: 100000 rows need about 14.1 MiB in {data}/,")
    assert line.endswith(" MiB free (allowed: fewer rows, or more free space)")
    # Where the data set is made already, nothing more is asked of the disk.
    data.mkdir()
    (data / "accounts-v1-r100000-s1.csv").write_text("made\n")
    assert main(["validate", "--data-dir", str(data), str(path)]) == 0


WORKFLOWS = Path(__file__).resolve().parents[1] / "workflows"
FIRST = "  - id: insert-page-size\n"  # the findings file's first finding


@pytest.mark.parametrize(
    ("edit", "field", "said"),
    [
        (
            ("findings:\n", f"findings: {alias_bomb()}\nunused:\n"),
            "findings[0]",
            "YAML anchors and aliases are not allowed (found &a)",
        ),
        (("alpha: 0.05", "alpha: .nan"), "rules.alpha", "'.nan' is not a finite number"),
        ((FIRST, FIRST + "    1: x\n    zz: y\n"), "findings[0]", "unknown key(s): 1, zz"),
    ],
)
def test_the_findings_file_is_read_by_the_sweeps_reader(tmp_path, edit, field, said):
    text = (WORKFLOWS / "findings.yaml").read_text()
    assert text.count(edit[0]) == 1
    (tmp_path / "findings.yaml").write_text(text.replace(*edit))
    (tmp_path / "sweeps").mkdir()
    sweep_file = tmp_path / "sweeps" / "scan-vs-page-size.yaml"
    sweep_file.write_text((WORKFLOWS / "sweeps" / "scan-vs-page-size.yaml").read_text())
    proc, took = validate(str(sweep_file))
    line = one_line(proc, tmp_path / "findings.yaml")
    assert proc.returncode == 2 and took < 5
    assert line.startswith(f"{tmp_path / 'findings.yaml'}: {field}: {said}"), line


def test_a_reports_sweep_file_is_read_by_the_sweeps_reader(tmp_path):
    bomb = tmp_path / "lol.yaml"
    bomb.write_text(billion_laughs("lookups"))
    rows = tmp_path / "rows.csv"
    rows.write_text("sweep,elapsed_s\nlol,1.0\n")
    cmd = [
        sys.executable,
        "-m",
        "tunelab.cli",
        "report",
        "--results",
        str(rows),
        "--sweep",
        str(bomb),
        "--out",
        str(tmp_path / "lol.html"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"tunelab report: error: {bomb}: workloads[0].lookups[0]: YAML anchors and aliases are "
        "not allowed (found &a)"
    ]
    assert not (tmp_path / "lol.html").exists()
