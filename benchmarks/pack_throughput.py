"""How much of a default pack's wall time is timed work, and how many servers it starts.

    python benchmarks/pack_throughput.py --engine mariadb            # runs the pack, then reads it
    python benchmarks/pack_throughput.py --engine mariadb --results results --wall 1387

The first form runs `./lab run --config engine=E` into fresh result, report and log
directories (a full pack, nothing reused) and times it; the second reads a pack already run
(its wall time given). Printed, beside the goals they are measured against:

- wall time, and the timed share: the sum of every repetition's timed section (elapsed_s)
  over the wall time (goal: >= 60 %; packs: SQLite <= 4 min, MariaDB <= 20 min);
- server starts: every row's point records how many starts it needed (engine_starts, the
  count at its last repetition), summed over the points; against the least a pack can need:
  one start per distinct fresh/restart-knob combination (EngineInfo.server_order) plus one
  restart per cold repetition (an engine without a server, SQLite: one per point).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from tunelab import engines

ROOT = Path(__file__).resolve().parents[1]
GOALS_MIN = {"sqlite": 4, "mariadb": 20}
TIMED_SHARE_GOAL = 0.60


def run_pack(engine: str, out: Path) -> float:
    args = [
        "./lab", "run", "--config", f"engine={engine}", f"results_dir={out}/results",
        f"reports_dir={out}/reports", f"logs_dir={out}/logs",
    ]  # fmt: skip
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


def report(engine: str, results: Path, wall_s: float) -> None:
    files = sorted((results / engine).glob("*.csv"))
    if not files:
        sys.exit(f"no merged results in {results / engine}")
    frame = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    timed = float(frame["elapsed_s"].sum())
    starts = int(frame.groupby(["sweep", "point_id"])["engine_starts"].max().sum())
    least = least_starts(engine, frame)
    print(f"engine            {engine}")
    print(f"points            {frame.groupby(['sweep', 'point_id']).ngroups}  rows {len(frame)}")
    goal = GOALS_MIN.get(engine)
    print(f"wall time         {wall_s / 60:.1f} min" + (f"  (goal <= {goal} min: "
          f"{wall_s / 60 / goal:.2f} x the goal)" if goal else ""))  # fmt: skip
    print(f"timed work        {timed / 60:.1f} min")
    print(f"timed share       {timed / wall_s:.1%}  (goal >= {TIMED_SHARE_GOAL:.0%})")
    print(f"server starts     {starts}  (least possible {least}: ratio {starts / least:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", required=True, choices=engines.names())
    ap.add_argument("--results", type=Path, help="read this results directory (no run)")
    ap.add_argument("--wall", type=float, help="the pack's wall time in s (with --results)")
    a = ap.parse_args()
    if a.results is not None:
        if a.wall is None:
            ap.error("--results needs --wall (the pack's wall time in seconds)")
        report(a.engine, a.results, a.wall)
        return
    (ROOT / ".tunelab").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tunelab-pack-", dir=ROOT / ".tunelab") as tmp:
        wall = run_pack(a.engine, Path(tmp))
        report(a.engine, Path(tmp) / "results", wall)


if __name__ == "__main__":
    main()
