"""`./lab run` removes its own files and nothing else: its temporary files whatever $TMPDIR
holds (a space, a `$(...)`, another user's files, a link), and no folder of a work directory
it did not make. Real runs of `./lab run` that stop in the checks before the sweeps (one to
three seconds), where the run's EXIT trap removes its files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_input_safety import TINY, lab_installed

MARKER = "pwned-tmpdir"  # a `$(...)` in $TMPDIR that ran would leave it in the checkout


@pytest.fixture
def lab_ready():
    if reason := lab_installed():
        pytest.skip(reason)


def lab_run(tmpdir: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    """`./lab run ARGS`, by default with a sweep pattern that matches nothing: refused before
    the sweeps."""
    env = {**os.environ, "TMPDIR": str(tmpdir), "TUNELAB_LOCK_DIR": str(work / "lock")}
    env.pop("TUNELAB_JOB_LOG", None)
    args = args or ("--config", "sweeps=nothing/*.yaml")
    return subprocess.run(
        [str(REPO / "lab"), "run", *args], capture_output=True, text=True, timeout=300, env=env
    )


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("name", ["keep x", f"keep$(touch {MARKER})"])
def test_a_tmpdir_with_a_space_or_a_substitution_loses_nothing_but_the_labs_files(
    tmp_path, lab_ready, name
):
    neighbour = tmp_path / "keep"
    neighbour.mkdir()
    (neighbour / "file").write_text("the user's")
    tmpdir = tmp_path / name
    tmpdir.mkdir()
    try:
        proc = lab_run(tmpdir, tmp_path)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "no sweep files match" in proc.stderr
        assert not (REPO / MARKER).exists()
        assert (neighbour / "file").read_text() == "the user's"
        assert list(tmpdir.iterdir()) == []  # the run's own files went
    finally:
        (REPO / MARKER).unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's file needs root to make")
def test_a_killed_labs_files_go_but_not_another_users_or_a_link(tmp_path, lab_ready):
    pid = dead_pid()
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    target = tmp_path / "target"
    target.write_text("the user's")
    killed = tmpdir / f"tunelab-lab.{pid}.aaaaaa"
    killed.write_text("a killed lab's")
    others = tmpdir / f"tunelab-lab.{pid}.bbbbbb"
    others.write_text("another user's")
    os.chown(others, 65534, 65534)
    link = tmpdir / f"tunelab-lab.{pid}.cccccc"
    link.symlink_to(target)
    odd = tmpdir / "tunelab-lab.x.dddddd"  # no pid: not a lab's name
    odd.write_text("someone's")
    proc = lab_run(tmpdir, tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert sorted(p.name for p in tmpdir.iterdir()) == sorted([others.name, link.name, odd.name])
    assert target.read_text() == "the user's"


def test_a_work_directory_the_lab_did_not_make_is_refused_before_the_sweeps(tmp_path, lab_ready):
    """`--config workdir=~/experiments` on the user's folder: every `./lab run` recovers
    first, and recovery removed its runs/ folders that had no owner record."""
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "good.yaml").write_text(TINY.format(name="good"))
    experiments = tmp_path / "experiments"
    thesis = experiments / "runs" / "thesis-data"
    thesis.mkdir(parents=True)
    (thesis / "results.csv").write_text("the user's\n")
    config = (f"workdir={experiments}", "sweeps=sweeps/good.yaml", "calibrate=off")
    proc = lab_run(tmp_path, tmp_path, "--directory", str(tmp_path), "--config", *config)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"tunelab recover: config workdir: {experiments} holds files")
    assert (thesis / "results.csv").read_text() == "the user's\n"


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_tmpdir_that_is_no_writable_folder_is_one_line_before_anything(tmp_path, kind):
    tmpdir = tmp_path / "tmp"
    if kind == "a file":
        tmpdir.write_text("the user's")
    proc = subprocess.run(
        [str(REPO / "lab"), "run", "-n"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"TMPDIR={tmpdir} is not a writable folder" in lines[0], lines
    assert kind == "missing" or tmpdir.read_text() == "the user's"


def test_a_venv_path_with_a_colon_is_one_line_before_anything(tmp_path):
    venv = tmp_path / "run:10" / "venv"
    proc = subprocess.run(
        [str(REPO / "lab"), "run", "-n"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TUNELAB_VENV": str(venv)},
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"path {venv} has a ':'" in lines[0], lines
    assert not venv.parent.exists()
