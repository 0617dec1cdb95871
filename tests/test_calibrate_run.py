"""Real fio runs: a short calibration on ext4 and tmpfs, the direct-I/O refusal path on ramfs,
and the command line's errors. Needs fio (`apt-get install fio`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_fio_plan
from tunelab.calibrate import cli, fio, load, measure, save
from tunelab.calibrate.calibration import Calibration

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")

TINY = tiny_fio_plan()


def odirect_accepted(directory: Path) -> bool:
    """Independent of the code under test: can a file here be opened with O_DIRECT?"""
    path = directory / "odirect-check"
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600))
        return True
    except OSError:
        return False
    finally:
        path.unlink(missing_ok=True)


def findmnt_fstype(path: Path) -> str:
    out = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()[-1]  # with mounts stacked on one point, the last is visible


def check_shape(cal: Calibration, directory: Path) -> None:
    assert [m["name"] for m in cal.measurements] == [j.name for j in TINY.jobs()]
    assert all(len(m["lat_mean_ms"]) == TINY.repetitions for m in cal.measurements)
    assert cal.device_read_rate_mb_s > 0 and cal.overhead_ms >= 0
    assert sorted(cal.transferrate_ms) == [4096, 8192, 16384, 32768]
    assert sorted(cal.overhead_ms_by_page) == [4096, 8192]
    assert cal.write_fit_r2 is not None and cal.write_fit_r2 <= 1.0
    assert not list(directory.glob(".tunelab-*"))  # fio file and probe file removed


@needs_fio
def test_short_real_run_on_the_lab_filesystem(tmp_path):
    cal = measure.calibrate(tmp_path, TINY)
    check_shape(cal, tmp_path)
    assert cal.filesystem == findmnt_fstype(tmp_path)
    assert cal.direct_io == odirect_accepted(tmp_path)
    assert cal.fio_version.startswith("fio-")
    assert load(save(cal, tmp_path / "cal.json")) == cal


@needs_fio
def test_tmpfs_is_named_and_memory_residency_flagged():
    shm = Path("/dev/shm")
    if not shm.is_dir() or findmnt_fstype(shm) != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    directory = Path(os.environ.get("TMPFS_DIR", shm)) / f"tunelab-test-{os.getpid()}"
    directory.mkdir()
    try:
        cal = measure.calibrate(directory, TINY)
        check_shape(cal, directory)
        assert cal.filesystem == "tmpfs"
        # tmpfs takes O_DIRECT since Linux 6.6 and refused it before; either way the record
        # must say which, and a refusal must name the filesystem
        assert cal.direct_io == odirect_accepted(directory)
        if not cal.direct_io:
            assert "tmpfs" in cal.direct_io_note
        # tmpfs pages cannot leave memory: the reads did not touch a device
        assert cal.resident_fraction == 1.0
        assert any("stayed in memory" in w for w in cal.warnings)
    finally:
        shutil.rmtree(directory)


@pytest.fixture
def ramfs(tmp_path):
    """A ramfs mount, a filesystem that refuses O_DIRECT on every kernel."""
    point = tmp_path / "ramfs"
    point.mkdir()
    done = subprocess.run(["mount", "-t", "ramfs", "ramfs", str(point)], capture_output=True)
    if done.returncode:
        pytest.skip("cannot mount a ramfs here (needs root)")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=True)


@needs_fio
def test_direct_io_refusal_falls_back_to_buffered(ramfs, tmp_path, monkeypatch, capsys):
    probe = fio.probe_direct_io(ramfs)
    assert (probe.ok, probe.filesystem) == (False, "ramfs")
    assert probe.reason == "Invalid argument"

    monkeypatch.setattr(measure, "QUICK_PLAN", TINY)
    out = tmp_path / "cal.json"
    assert cli.main(["--dir", str(ramfs), "--quick", "--json", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["direct_io"] is False and doc["filesystem"] == "ramfs"
    assert "the ramfs filesystem" in doc["direct_io_note"]
    assert "refuses direct I/O" in captured.err and "buffered" in captured.err
    assert any("refuses direct I/O" in w for w in doc["warnings"])
    assert load(out).direct_io is False
    assert not list(ramfs.iterdir())


def test_fio_missing_says_how_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without fio
    assert cli.main(["--dir", str(tmp_path), "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "fio is not installed" in err and "apt-get install fio" in err and "conda-forge" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--dir", "/nonexistent/tunelab"], "--dir /nonexistent/tunelab: no such directory"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_are_one_line(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_existing_calibration_is_reused_without_measuring(tmp_path, monkeypatch, capsys):
    from test_calibrate_api import make

    out = save(make(), tmp_path / "cal.json")
    monkeypatch.setenv("PATH", str(tmp_path))  # fio unreachable: reuse must not need it
    assert cli.main(["--dir", str(tmp_path), "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == json.loads(out.read_text())
    assert "--force measures again" in captured.err


def test_broken_calibration_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "cal.json"
    bad.write_text("{}")
    assert cli.main(["--dir", str(tmp_path), "--out", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "missing field" in err


def test_module_entry_point(tmp_path):
    run = [sys.executable, "-m", "tunelab.calibrate.cli"]
    ok = subprocess.run([*run, "--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "--quick" in ok.stdout
    bad = subprocess.run([*run, "--dir", str(tmp_path / "none")], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().endswith("no such directory")


def test_filesystem_from_mountinfo(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text(
        "22 1 0:1 / / rw - ext4 /dev/vda rw\n"
        "30 22 0:2 / /data\\040dir rw - xfs /dev/vdb rw\n"
        "31 30 0:3 / /data\\040dir/fast rw shared:1 - tmpfs tmpfs rw\n"
        "32 22 0:4 / /data\\040dirx rw - btrfs /dev/vdc rw\n"
    )
    assert fio.filesystem_of(Path("/data dir/x"), info) == "xfs"
    assert fio.filesystem_of(Path("/data dir/fast/y"), info) == "tmpfs"
    assert fio.filesystem_of(Path("/data dirx"), info) == "btrfs"
    assert fio.filesystem_of(Path("/elsewhere"), info) == "ext4"


@needs_fio
@pytest.mark.slow
def test_quick_command_line_run(tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert cli.main(["--dir", str(tmp_path), "--quick", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ALTER STOGROUP IBMSTOGROUP OVERHEAD" in text and "DEVICE READ RATE" in text
    cal = load(out)
    assert cal.quick and cal.plan["runtime_ms"] == measure.QUICK_PLAN.runtime_ms
    assert len(cal.measurements) == len(measure.QUICK_PLAN.jobs())
    assert not list(tmp_path.glob(".tunelab-*"))


@needs_fio
def test_a_colon_in_the_path_is_one_file_to_fio_and_its_neighbour_survives(tmp_path, monkeypatch):
    """fio reads a colon in filename= as a list of files: under `…/run:10` it would write
    `…/run` (the user's file beside the checkout) and `10/…` where it ran."""
    monkeypatch.chdir(tmp_path)
    neighbour = tmp_path / "run"
    neighbour.write_bytes(b"the user's results\n")
    directory = tmp_path / "run:10"
    directory.mkdir()
    try:
        cal = measure.calibrate(directory, TINY)
    finally:  # whether fio then failed or not
        assert neighbour.read_bytes()[:40] == b"the user's results\n"
    check_shape(cal, directory)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "run:10"]
