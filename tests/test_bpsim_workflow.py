"""workflows/bpsim.smk: lint clean, and it turns a trace into a curve through the CLI."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tunelab.bpsim import generators
from tunelab.bpsim.traces import write_trace

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tunelab_has_bpsim() -> bool:
    exe = BIN / "tunelab"
    if not exe.exists():
        return False
    done = subprocess.run([str(exe), "bpsim", "--help"], capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture()
def workdir(tmp_path):
    (tmp_path / "workflows").mkdir()
    shutil.copy(REPO / "workflows" / "bpsim.smk", tmp_path / "workflows" / "bpsim.smk")
    shutil.copy(REPO / "environment.yml", tmp_path / "environment.yml")  # the rule's conda:
    (tmp_path / "Snakefile").write_text('include: "workflows/bpsim.smk"\n')
    return tmp_path


def _snakemake(workdir, *args):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(BIN / "snakemake"), *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_lint_clean(workdir):
    done = _snakemake(workdir, "--lint")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(not _tunelab_has_bpsim(), reason="`tunelab bpsim` is not wired yet")
def test_rule_writes_curve_and_summary(workdir):
    trace = generators.scan_mixed(50, 400, 5000, seed=1)
    trace.meta["duration_s"] = 5.0
    write_trace(workdir / "traces" / "mix.trace.npz", trace)
    done = _snakemake(
        workdir, "-c1", "results/bpsim/mix.csv", "--config", "bpsim={mix: '--knee-share 0.1'}"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    curve = pd.read_csv(workdir / "results" / "bpsim" / "mix.csv")
    assert curve["pool_pages"].tolist() == list(range(1, 451))
    assert (curve["hit_ratio_sys"] <= curve["hit_ratio_app"]).all()
    assert '"knee_share": 0.1' in (workdir / "results" / "bpsim" / "mix.json").read_text()
    assert "references" in (workdir / "logs" / "bpsim" / "mix.log").read_text()
