"""Whether the default pack reaches the same verdicts run after run, and whether comparing
two runs of one commit flags nothing (an A/A comparison).

    python benchmarks/verdict_stability.py --engine sqlite --runs 5   # runs the pack 5 times
    python benchmarks/verdict_stability.py --engine sqlite --existing A B C   # reads 3 runs

Existing runs must have been measured under the findings file that judges them now (their
rows' ``findings_digest``): older packs are refused, never re-judged by newer rules.

The first form runs `./lab run --config engine=E` K times, one after the other, each into
fresh directories RUNS/run-<i>/{results,reports,logs} (RUNS: --results-root, by default a
new folder under .tunelab/, kept for a later look); data sets and the tables earlier runs
kept are taken as any run takes them. The second reads K runs already made: each a run's
folder holding results/, or a results directory itself. Printed:

- each run: its results directory and the pack's wall time (timed here; for an existing run
  from its job log, logs/jobs.jsonl beside its results, first job start to last job end,
  else the span of its rows' start times, a lower bound), against the goal;
- per claim: its K verdicts and the agreement rate, the share of runs that reached the most
  frequent verdict (1.0: the same in every run) -- `tunelab check RUN...` pools them alike --
  and, for each run where it did not hold, the likely cause the check named;
- per pair of consecutive runs (run i as OLD, run i+1 as NEW): the points `tunelab compare`
  flags as worse or better beyond its default threshold, and its count line. As a CI job
  comparing each run with the last: the A/A observations of the pairs before are a pair's
  A/A floor (the first pair has none).

Exit status: 0 when every claim has the same verdict in every run and no A/A comparison
flags a point as worse; 1 otherwise; 2 for bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from tunelab import engines
from tunelab.report import compare
from tunelab.report.compare import history as compare_history
from tunelab.run import check
from tunelab.store.results import read_csv as read_rows_csv

ROOT = Path(__file__).resolve().parents[1]
WALL_GOAL_MIN = {"sqlite": 3, "mariadb": 15, "postgres": 10}  # tables kept from a run before


class BenchInputError(ValueError):
    """Bad input; the message is one line."""


def run_pack(engine: str, out: Path) -> float:
    """One default pack into ``out``/{results,reports,logs}; its wall time in seconds."""
    args = [
        "./lab",
        "run",
        "--config",
        f"engine={engine}",
        f"results_dir={out}/results",
        f"reports_dir={out}/reports",
        f"logs_dir={out}/logs",
    ]
    t0 = time.monotonic()
    subprocess.run(args, cwd=ROOT, check=True)
    return time.monotonic() - t0


def results_dir(run: Path, engine: str) -> Path:
    """The engine's merged results of a run: RUN/results/<engine>, RUN/<engine>, or RUN."""
    if not run.is_dir():
        raise BenchInputError(f"{run}: no such directory")
    for candidate in (run / "results" / engine, run / engine):
        if candidate.is_dir():
            return candidate
    return run


def wall_time(results: Path) -> tuple[float | None, str]:
    """(seconds, how they were found) for a run already made."""
    for logs in (results.parent / "logs", results.parent.parent / "logs"):
        log = logs / "jobs.jsonl"
        if log.is_file():
            spans = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
            if spans:
                first = min(s["start_ns"] for s in spans)
                last = max(s["end_ns"] for s in spans)
                return (last - first) / 1e9, f"job log {log}"
    starts = []
    for csv in check.run_files(results):
        frame = pd.read_csv(csv, usecols=lambda c: c == "started_at")
        if "started_at" in frame:
            starts += pd.to_datetime(frame["started_at"], utc=True, errors="coerce").tolist()
    starts = [s for s in starts if pd.notna(s)]
    if len(starts) < 2:
        return None, "no job log, no start times"
    return (max(starts) - min(starts)).total_seconds(), "rows' start times (a lower bound)"


def verdicts(results: list[Path]) -> list[check.ClaimStability]:
    names = [str(r) for r in results]
    try:
        runs = [check.check_run(r) for r in results]
    except ValueError as exc:
        raise BenchInputError(str(exc)) from None
    # Stability is judged on packs measured under the findings that judge them: rows of
    # another version re-judged would test rules written after seeing those rows.
    for run in runs:
        for checked in run.values():
            other = next((v.other_version for v in checked.verdicts if v.other_version), "")
            judged = any(v.claim.findings_digest for v in checked.verdicts)
            if (
                judged
                and not other
                and "findings_digest" not in read_rows_csv(checked.csv, nrows=1)
            ):
                other = "rows measured before their findings were recorded"
            if other:
                raise BenchInputError(f"{checked.csv}: {other}; measure new packs (--runs K)")
    try:
        return check.stability(runs, names)
    except ValueError as exc:
        raise BenchInputError(str(exc)) from None


