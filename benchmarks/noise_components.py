"""How much a sweep's measurements vary, by level, from real packs: the SDs the verdicts'
error-rate simulation (``verdict_error_rates.py``) takes as its pass and round effects.

    python benchmarks/noise_components.py RESULTS [RESULTS ...]

For every pair of points of one sweep, workload and cache, the per-unit log ratio between
them (the unit the verdicts pair by: the round, or the pass between blocks) and its spread
over the units (a robust SD: 1.4826 x the median absolute deviation, so that one disturbed
round does not set it). Two points of one block (or of a ``rounds`` order) differ by their
rounds' effects only: the median spread of such pairs is sqrt(2) x the round SD. Two points
of two blocks differ by their passes' effects too: sqrt(2) x sqrt(pass² + round²) (the
"between blocks" SD). Printed per engine, sweep and pack, then per engine: the median round
SD, and the pass SD that the median between-block SD leaves beside it. A pack's own effect
(shared by every row) cancels in every ratio and is not estimated here.
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

from tunelab.store.results import read_csv as read_rows_csv

MIN_UNITS = 4  # fewer shared units say nothing of a pair's spread


@dataclass(frozen=True)
class Components:
    engine: str
    sweep: str
    round_sd: float  # nan: no pair within one block
    between_sd: float | None  # sqrt(pass² + round²); None: no pair of two blocks
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
    between = float(np.median(cross)) / math.sqrt(2) if cross else None
    return Components(engine, sweep, round_sd, between, len(same), len(cross))


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
    """engine -> (pass SD, round SD): the round SD the median over its sweeps and packs, the
    pass SD what the median between-block SD leaves of it (0 where no sweep compares two
    blocks: a ``rounds`` order)."""
    out = {}
    for engine in sorted({c.engine for c in found}):
        mine = [c for c in found if c.engine == engine]
        rounds = [c.round_sd for c in mine if not math.isnan(c.round_sd)]
        between = [c.between_sd for c in mine if c.between_sd is not None]
        round_sd = float(np.median(rounds)) if rounds else math.nan
        pass_sd = 0.0
        if between:
            pass_sd = math.sqrt(
                max(0.0, float(np.median(between)) ** 2 - np.nan_to_num(round_sd) ** 2)
            )
        out[engine] = (pass_sd, round_sd)
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
    print(
        f"{'engine':9} {'sweep':28} {'round SD':>9} {'between blocks':>15}  pairs (one block, two)"
    )
    for c in sorted(found, key=lambda c: (c.engine, c.sweep)):
        rs = "-" if math.isnan(c.round_sd) else f"{c.round_sd:.1%}"
        bs = "-" if c.between_sd is None else f"{c.between_sd:.1%}"
        print(f"{c.engine:9} {c.sweep:28} {rs:>9} {bs:>15}  {c.same_pairs}, {c.cross_pairs}")
    for engine, (pass_sd, round_sd) in by_engine(found).items():
        print(f"{engine}: round SD {round_sd:.1%}, pass SD {pass_sd:.1%} (medians over sweeps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
