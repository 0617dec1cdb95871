"""Peak memory and speed of the shared-pool simulator as the trace grows, in one run.

    python benchmarks/bpsim_shared_memory.py [--references 10000000,100000000] [--pages 1000000]

Runs ``tunelab bpsim-shared`` once per trace length, each in a child process (4 members,
write share 0.2, affinity 0.8, Zipf 0.9, LBPs of 5 % and a GBP of 10 % of the pages, one
LRU point), and prints per length the child's peak resident memory (from ``wait4``), its wall
time and references per second, and the peak's ratio to the shortest trace's. The trace is
generated and simulated in pieces (``members.shared_trace_pieces``, ``SharedPools``), so the
peak should not follow the length: a ratio near 1 at ten times the references. The baseline,
in the same run: the same trace made whole (``shared_trace``) and simulated at once
(``simulate_shared``), whose memory grows with the trace.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

WHOLE = """
import sys
from tunelab.bpsim.members import shared_trace, simulate_shared
pages, references = int(sys.argv[1]), int(sys.argv[2])
trace = shared_trace(pages, references, 4, 0.2, 0.8, 0.9, 0)
simulate_shared(trace, pages // 20, pages // 10)
"""


def run_once(references: int, pages: int, whole: bool) -> tuple[float, float]:
    """(peak RSS in MiB, wall seconds) of one simulation in a child process."""
    if whole:
        args = [sys.executable, "-c", WHOLE, str(pages), str(references)]
    else:
        args = [
            sys.executable,
            "-m",
            "tunelab.cli",
            "bpsim-shared",
            "--pages",
            str(pages),
            "--references",
            str(references),
            "--members",
            "4",
            "--write-share",
            "0.2",
            "--affinity",
            "0.8",
            "--alpha",
            "0.9",
            "--lbp",
            str(pages // 20),
            "--gbp",
            str(pages // 10),
        ]
    start = time.perf_counter()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bpsim-shared failed at {references} references")
    return usage.ru_maxrss / 1024, wall  # ru_maxrss is in KiB on Linux


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--references", default="10000000,100000000", help="trace lengths, comma-separated"
    )
    p.add_argument("--pages", type=int, default=1_000_000)
    p.add_argument("--no-baseline", action="store_true", help="only the piecewise path")
    args = p.parse_args()
    lengths = [int(float(x)) for x in args.references.split(",")]
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
        f"{args.pages} pages, 4 members, one LRU point; child process per length"
    )
    print(
        f"{'path':>9} {'references':>12} {'peak MiB':>9} {'wall s':>7} {'M refs/s':>9} "
        f"{'peak ratio':>10}"
    )
    for whole in (False,) if args.no_baseline else (False, True):
        base = None
        for n in lengths:
            peak, wall = run_once(n, args.pages, whole)
            base = base or peak
            print(
                f"{'whole' if whole else 'pieces':>9} {n:>12} {peak:>9.0f} {wall:>7.1f} "
                f"{n / wall / 1e6:>9.2f} {peak / base:>10.2f}"
            )


if __name__ == "__main__":
    main()
