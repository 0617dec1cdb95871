"""What a small `./lab run` costs around its work, against another checkout, in one run.

    python benchmarks/run_start.py --baseline DIR [--rounds 5]

DIR is a checkout of another commit, set up (`./lab setup run` there: its own .venv). Each
round, for each checkout in turn (the order alternates, so the host's drift falls on both):
a new work directory with a two-point SQLite sweep (30,000 rows, three repetitions, cold),
one `./lab run` that measures it and renders its report, then a second that finds
everything done (what every rerun that heals a fault pays). Prints the median wall time of
each kind of run per checkout, their ratio (this checkout over the baseline), and the host's
CPU reference (``noise.cpu_reference``) beside them. The fault matrix's quick part is about
thirty such runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tunelab.host import noise

ROOT = Path(__file__).resolve().parents[1]
SWEEP = """name: start
engines: [sqlite]
dataset: {rows: 30000, seed: 11}
knobs: {buffer_pool: [20, 2000]}
workloads: [{type: scan}]
cache: cold
repetitions: 3
"""


def timed_run(checkout: Path, work: Path) -> float:
    args = [
        str(checkout / "lab"),
        "run",
        "--directory",
        str(work),
        "--config",
        f"sweeps={work}/sweeps/*.yaml",
        "engine=sqlite",
        "calibrate=off",
        "shared_pools=off",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUNELAB_", "VIRTUAL_ENV"))}
    env["TUNELAB_LOCK_DIR"] = str(work / "lock")
    t0 = time.monotonic()
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    took = time.monotonic() - t0
    if done.returncode != 0:
        sys.exit(f"{checkout}: ./lab run exited {done.returncode}: {done.stderr[-2000:]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="another checkout, set up")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not (args.baseline / "lab").is_file() or not (args.baseline / ".venv").is_dir():
        print(
            f"--baseline {args.baseline}: not a set-up checkout (./lab and .venv/ needed; "
            "run ./lab setup run there)",
            file=sys.stderr,
        )
        return 2
    sides = {"this": ROOT, "baseline": args.baseline.resolve()}
    took: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="run-start-") as tmp:
        for r in range(args.rounds):
            for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                work = Path(tmp) / f"{name}-{r}"
                (work / "sweeps").mkdir(parents=True)
                (work / "sweeps" / "start.yaml").write_text(SWEEP)
                took.setdefault((name, "measuring"), []).append(timed_run(sides[name], work))
                took.setdefault((name, "all done"), []).append(timed_run(sides[name], work))
                shutil.rmtree(work, ignore_errors=True)
    cpu_ms = statistics.median(noise.cpu_reference() for _ in range(21)) * 1e3
    print(
        f"host: CPU reference {cpu_ms:.2f} ms, {os.cpu_count()} CPUs; {args.rounds} rounds, medians"
    )
    for kind in ("measuring", "all done"):
        this, base = (statistics.median(took[(s, kind)]) for s in sides)
        print(f"{kind:>9}: this {this:.2f} s, baseline {base:.2f} s, ratio {this / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
