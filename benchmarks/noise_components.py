"""How much a sweep's measurements vary, by level, from real packs: the SDs the verdicts'
error-rate simulation (``verdict_error_rates.py``) takes as its pass and round effects.

    python benchmarks/noise_components.py RESULTS [RESULTS ...]

For every pair of points of one sweep, workload and cache, the per-unit log ratio between
them (the unit the verdicts pair by: the round, or the pass between blocks) and its spread
over the units (a robust SD: 1.4826 x the median absolute deviation, so that one disturbed
round does not set it). Two points of one block (or of a ``rounds`` order) differ by their
rounds' effects only: the median spread of such pairs is sqrt(2) x the round SD. Two points
of two blocks differ by their passes' effects too: sqrt(2) x sqrt(pass² + round²). Printed per
engine and sweep, then per engine (the median over its sweeps): round SD, pass SD, and the
pairs behind each. A pack's own effect (shared by every row) cancels in every ratio and is
not estimated here.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tunelab.results import read_csv as read_rows_csv

MIN_UNITS = 4  # fewer shared units say nothing of a pair's spread


@dataclass(frozen=True)
class Components:
    engine: str
    sweep: str
    round_sd: float
    pass_sd: float | None  # None: no pair of two blocks
    same_pairs: int
    cross_pairs: int


def robust_sd(x: np.ndarray) -> float:
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


def row_files(results: Path) -> list[Path]:
    """A pack's merged rows: one file per engine and sweep."""
    return sorted(results.glob("*/*.csv"))


def _spreads(frame: pd.DataFrame) -> tuple[list[float], list[float]]:
    """Spreads of the per-unit log ratios: pairs within one block, pairs across blocks."""
    same, cross = [], []
    frame = frame[pd.to_numeric(frame["elapsed_s"], errors="coerce") > 0]
    blocked = (frame.get("order_mode") == "blocked").any()
    unit = "pass" if blocked and "pass" in frame else "round"
    keys = [c for c in ("workload", "cache_requested") if c in frame]
    for _, group in frame.groupby(keys) if keys else [(None, frame)]:
        series = {
            pid: np.log(g.groupby(unit)["elapsed_s"].median())
            for pid, g in group.groupby("point_id")
        }
        block = group.groupby("point_id")["block"].first() if "block" in group else None
        for a, b in itertools.combinations(sorted(series), 2):
            d = (series[a] - series[b]).dropna().to_numpy()
            if len(d) < MIN_UNITS:
                continue
            one_block = not blocked or block is None or block[a] == block[b]
            (same if one_block else cross).append(robust_sd(d))
    return same, cross


def components(engine: str, sweep: str, frame: pd.DataFrame) -> Components | None:
    same, cross = _spreads(frame)
    if not same and not cross:
        return None
    round_sd = float(np.median(same)) / math.sqrt(2) if same else math.nan
    pass_sd = None
    if cross:
        both = float(np.median(cross)) / math.sqrt(2)
        base = 0.0 if math.isnan(round_sd) else round_sd
        pass_sd = math.sqrt(max(0.0, both**2 - base**2))
    return Components(engine, sweep, round_sd, pass_sd, len(same), len(cross))


def measured(dirs: Iterable[Path]) -> list[Components]:
    """Per pack directory, engine and sweep (each pack's rows apart: their run effects differ)."""
    found = []
    for pack in dirs:
        for path in row_files(Path(pack)):
            frame = read_rows_csv(path, low_memory=False)
            c = components(path.parent.name, path.stem, frame)
            if c is not None:
                found.append(c)
    return found


def by_engine(found: Sequence[Components]) -> dict[str, tuple[float, float]]:
    """engine -> (pass SD, round SD): the medians over its sweeps and packs (pass 0 where no
    sweep compares two blocks: a ``rounds`` order)."""
    out = {}
    for engine in sorted({c.engine for c in found}):
        mine = [c for c in found if c.engine == engine]
        rounds = [c.round_sd for c in mine if not math.isnan(c.round_sd)]
        passes = [c.pass_sd for c in mine if c.pass_sd is not None]
        out[engine] = (float(np.median(passes)) if passes else 0.0,
                       float(np.median(rounds)) if rounds else math.nan)  # fmt: skip
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="results directories of packs")
    args = ap.parse_args(argv)
    missing = [str(d) for d in args.results if not row_files(d)]
    if missing:
        print(f"no sweep rows (ENGINE/SWEEP.csv) in {missing[0]}", file=sys.stderr)
        return 2
    found = measured(args.results)
    print(f"{'engine':9} {'sweep':28} {'round SD':>9} {'pass SD':>8}  pairs (one block, two)")
    for c in sorted(found, key=lambda c: (c.engine, c.sweep)):
        ps = "-" if c.pass_sd is None else f"{c.pass_sd:.1%}"
        print(f"{c.engine:9} {c.sweep:28} {c.round_sd:9.1%} {ps:>8}  {c.same_pairs}, "
              f"{c.cross_pairs}")  # fmt: skip
    for engine, (pass_sd, round_sd) in by_engine(found).items():
        print(f"{engine}: round SD {round_sd:.1%}, pass SD {pass_sd:.1%} (medians over sweeps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
