"""What the lab adds to a timed scan: tunelab's recorded time against a bare driver loop.

    python benchmarks/harness_overhead.py [--rows 400000] [--rounds 5] [--reps 5]
                                          [--fetch all|count] [--limit 1.03]

One SQLite data file, one warm full scan, the same statement. Each round measures the point
through the lab (``runner.measure``: warm-up, counters, the timed workload, exactly what a
result row records as elapsed_s) and then, on the same file in the same process, a bare apsw
loop (``for row in cursor: pass`` on a connection with the same page cache, warmed once).
Rounds alternate so drift of the machine falls on both. Prints the median of each and their
ratio; exits 1 when the ratio is above --limit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import apsw

from tunelab.measure import runner
from tunelab.sweep import spec, workloads


def point_of(tmp: Path, rows: int, reps: int, fetch: str) -> spec.Point:
    sweep = tmp / "overhead.yaml"
    sweep.write_text(
        "name: overhead\nengines: [sqlite]\n"
        f"dataset: {{rows: {rows}, seed: 7}}\n"
        "knobs: {buffer_pool: [100000]}\n"  # holds the whole table: a warm scan is warm
        f"workloads: [{{type: scan, fetch: {fetch}}}]\ncache: warm\nrepetitions: {reps}\n"
    )
    points, errors = spec.expand(sweep)
    if errors:
        sys.exit("\n".join(map(str, errors)))
    return points[0]


def bare_loop(db: Path, sql: str, pool: int, reps: int) -> list[float]:
    """The driver alone: apsw's cursor iterated by a plain Python loop."""
    conn = apsw.Connection(str(db))
    conn.execute(f"PRAGMA cache_size={pool}")
    for _ in conn.execute(sql):  # warm, like the lab's warm-up
        pass
    out = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _row in conn.execute(sql):
            pass
        out.append((time.perf_counter_ns() - t0) / 1e9)
    conn.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5, help="repetitions per round and side")
    ap.add_argument("--fetch", choices=workloads.FETCH_MODES, default="all")
    ap.add_argument("--limit", type=float, default=1.03)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="tunelab-overhead-") as t:
        tmp = Path(t)
        point = point_of(tmp, args.rows, args.reps, args.fetch)
        sql = workloads.query_sql(point.workload, "?")
        lab: list[float] = []
        bare: list[float] = []
        lab_engine: list[float] = []
        for _ in range(args.rounds):
            rows: list[dict] = []
            runner.measure(point, tmp / "lab", tmp / "data", rows)
            lab += [r["elapsed_s"] for r in rows]
            lab_engine += [r["engine_elapsed_s"] for r in rows]
            with runner.provisioned(point, tmp / "bare", tmp / "data") as setup:
                bare += bare_loop(setup.engine.path, sql, point.knobs["buffer_pool"], args.reps)

    lab_med, bare_med = statistics.median(lab), statistics.median(bare)
    ratio = lab_med / bare_med
    print(f"statement          {sql}  ({args.rows} rows, warm, fetch {args.fetch})")
    print(f"tunelab recorded   median {lab_med * 1e3:9.2f} ms  over {len(lab)} repetitions")
    print(f"  engine time      median {statistics.median(lab_engine) * 1e3:9.2f} ms")
    print(f"bare apsw loop     median {bare_med * 1e3:9.2f} ms  over {len(bare)} repetitions")
    print(f"ratio              {ratio:.3f}  (limit {args.limit})")
    return 0 if ratio <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