def aa_comparisons(results: list[Path]) -> list[compare.Comparison]:
    """Run i against run i+1, at `tunelab compare`'s defaults, as a CI job comparing each
    run with the one before makes them: the A/A comparisons before one are its A/A history
    (kept in memory here: no history file of the runs is read or written)."""
    history = compare_history.History(Path(compare_history.NAME))
    out = []
    try:
        for a, b in zip(results, results[1:]):
            out.append(compare.compare(a, b, history=history))
            compare.record(out[-1], history)
    except compare.ResultsDirError as exc:
        raise BenchInputError(str(exc)) from None
    return out


def flagged(result: compare.Comparison) -> list[str]:
    """The run-wide shifts flagged and the changes flagged, worse first, one line each."""
    lines = [
        compare.shift_line(s) for s in compare.main_shifts(result) if s.verdict == compare.WORSE
    ]
    changes = [
        (s, p, c) for s, p, c in result.changes() if c.verdict in (compare.WORSE, compare.BETTER)
    ]
    changes.sort(key=lambda t: (compare.RANK[t[2].verdict], t[0].name, t[1].point))
    return lines + [compare.change_line(s.name, p.point, c, result) for s, p, c in changes]


def report(engine: str, results: list[Path], walls: list[tuple[float | None, str]]) -> int:
    pooled, comparisons = verdicts(results), aa_comparisons(results)  # bad input: no output
    goal = WALL_GOAL_MIN.get(engine)
    print(f"engine {engine}, {len(results)} runs")
    for i, (r, (wall, how)) in enumerate(zip(results, walls), 1):
        text = "unknown" if wall is None else f"{wall / 60:.1f} min"
        if wall is not None and goal:
            text += f" (goal <= {goal} min: {'met' if wall <= goal * 60 else 'missed'})"
        print(f"run {i}: {r}: wall time {text}; from {how}")
    print("\nverdicts per claim (runs in order), agreement")
    for c in pooled:
        print(
            f"  {c.engine}/{c.sweep}: {c.claim}: {', '.join(c.verdicts)}; "
            f"agreement {c.agreement:.2f}{'' if c.stable else ' UNSTABLE'}"
        )
        for i, (verdict, why) in enumerate(zip(c.verdicts, c.causes), 1):
            if verdict != "holds" and why:
                print(f"    run {i} {verdict}: likely cause: {'; '.join(why)}")
    print(check.stability_summary(pooled, len(results)))
    worse = 0
    print("\nA/A comparisons (tunelab compare, run i as OLD, run i+1 as NEW)")
    for i, result in enumerate(comparisons, 1):
        print(f"run {i} -> run {i + 1}: {compare.summary_line(result)}")
        for line in flagged(result):
            print(f"  {line}")
        worse += result.count(compare.WORSE) + sum(
            s.verdict == compare.WORSE for s in result.shifts
        )
    unstable = sum(not c.stable for c in pooled)
    print(
        f"\nsummary: {unstable} unstable claim(s) of {len(pooled)}; "
        f"{worse} point metric(s) flagged worse in the A/A comparisons"
    )
    return 1 if unstable or worse else 0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", required=True, choices=engines.names())
    ap.add_argument("--runs", type=int, default=None, help="packs to run (at least 2)")
    ap.add_argument(
        "--results-root", type=Path, help="where the runs go (default: new folder under .tunelab/)"
    )
    ap.add_argument(
        "--existing",
        nargs="+",
        type=Path,
        metavar="DIR",
        help="read these runs instead of running packs",
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = _parser()
    a = ap.parse_args(argv)
    if (a.existing is None) == (a.runs is None):
        ap.error("give either --runs K or --existing DIR...")
    try:
        if a.existing is not None:
            if len(a.existing) < 2:
                raise BenchInputError("--existing: at least two runs to compare")
            results = [results_dir(d, a.engine) for d in a.existing]
            walls = [wall_time(r) for r in results]
        else:
            if a.runs < 2:
                raise BenchInputError("--runs: at least 2")
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            root = a.results_root or ROOT / ".tunelab" / f"verdict-stability-{a.engine}-{stamp}"
            outs = [(root / f"run-{i}").resolve() for i in range(1, a.runs + 1)]
            for out in outs:
                if out.exists():
                    raise BenchInputError(f"{out}: exists; give a fresh --results-root")
            results, walls = [], []
            for out in outs:
                out.mkdir(parents=True)
                walls.append((run_pack(a.engine, out), "timed here"))
                results.append(results_dir(out, a.engine))
        return report(a.engine, results, walls)
    except ValueError as exc:  # BenchInputError, and a results file check cannot read
        print(f"verdict_stability: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"verdict_stability: ./lab run failed (exit {exc.returncode})", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
