"""benchmarks/verdict_stability.py on runs already made (--existing): synthetic result
directories (test_check_stability's), never a pack."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from test_check_stability import CLEAR, NO_EFFECT, write_run

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "verdict_stability.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("verdict_stability", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_bench(bench, capsys, *runs: Path) -> tuple[int, list[str], str]:
    code = bench.main(["--engine", "sqlite", "--existing", *map(str, runs)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def claim_lines(lines: list[str]) -> dict[str, str]:
    """claim -> "its verdicts; agreement" from the benchmark's lines."""
    found = [line.split(": ", 2) for line in lines if "; agreement " in line]
    return {claim: rest for _, claim, rest in found}


def test_identical_runs_agree_fully_and_the_aa_comparisons_flag_nothing(bench, capsys, tmp_path):
    runs = [tmp_path / f"run-{i}" for i in (1, 2, 3)]
    for r in runs:
        write_run(r, CLEAR)  # the same draws: an A/A with no noise at all
    code, lines, _ = run_bench(bench, capsys, *runs)
    found = claim_lines(lines)
    assert found == {
        "covering beats a scan": "holds, holds, holds; agreement 1.00",
        "nonclustered beats a scan": "holds, holds, holds; agreement 1.00",
    }
    pairs = [line for line in lines if line.startswith("run ") and " -> " in line]
    assert len(pairs) == 2 and all(": 3 point(s) compared" in p for p in pairs)
    assert all("0 worse, 0 better" in p for p in pairs)
    assert lines[-1].startswith("summary: 0 unstable claim(s) of 2; 0 point metric(s)")
    assert code == 0


def test_a_flipping_claim_and_the_moved_point_are_named(bench, capsys, tmp_path):
    runs = [tmp_path / f"run-{i}" for i in (1, 2, 3)]
    for r, medians in zip(runs, (CLEAR, NO_EFFECT, CLEAR), strict=True):
        write_run(r, medians)
    code, lines, _ = run_bench(bench, capsys, *runs)
    found = claim_lines(lines)
    assert found["nonclustered beats a scan"] == (
        "holds, does not hold, holds; agreement 0.67 UNSTABLE"
    )
    assert found["covering beats a scan"].endswith("agreement 1.00")
    assert "    run 2 does not hold: likely cause: no difference seen (ratio" in "\n".join(lines)
    # the nonclustered point doubled from run 1 to run 2, and halved back in run 3
    text = "\n".join(lines)
    first, second = text.split("run 1 -> run 2: ")[1], text.split("run 2 -> run 3: ")[1]
    assert "1 worse, 0 better" in first.splitlines()[0]
    assert first.splitlines()[1].startswith("  sqlite/tiny index-nonclustered: elapsed_s 2.0")
    assert ": worse (p=" in first.splitlines()[1]
    assert "0 worse, 1 better" in second.splitlines()[0]
    assert lines[-1] == (
        "summary: 1 unstable claim(s) of 2; 1 point metric(s) flagged worse in the A/A comparisons"
    )
    assert code == 1


def test_the_wall_time_comes_from_the_job_log_else_from_the_rows(bench, capsys, tmp_path):
    a, b = tmp_path / "run-1", tmp_path / "run-2"
    write_run(a, CLEAR)
    write_run(b, CLEAR)
    (a / "logs").mkdir()
    spans = [
        {"job": "run-point x", "start_ns": 0, "end_ns": 100 * 10**9},
        {"job": "report x", "start_ns": 50 * 10**9, "end_ns": 150 * 10**9},
    ]
    (a / "logs" / "jobs.jsonl").write_text("".join(json.dumps(s) + "\n" for s in spans))
    _, lines, _ = run_bench(bench, capsys, a, b)
    assert lines[1] == (
        f"run 1: {a}/results/sqlite: wall time 2.5 min (goal <= 3 min: met); "
        f"from job log {a}/logs/jobs.jsonl"
    )
    # rows started 10:00 to 10:05
    assert lines[2] == (
        f"run 2: {b}/results/sqlite: wall time 5.0 min (goal <= 3 min: missed); "
        "from rows' start times (a lower bound)"
    )


def test_bad_input_exits_2_with_one_line(bench, capsys, tmp_path):
    a = tmp_path / "run-1"
    write_run(a, CLEAR)
    assert run_bench(bench, capsys, a)[0] == 2
    b = tmp_path / "run-2"
    write_run(b, CLEAR, extra="extra")
    code, lines, err = run_bench(bench, capsys, a, b)
    assert code == 2 and lines == []
    assert err.strip() == (
        f"verdict_stability: {b}/results/sqlite: not the same sweeps as {a}/results/sqlite "
        "(not in the first: sqlite/extra)"
    )
    assert (
        run_bench(bench, capsys, a, tmp_path / "nowhere")[2]
        .strip()
        .endswith("nowhere: no such directory")
    )
