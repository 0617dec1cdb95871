"""How often `tunelab compare` raises a false alarm, and how often it catches a regression,
on real noise: two or more stored packs of one commit on one host.

    python benchmarks/compare_power.py RESULTS_A RESULTS_B [RESULTS_C ...]
    python benchmarks/compare_power.py --rows tests/data/aa/sqlite-aa.csv.gz
    python benchmarks/compare_power.py RESULTS_A RESULTS_B --store tests/data/aa/sqlite-aa.csv.gz

Each pack is a results directory (or the stored rows, one file whose ``pack`` column names
the pack each row came from). Printed:

- each ordered pair of packs compared as they are (OLD, NEW): its exit code and the run-wide
  shift; the real A/A comparisons;
- the A/A false-alarm rate: over ``--trials`` trials, a pair at random and a random share
  (``--keep``) of the points, nothing injected; the share of trials that exit 1;
- power: in each trial a regression of +5, +10 or +20 % is injected into a random share
  (``--share``) of NEW's points, on every repetition (its time and CPU seconds times
  1 + size, its throughput divided by it: the same work, slower), and the share of the
  injected points whose time is flagged worse, by size and by the point's between-run
  spread (the SD of its change between two runs under compare's model, from the pair's
  comparison with nothing injected), with the share of trials that exit 1.

The decision code is the lab's own (``report.compare.compare_frames`` on the rows), with no
A/A history (the prior), as a first comparison on a host sees it.

Exit status: 0 when the goals hold (A/A exit 0 in >= 95 % of trials, +10 % flagged in >= 90 %
on points with spread <= 3 %, +20 % in >= 90 % with spread <= 8 %), 1 otherwise, 2 for bad
input (one line).
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from tunelab.report import compare
from tunelab.results import read_csv as read_rows_csv

SIZES = (0.05, 0.10, 0.20)
BUCKETS = (0.01, 0.02, 0.03, 0.05, 0.08, 0.15, math.inf)  # upper edges of the spread
GOALS = {0.10: 0.03, 0.20: 0.08}  # size -> spread up to which >= 90 % must be flagged
SCALED_UP = ("elapsed_s", "noise_client_cpu_s", "noise_engine_cpu_s")
RATE = "throughput_rows_s"
# What compare reads of a row, and the provenance it lists: the columns --store keeps.
STORED = ("sweep", "point_id", "engine", "workload", "dataset_rows", "seed",
          "cache_requested", "access_mode", "host_name", "host_cpu", "host_cores",
          "host_mem_gib", "host_kernel", "host_fs", "tunelab_version", "git_commit",
          "engine_version", "image", "cache_achieved", "cache_method", "cpus_client",
          "cpus_engine", "client_route", "access_path", "rep", "round", "order_in_round",
          "order_mode", "started_at", "elapsed_s", "throughput_rows_s", "rows_touched",
          "c_physical_reads", "noise_cpu_probe_s", "noise_client_cpu_s", "noise_engine_cpu_s",
          "noise_engine_cpu_probe_s", "noise_steal_share", "noise_interfered",
          "device_read_us", "device_sync_us")  # fmt: skip
PREFIXES = ("knob_", "wl_", "applied_")


class BenchInputError(ValueError):
    pass


def packs_from_rows(path: Path) -> list[pd.DataFrame]:
    try:
        rows = read_rows_csv(path, low_memory=False)
    except (OSError, ValueError) as exc:
        raise BenchInputError(f"{path}: {exc}") from None
    if "pack" not in rows:
        raise BenchInputError(f"{path}: no 'pack' column naming each row's pack")
    return [g.drop(columns="pack").reset_index(drop=True) for _, g in rows.groupby("pack")]


def packs_from_dirs(paths: Sequence[Path]) -> list[pd.DataFrame]:
    try:
        return [compare.load_side(Path(p)) for p in paths]
    except compare.CompareInputError as exc:
        raise BenchInputError(str(exc)) from None


def store(packs: list[pd.DataFrame], out: Path) -> None:
    """The packs as one small compressed rows file, a ``pack`` column naming each row's."""
    frames = []
    for i, p in enumerate(packs, 1):
        cols = [c for c in p.columns if c in STORED or c.startswith(PREFIXES)]
        frames.append(p[cols].assign(pack=i))
    rows = pd.concat(frames, ignore_index=True, sort=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out, index=False, compression={"method": "gzip", "mtime": 0})
    print(f"wrote {out}: {len(rows)} rows of {len(packs)} packs, {out.stat().st_size} bytes")


def point_keys(frame: pd.DataFrame) -> pd.Series:
    return (
        frame["engine"].astype(str)
        + "/"
        + frame["sweep"].astype(str)
        + "/"
        + frame["point_id"].astype(str)
    )


def inject(frame: pd.DataFrame, points: set[str], size: float) -> pd.DataFrame:
    """The rows with the named points made ``size`` slower on every repetition."""
    out = frame.copy()
    hit = point_keys(out).isin(points).to_numpy()
    for col in SCALED_UP:
        if col in out:
            out.loc[hit, col] = pd.to_numeric(out.loc[hit, col], errors="coerce") * (1 + size)
    if RATE in out:
        out.loc[hit, RATE] = pd.to_numeric(out.loc[hit, RATE], errors="coerce") / (1 + size)
    return out


def timed_changes(result: compare.Comparison) -> dict[str, compare.MetricChange]:
    """point key -> its time's change (its throughput's where it has no time)."""
    out: dict[str, compare.MetricChange] = {}
    for s, p, c in result.changes():
        key = f"{s.name}/{p.point}"
        if c.metric == "elapsed_s" or (c.metric == RATE and key not in out):
            out[key] = c
    return out


