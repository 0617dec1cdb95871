"""A real A/B for `tunelab compare`: a setting known to cost, measured, not injected.

    python benchmarks/real_ab.py RUN_A/results RUN_B/results
        [--sweep pool-shrunk] [--knob buffer_pool] [--base 16384]

RUN_A and RUN_B are two runs of one sweep (by default `examples/sweeps/pool-shrunk.yaml`:
SQLite's pool holding the table, and shrunk). The first line compares them as they are (an
A/A comparison). Then, for each other value X of the knob, RUN_B's base point is replaced
by its own point at X, labelled as the base point: the rows a change that shrank the pool to
X would leave in a second pack. Each is compared with RUN_A by the lab's own decision
(``compare_frames``: Benjamini-Hochberg at the default FDR, the default minimum effect):
the base point's change in time and in reads from the OS, each verdict, and the comparison's
exit code. The smallest change
flagged worse is what the comparison caught between two packs on this host.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tunelab.report import compare
from tunelab.store.results import APPLIED_PREFIX, KNOB_PREFIX


def relabelled(rows: pd.DataFrame, knob: str, base: object, value: object) -> pd.DataFrame:
    """``rows`` with the base point's rows replaced by the point at ``value``, labelled base."""
    col = KNOB_PREFIX + knob
    at_base = rows[col].astype(str) == str(base)
    moved = rows[rows[col].astype(str) == str(value)].copy()
    base_id = rows.loc[at_base, "point_id"].iloc[0]
    moved[col] = rows.loc[at_base, col].iloc[0]
    if APPLIED_PREFIX + knob in moved:
        moved[APPLIED_PREFIX + knob] = rows.loc[at_base, APPLIED_PREFIX + knob].iloc[0]
    moved["point_id"] = base_id
    return pd.concat([rows[~at_base], moved], ignore_index=True)


METRICS = {"elapsed_s": "time", "c_physical_reads": "reads from the OS"}


def base_cells(result: compare.Comparison, point: str) -> list[str]:
    """The base point's time and reads: the change beyond its block's shift, the verdict."""
    cells = dict.fromkeys(METRICS, "not compared")
    for _, p, c in result.changes():
        if p.point == point and c.metric in METRICS:
            low, high = c.judged.interval()
            cells[c.metric] = (
                f"{c.judged.beyond:.3g}x [{low:.3g}, {high:.3g}], {c.verdict}"
                if c.metric == "elapsed_s"
                else f"{c.judged.beyond:.3g}x, {c.verdict}"
            )
    return list(cells.values())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", type=Path, help="the first run's results directory")
    p.add_argument("b", type=Path, help="the second run's results directory")
    p.add_argument("--sweep", default="pool-shrunk")
    p.add_argument("--knob", default="buffer_pool")
    p.add_argument("--base", default="16384", help="the knob's value both packs agree on")
    args = p.parse_args(argv)
    try:
        a, b = (compare.load_side(path) for path in (args.a, args.b))
    except compare.ResultsDirError as exc:
        print(f"real_ab: {exc}", file=sys.stderr)
        return 2
    a, b = (side[side["sweep"] == args.sweep] for side in (a, b))
    col = KNOB_PREFIX + args.knob
    if a.empty or b.empty or col not in b or not (b[col].astype(str) == args.base).any():
        print(f"real_ab: no rows of {args.sweep} at {args.knob} {args.base}", file=sys.stderr)
        return 2
    point = b.loc[b[col].astype(str) == args.base, "point_id"].iloc[0]
    same = compare.compare_frames(a, b)
    print(f"A/A (the runs as they are): exit {int(same.worse)}; {compare.summary_line(same)}")
    names = " | ".join(f"its {m} beyond the block's shift" for m in METRICS.values())
    print(f"| {args.knob} in the second pack | {names} | exit |")
    print("|---|" + "---|" * (len(METRICS) + 1))
    for value in sorted(set(b[col].astype(str)) - {args.base}, key=float, reverse=True):
        result = compare.compare_frames(a, relabelled(b, args.knob, args.base, value))
        print(f"| {value} | {' | '.join(base_cells(result, point))} | {int(result.worse)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
