"""workflows/calibrate.smk: the rule Snakemake sees, and the config helpers behind it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tunelab.calibrate import default_path, workflow

SMK = Path(__file__).resolve().parents[1] / "workflows" / "calibrate.smk"


def dry_run(tmp_path: Path, *config: str) -> str:
    (tmp_path / "Snakefile").write_text(
        f'include: "{SMK}"\n\n\nrule all:\n    input:\n        calibration_input,\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1", "--config", *config],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def test_rule_writes_the_per_host_file_through_the_cli(tmp_path):
    wd = tmp_path / "engine-data"
    text = dry_run(tmp_path, f"workdir={wd}", "calibrate=quick")
    target = default_path(wd)
    assert f"output: {target}" in text
    assert f"logs/calibrate/{target.stem}.log" in text
    assert f"tunelab calibrate --dir {wd} --quick --force --out {target}" in text


def test_full_mode_has_no_quick_flag_and_off_wants_no_file(tmp_path):
    assert "--quick" not in dry_run(tmp_path, "calibrate=full")
    assert "rule calibrate" not in dry_run(tmp_path, "calibrate=off")


def test_config_helpers():
    assert workflow.mode({}) == "quick"
    assert workflow.mode({"calibrate": False}) == "off"
    assert workflow.input_function({"calibrate": "off"})(None) == []
    assert workflow.input_function({"workdir": "w"})(None) == [str(default_path("w"))]
    assert workflow.log_path({"logs_dir": "L", "workdir": "w"}).startswith("L/calibrate/")
    with pytest.raises(ValueError, match="allowed: quick, full, off"):
        workflow.mode({"calibrate": "fast"})