def bucket(spread: float) -> int:
    return next(i for i, edge in enumerate(BUCKETS) if spread <= edge)


def bucket_name(i: int) -> str:
    low = 0 if i == 0 else BUCKETS[i - 1]
    high = BUCKETS[i]
    return f"> {100 * low:g} %" if math.isinf(high) else f"{100 * low:g}-{100 * high:g} %"


def run(packs: list[pd.DataFrame], trials: int, share: float, keep: float, seed: int,
        alpha: float) -> int:  # fmt: skip
    rng = np.random.default_rng(seed)
    pairs = list(itertools.permutations(range(len(packs)), 2))
    if not pairs:
        raise BenchInputError("at least two packs are needed")
    # The pairs as they are: the real A/A comparisons, and each point's spread.
    spread: dict[tuple[int, int], dict[str, float]] = {}
    for i, j in pairs:
        t0 = time.monotonic()
        result = compare.compare_frames(packs[i], packs[j], alpha, history=None)
        spread[(i, j)] = {k: c.judged.sd for k, c in timed_changes(result).items()}
        shifts = "; ".join(compare.shift_line(s) for s in compare.main_shifts(result))
        print(f"pack {i + 1} -> pack {j + 1}: exit {int(result.worse)}; "
              f"{compare.summary_line(result)} ({time.monotonic() - t0:.1f} s)")  # fmt: skip
        print(f"  {shifts}")
        for line in compare.text_lines(result):
            if ": worse" in line or ": better" in line:
                print(f"  flagged: {line}")
    sds = np.array([v for d in spread.values() for v in d.values()])
    print(f"points' between-run spread (SD of a change, A/A model): median "
          f"{100 * np.median(sds):.1f} %, " + ", ".join(
              f"{bucket_name(b)}: {int(sum(bucket(v) == b for v in sds))}"
              for b in range(len(BUCKETS))))  # fmt: skip
    # A/A trials: a pair at random, a random share of the points.
    alarms = 0
    for _ in range(trials):
        i, j = pairs[rng.integers(len(pairs))]
        keys = sorted(set(point_keys(packs[i])) & set(point_keys(packs[j])))
        chosen = set(rng.choice(keys, size=max(2, round(keep * len(keys))), replace=False))
        o = packs[i][point_keys(packs[i]).isin(chosen).to_numpy()]
        n = packs[j][point_keys(packs[j]).isin(chosen).to_numpy()]
        alarms += compare.compare_frames(o, n, alpha).worse
    aa_rate = 1 - alarms / trials
    print(f"A/A: exit 0 in {100 * aa_rate:.1f} % of {trials} trials ({alarms} false alarm(s); "
          f"{100 * keep:g} % of the points each)")  # fmt: skip
    # Power trials.
    ok = aa_rate >= 0.95
    for size in SIZES:
        hits = np.zeros(len(BUCKETS))
        totals = np.zeros(len(BUCKETS))
        exits = 0
        for _ in range(trials):
            i, j = pairs[rng.integers(len(pairs))]
            keys = sorted(set(spread[(i, j)]))
            chosen = set(rng.choice(keys, size=max(1, round(share * len(keys))), replace=False))
            result = compare.compare_frames(packs[i], inject(packs[j], chosen, size), alpha)
            exits += result.worse
            found = timed_changes(result)
            for k in chosen:
                if k not in found:
                    continue
                b = bucket(spread[(i, j)][k])
                totals[b] += 1
                hits[b] += found[k].verdict == compare.WORSE
        cells = []
        for b in range(len(BUCKETS)):
            if totals[b]:
                cells.append(f"{bucket_name(b)}: {100 * hits[b] / totals[b]:.0f} % of "
                             f"{int(totals[b])}")  # fmt: skip
        print(f"+{100 * size:g} %: flagged {100 * hits.sum() / max(totals.sum(), 1):.0f} % "
              f"of injected points, exit 1 in {100 * exits / trials:.0f} % of trials; by "
              f"spread: " + "; ".join(cells))  # fmt: skip
        if size in GOALS:
            edge = bucket(GOALS[size])
            got, n = hits[: edge + 1].sum(), totals[: edge + 1].sum()
            share_hit = got / n if n else math.nan
            print(f"  goal: +{100 * size:g} % on spread <= {100 * GOALS[size]:g} % flagged in "
                  f">= 90 %: {100 * share_hit:.0f} % of {int(n)}")  # fmt: skip
            ok = ok and (n == 0 or share_hit >= 0.9)
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("packs", nargs="*", type=Path, help="results directories, one per pack")
    p.add_argument("--rows", type=Path, help="stored rows with a 'pack' column")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--share", type=float, default=0.1, help="share of points injected")
    p.add_argument("--keep", type=float, default=0.8, help="share of points in an A/A trial")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha", type=float, default=compare.DEFAULT_ALPHA)
    p.add_argument("--store", type=Path, help="write the packs' rows to this file and stop")
    args = p.parse_args(argv)
    try:
        if args.rows and args.packs:
            raise BenchInputError("give packs or --rows, not both")
        packs = packs_from_rows(args.rows) if args.rows else packs_from_dirs(args.packs)
        if args.store:
            store(packs, args.store)
            return 0
        return run(packs, args.trials, args.share, args.keep, args.seed, args.alpha)
    except BenchInputError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
