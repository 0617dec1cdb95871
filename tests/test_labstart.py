"""The run's start in one process (tunelab.run.labstart): a check that fails ends it before
Snakemake, with the check's own exit status and lines, and the file that says the sweeps
started is never made."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_interrupts import SWEEP  # a one-point SQLite sweep

from tunelab.run import labstart

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # as ./lab starts it: the profile and the Snakefile are here
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "started.yaml").write_text(SWEEP)
    return tmp_path


def start(work: Path, fields: Path, *config: str) -> int:
    return labstart.main(
        [
            "--fields",
            str(fields),
            "--started",
            str(work / "started"),
            "--",
            "--profile",
            "workflows/profile",
            "--directory",
            str(work),
            "--config",
            f"sweeps={work}/sweeps/*.yaml",
            "engine=sqlite",
            "calibrate=off",
            *config,
        ]
    )


def test_an_invalid_sweep_ends_the_start_with_2_and_its_line(work, capsys):
    (work / "sweeps" / "started.yaml").write_text(SWEEP.replace("cache: warm", "cache: hot"))
    assert start(work, work / "fields") == 2
    err = capsys.readouterr().err
    assert [ln for ln in err.splitlines() if "cache" in ln and "[lab]" not in ln], err
    assert "running the sweeps" not in err
    assert (work / "fields").read_bytes().split(b"\0")[0] == b"sqlite"  # read before the check
    assert not (work / "started").exists()


def test_the_hosts_error_in_the_start_is_one_line_not_a_traceback(work, capsys):
    fields = work / "fields-dir"
    fields.mkdir()  # the fields cannot be written there
    assert start(work, fields) == 1
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    assert line.startswith("tunelab: the run's start failed: IsADirectoryError"), err
    assert not (work / "started").exists()


def test_bad_arguments_end_the_start_with_2_before_anything_is_written(work, capsys):
    assert start(work, work / "fields", "engine=nosuch") == 2
    assert "config engine: 'nosuch' not allowed" in capsys.readouterr().err
    assert not (work / "fields").exists() and not (work / "started").exists()
