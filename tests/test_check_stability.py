"""`tunelab check RUN...` over several runs of the same sweeps: each claim's verdict per run
and pooled, the exit status, bad input, and the index showing the stability. The runs are
synthetic result directories whose timings are drawn around chosen medians."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tunelab.report.index import write_index
from tunelab.run import check

SWEEP = """\
name: tiny
description: three index layouts, cold multipoint
engines: [sqlite]
dataset: {rows: 100000, seed: 5}
knobs:
  index: [none, covering, nonclustered]
workloads:
  - type: multipoint
    queries: 3
cache: cold
repetitions: 6
expect:
  - {kind: lower, a: {index: covering}, b: {index: none}, says: covering beats a scan}
  - {kind: lower, a: {index: nonclustered}, b: {index: none}, says: nonclustered beats a scan}
"""
CLEAR = {"none": 0.1, "covering": 0.02, "nonclustered": 0.05}  # both claims hold
NO_EFFECT = {**CLEAR, "nonclustered": 0.1}  # the second claim: similar (no effect, shown)


def sweep_file(root: Path) -> Path:
    path = root / "tiny.yaml"
    if not path.exists():
        path.write_text(SWEEP)
    return path


def sweep_rows(sweep: Path, medians: dict[str, float], name: str = "tiny", seed: int = 1):
    """Six cold repetitions per index layout, lognormal around ``medians`` (seconds)."""
    rng = np.random.default_rng(seed)
    out = []
    for index, median in medians.items():
        for rep, t in enumerate(rng.lognormal(np.log(median), 0.03, 6)):
            out.append(
                {
                    "sweep": name,
                    "sweep_file": str(sweep),
                    "engine": "sqlite",
                    "point_id": f"index-{index}",
                    "knob_index": index,
                    "workload": "multipoint",
                    "cache_requested": "cold",
                    "cache_achieved": "cold",
                    "dataset_rows": 100000,
                    "seed": 5,
                    "rep": rep,
                    "elapsed_s": t,
                    "access_path": "scan" if index == "none" else "index:ix",
                    "access_expected": "scan" if index == "none" else "index:ix",
                    "access_matches": True,
                    "client_share": 0.1,
                    "started_at": f"2025-01-01T10:{rep:02d}:00+00:00",
                }
            )
    return pd.DataFrame(out)


def write_run(run: Path, medians: dict[str, float], seed: int = 1, extra: str = "") -> Path:
    """A run's folder as ./lab run leaves it: RUN/results/sqlite/<sweep>.csv (and a second
    sweep named ``extra`` when given); returns RUN/results."""
    sweep = sweep_file(run.parent)
    engine_dir = run / "results" / "sqlite"
    engine_dir.mkdir(parents=True)
    sweep_rows(sweep, medians, seed=seed).to_csv(engine_dir / "tiny.csv", index=False)
    if extra:
        sweep_rows(sweep, medians, extra, seed).to_csv(engine_dir / f"{extra}.csv", index=False)
    return run / "results"


def runs(tmp_path: Path, *medians: dict[str, float]) -> list[Path]:
    return [write_run(tmp_path / f"run-{i}", m) for i, m in enumerate(medians, 1)]


def run_check(capsys, *args) -> tuple[int, list[str], str]:
    code = check.check_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out.strip().splitlines(), err


def test_the_same_verdicts_in_every_run_are_stable_and_exit_0(tmp_path, capsys):
    dirs = runs(tmp_path, CLEAR, CLEAR, CLEAR)
    code, lines, _ = run_check(capsys, *dirs)
    assert lines[:3] == [f"run {i}: {d}" for i, d in enumerate(dirs, 1)]
    assert "sqlite/tiny: covering beats a scan: holds in 3 of 3 runs" in lines
    assert "sqlite/tiny: nonclustered beats a scan: holds in 3 of 3 runs" in lines
    assert lines[-1] == "claims stable in all 3 runs: 2 of 2 (2 holds)"
    assert code == 0


def test_a_claim_that_flips_between_runs_is_unstable_and_exits_1(tmp_path, capsys):
    dirs = runs(tmp_path, CLEAR, NO_EFFECT, CLEAR)
    out = tmp_path / "stability.json"
    code, lines, _ = run_check(capsys, *dirs, "--stability-out", out)
    assert "sqlite/tiny: covering beats a scan: holds in 3 of 3 runs" in lines
    assert (
        "sqlite/tiny: nonclustered beats a scan: unstable: holds 2, does not hold 1 "
        "(run 1 holds, run 2 does not hold, run 3 holds)"
    ) in lines
    assert lines[-1] == "claims stable in all 3 runs: 1 of 2 (1 holds)"
    assert code == 1
    doc = json.loads(out.read_text())
    assert doc["runs"] == [str(d) for d in dirs] and (doc["stable"], doc["claims"]) == (1, 2)
    flipped = doc["sweeps"][0]["claims"][1]
    assert flipped["verdicts"] == ["holds", "does not hold", "holds"]
    assert flipped["stable"] is False and flipped["agreement"] == pytest.approx(2 / 3)
    assert run_check(capsys, *dirs, "--no-fail")[0] == 0


def test_an_engine_folder_is_a_run_too_and_one_folder_keeps_the_single_run_output(tmp_path, capsys):
    a, b = runs(tmp_path, CLEAR, CLEAR)
    code, lines, _ = run_check(capsys, a, b / "sqlite")
    assert code == 0 and lines[-1].startswith("claims stable in all 2 runs: 2 of 2")
    code, lines, _ = run_check(capsys, a)
    assert lines[0].startswith("tiny: covering beats a scan: holds (")
    assert len(lines) == 2 and code == 0
    # one CSV as before: the same lines
    assert run_check(capsys, a / "sqlite" / "tiny.csv")[1] == lines


def test_verdict_names_are_ordered_as_claims_lists_them_whatever_they_are(monkeypatch):
    c = check.ClaimStability("e", "s", "says", "similar", ["undecided", "not reproduced", "odd"])
    assert list(c.counts) == ["not reproduced", "undecided", "odd"]  # claim_verdict.WORDS' order
    assert c.pooled == "unstable: not reproduced 1, undecided 1, odd 1"
    assert c.agreement == pytest.approx(1 / 3) and not c.stable
    same = check.ClaimStability("e", "s", "says", "similar", ["similar"] * 5)
    assert same.stable and same.agreement == 1.0 and same.pooled == "similar in 5 of 5 runs"


@pytest.mark.parametrize(
    "case, expected",
    [
        (
            "other sweeps",
            "run-2/results: not the same sweeps as {a} (not in the first: sqlite/extra)",
        ),
        ("missing dir", "nowhere: no such file or directory"),
        ("csv and dir", "give result CSVs or results directories, not both"),
        ("empty dir", "empty: no result CSVs"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, case, expected):
    a = write_run(tmp_path / "run-1", CLEAR)
    args = {
        "other sweeps": [a, write_run(tmp_path / "run-2", CLEAR, extra="extra")],
        "missing dir": [a, tmp_path / "nowhere"],
        "csv and dir": [a, a / "sqlite" / "tiny.csv"],
        "empty dir": [a, tmp_path / "empty"],
    }[case]
    (tmp_path / "empty").mkdir()
    code, lines, err = run_check(capsys, *args)
    assert code == 2 and lines == []
    assert expected.format(a=a) in err and len(err.strip().splitlines()) == 1


def test_the_command_line_refuses_runs_of_different_sweeps_without_a_traceback(tmp_path):
    a = write_run(tmp_path / "run-1", CLEAR)
    b = write_run(tmp_path / "run-2", CLEAR, extra="extra")
    proc = subprocess.run(
        [sys.executable, "-m", "tunelab.cli", "check", str(a), str(b)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"{b}: not the same sweeps as {a} (not in the first: sqlite/extra)"
    )


# -- the index -------------------------------------------------------------------------------
def index_page(tmp_path: Path, stability: Path | None) -> str:
    report = tmp_path / "reports" / "sqlite" / "tiny.html"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("<html><body>a report</body></html>")
    out = tmp_path / "reports" / "index.html"
    if stability is not None:
        stability.replace(out.parent / "stability.json")
    return write_index([report], out, tmp_path).read_text()


def test_the_index_names_the_claims_that_changed_between_runs(tmp_path, capsys):
    dirs = runs(tmp_path, CLEAR, NO_EFFECT, CLEAR)
    run_check(capsys, *dirs, "--stability-out", tmp_path / "s.json")
    page = index_page(tmp_path, tmp_path / "s.json")
    assert "1 of 2 claims unstable over 3 runs" in page
    assert "nonclustered beats a scan: unstable: holds 2, does not hold 1" in page
    assert "Claims checked over 3 runs" in page and "1 of 2 reached the same verdict" in page


def test_the_index_says_when_every_run_agreed_and_nothing_for_one_run(tmp_path, capsys):
    dirs = runs(tmp_path, CLEAR, CLEAR)
    run_check(capsys, *dirs, "--stability-out", tmp_path / "s.json")
    page = index_page(tmp_path, tmp_path / "s.json")
    assert "same verdicts in 2 of 2 runs" in page and "unstable" not in page.split("</style>")[1]
    run_check(capsys, dirs[0], "--stability-out", tmp_path / "one.json")
    assert json.loads((tmp_path / "one.json").read_text())["runs"] == [str(dirs[0])]
    page = index_page(tmp_path, tmp_path / "one.json")
    assert "tl-stability" not in page.split("</style>")[1]
