"""How much of a default pack's wall time is timed work, and how many servers it starts.

    python benchmarks/pack_throughput.py --engine mariadb            # runs the pack, then reads it
    python benchmarks/pack_throughput.py --engine mariadb --results results --wall 1387

The first form runs `./lab run --config engine=E` into fresh result, report and log
directories (a full pack: every point measured; the tables earlier runs kept, SQLite's files
in .tunelab/tables, are taken as any run takes them) and times it; the second reads a pack
already run (its wall time given). Printed, beside the goals they are measured against:

- wall time, and the timed share: the sum of every repetition's timed section (elapsed_s)
  over the wall time (goal: >= 60 %; packs: SQLite <= 4 min, MariaDB <= 20 min);
- server starts: every row's point records how many starts it needed (engine_starts, the
  count at its last repetition), summed over the points; against the least a pack can need:
  one start per distinct fresh/restart-knob combination (EngineInfo.server_order) plus one
  restart per cold repetition (an engine without a server, SQLite: one per point);
- table builds of the points that read (table_build): against the distinct tables they read
  (data set, index layout and fresh knobs); fewer when earlier runs kept some;
- where the wall time went, from the run's job log (logs/jobs.jsonl): measurements (and
  within them the timed sections), reports, other jobs, and the time no job held the bench
  lock (Snakemake and process start-up).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from tunelab import engines
from tunelab.host.jobs import AROUND_MEASUREMENT, EXCLUSIVE, JOB_COMMANDS
from tunelab.store.results import read_csv as read_rows_csv

ROOT = Path(__file__).resolve().parents[1]
GOALS_MIN = {"sqlite": 4, "mariadb": 20}
TIMED_SHARE_GOAL = 0.60


def run_pack(engine: str, out: Path) -> float:
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


def least_starts(engine: str, frame: pd.DataFrame) -> int:
    """Distinct server combinations of the pack's points, plus its cold repetitions (a
    restart each); an engine without a server (SQLite) starts anew for every point."""
    info = engines.info(engine)
    points = frame.drop_duplicates(["sweep", "point_id"])
    if not info.needs_container:
        return len(points)
    knobs = [c for c in frame if c.startswith("knob_")]
    combos = {
        info.server_order({c[len("knob_") :]: row[c] for c in knobs if pd.notna(row[c])})
        for _, row in points.iterrows()
    }
    cold = int((frame["cache_requested"] == "cold").sum())
    return len(combos) + cold


def least_builds(engine: str, frame: pd.DataFrame) -> int:
    """Distinct tables the reading points use: data set and index layout, per combination of
    the fresh knobs (a page size makes other files)."""
    from tunelab.run import pipeline
    from tunelab.store import dataset
    from tunelab.sweep import workloads

    info = engines.info(engine)
    keys = set()
    for _, row in frame[frame["rep"] == 0].iterrows():
        if row["workload"] in ("insert", "update"):
            continue
        knobs = {
            c[len("knob_") :]: row[c] for c in frame if c.startswith("knob_") if pd.notna(row[c])
        }
        w = workloads.Workload(str(row["workload"]), {})
        ds = dataset.Dataset(int(row["dataset_rows"]), int(row["seed"]))
        table = pipeline.table_order(w, knobs, ds)
        keys.add((info.server_order(knobs)[0], table))  # the fresh knobs shape the files
    return len(keys)


def job_spans(log: Path, frame: pd.DataFrame) -> None:
    spans = pd.DataFrame([json.loads(line) for line in log.read_text().splitlines() if line])
    if spans.empty:
        return
    spans["s"] = (spans["end_ns"] - spans["start_ns"]) / 1e9
    spans["what"] = spans["job"].str.split().str[0]
    whole = (spans["end_ns"].max() - spans["start_ns"].min()) / 1e9
    busy, end = 0, spans["start_ns"].min()
    for s, e in sorted(zip(spans["start_ns"], spans["end_ns"], strict=True)):
        busy += max(0, e - max(s, end))
        end = max(end, e)
    # the jobs that measure: those holding the bench lock around a measurement, or alone
    measuring = [c for c, mode in JOB_COMMANDS.items() if mode in (AROUND_MEASUREMENT, EXCLUSIVE)]
    measure = spans[spans["what"].isin(measuring)]["s"].sum()
    reports = spans[spans["what"] == "report"]["s"].sum()
    other = spans[~spans["what"].isin([*measuring, "report"])]
    print(f"job log           {whole / 60:.1f} min from the first job to the last")
    print(f"  measurements    {measure / 60:.1f} min (timed {frame['elapsed_s'].sum() / 60:.1f})")
    print(f"  reports         {reports / 60:.1f} min of job time (they run side by side)")
    print(f"  other jobs      {other['s'].sum() / 60:.1f} min of job time")
    print(f"  no job          {(whole - busy / 1e9) / 60:.1f} min (scheduling, start-up)")


def report(engine: str, results: Path, wall_s: float, logs: Path | None = None) -> None:
    files = sorted((results / engine).glob("*.csv"))
    if not files:
        sys.exit(f"no merged results in {results / engine}")
    frame = pd.concat([read_rows_csv(f) for f in files], ignore_index=True)
    timed = float(frame["elapsed_s"].sum())
    starts = int(frame.groupby(["sweep", "point_id"])["engine_starts"].max().sum())
    least = least_starts(engine, frame)
    print(f"engine            {engine}")
    print(f"points            {frame.groupby(['sweep', 'point_id']).ngroups}  rows {len(frame)}")
    goal = GOALS_MIN.get(engine)
    print(
        f"wall time         {wall_s / 60:.1f} min"
        + (f"  (goal <= {goal} min: {wall_s / 60 / goal:.2f} x the goal)" if goal else "")
    )
    print(f"timed work        {timed / 60:.1f} min")
    print(f"timed share       {timed / wall_s:.1%}  (goal >= {TIMED_SHARE_GOAL:.0%})")
    print(f"server starts     {starts}  (least possible {least}: ratio {starts / least:.2f})")
    if "table_build" in frame:
        reads = frame[(frame["rep"] == 0) & ~frame["workload"].isin(["insert", "update"])]
        built = int((reads["table_build"] == "built").sum())
        distinct = least_builds(engine, frame)
        kept = f"; {distinct - built} kept by earlier runs" if built < distinct else ""
        print(
            f"table builds      {built} for {len(reads)} reading points "
            f"(distinct tables {distinct}{kept})"
        )
    if logs is not None and (logs / "jobs.jsonl").exists():
        job_spans(logs / "jobs.jsonl", frame)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", required=True, choices=engines.names())
    ap.add_argument("--results", type=Path, help="read this results directory (no run)")
    ap.add_argument("--wall", type=float, help="the pack's wall time in s (with --results)")
    ap.add_argument("--logs", type=Path, help="the run's logs directory (its jobs.jsonl)")
    a = ap.parse_args()
    if a.results is not None:
        if a.wall is None:
            ap.error("--results needs --wall (the pack's wall time in seconds)")
        report(a.engine, a.results, a.wall, a.logs)
        return
    (ROOT / ".tunelab").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tunelab-pack-", dir=ROOT / ".tunelab") as tmp:
        wall = run_pack(a.engine, Path(tmp))
        report(a.engine, Path(tmp) / "results", wall, Path(tmp) / "logs")


if __name__ == "__main__":
    main()
