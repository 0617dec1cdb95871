"""Files the wall clock left in the future are dated now; every other file keeps its time."""

from __future__ import annotations

import os

from tunelab.host import clockstep
from tunelab.run import workflow

NOW = 1_800_000_000.0


def dated(path, mtime):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    os.utime(path, (mtime, mtime))
    return path


def test_files_dated_after_now_are_dated_now_and_the_rest_keep_their_time(tmp_path):
    future = dated(tmp_path / "results" / "sqlite" / "a.csv", NOW + 3600)
    deep = dated(tmp_path / "results" / "sqlite" / "points" / "b.csv", NOW + 10)
    past = dated(tmp_path / "results" / "c.csv", NOW - 5)
    single = dated(tmp_path / "sweep.yaml", NOW + 60)
    changed = clockstep.date_future_files_now(
        [tmp_path / "results", single, tmp_path / "missing"], now=NOW
    )
    assert changed == 3
    assert os.stat(future).st_mtime == os.stat(deep).st_mtime == os.stat(single).st_mtime == NOW
    assert os.stat(past).st_mtime == NOW - 5


def test_a_symlink_is_dated_itself_and_its_target_outside_is_left(tmp_path):
    outside = dated(tmp_path / "outside" / "data.csv", NOW + 3600)
    (tmp_path / "run").mkdir()
    link = tmp_path / "run" / "data.csv"
    link.symlink_to(outside)
    os.utime(link, (NOW + 3600, NOW + 3600), follow_symlinks=False)
    assert clockstep.date_future_files_now([tmp_path / "run"], now=NOW) == 1
    assert os.lstat(link).st_mtime == NOW
    assert os.stat(outside).st_mtime == NOW + 3600


def test_the_run_names_its_directories_sweeps_calibration_and_workflow_files(tmp_path):
    config = {
        "results_dir": "r",
        "reports_dir": "p",
        "logs_dir": "l",
        "data_dir": "d",
        "traces_dir": "t",
        "sweeps": "workflows/sweeps/*.yaml",
        "workdir": ".tunelab",
    }
    roots = workflow.run_files(config, str(tmp_path))
    for name in ("r", "p", "l", "d", "t", "workflows/sweeps"):
        assert os.path.abspath(name) in roots
    assert str(tmp_path / "workflows") in roots and str(tmp_path / "reports") in roots
    assert any(r.endswith(".json") for r in roots)  # the calibration file
    assert len(roots) == len(set(roots))
