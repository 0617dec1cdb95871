"""How often `tunelab compare` raises a false alarm, and how often it catches a regression,
on real noise: stored packs of one commit on one host, each decision by Benjamini-Hochberg
(the default) and by Holm (``--strict``) side by side.

    python benchmarks/compare_power.py --rows tests/data/aa/sqlite-aa.csv.gz
    python benchmarks/compare_power.py RESULTS_A RESULTS_B [RESULTS_C ...]
    python benchmarks/compare_power.py --rows ... --split results/sqlite
    python benchmarks/compare_power.py RESULTS_A RESULTS_B --store tests/data/aa/sqlite-aa.csv.gz

Each pack is a results directory (or the stored rows, one file whose ``pack`` column names
the pack each row came from). ``--split DIR`` adds the two halves of one pack's rounds (even
and odd rounds) as a pair: an A/A comparison within one run, with no between-run effect in
its rows (the model still assumes one). Printed, per procedure:

- each ordered pair of packs compared as they are: its exit code (the real A/A comparisons);
- A/A: over ``--trials`` trials, a pair at random and a random share (``--keep``) of the
  points, nothing injected: the share of trials that exit 0; and small sweeps: every pair,
  sweep and two of its points, one of them its shortest (sub-millisecond where the sweep
  has one), compared from their rows;
- power: in each trial a regression of +10 or +20 % is injected into ``--share`` of NEW's
  points (every repetition: its time and CPU seconds times 1 + size, its throughput divided
  by it), drawn from the points whose spread (the SD of its change between two runs under
  compare's model, from the pair's comparison with nothing injected) is at most 3 % (+10 %)
  or 8 % (+20 %): the share of trials that exit 1 and of injected points flagged worse; and
  the same with the points drawn from all, by spread; and the smallest change (+20 % to
  +100 %) caught in >= 90 % of trials at spread <= 8 %: where the power goal can be met.

The decision code is the lab's own (``report.compare.compare_frames`` on the rows), with no
A/A history (the priors), as a first comparison on a host sees it.

Exit status: 0 when the goals hold under BH (A/A exit 0 in >= 95 % of trials, small sweeps
too; +10 % on points of spread <= 3 % caught in >= 90 % of trials, +20 % at <= 8 %; a goal
no stored point can be drawn for is reported, not met), 1 otherwise, 2 for bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from tunelab.analysis import change
from tunelab.report import compare
from tunelab.store.results import read_csv as read_rows_csv

PROCEDURES = (compare.BH, compare.HOLM)
NAMES = {compare.BH: "BH", compare.HOLM: "Holm"}
GOALS = {0.10: 0.03, 0.20: 0.08}  # size -> spread up to which the trial must be caught
BUCKETS = (0.03, 0.05, 0.08, 0.15, math.inf)  # upper edges of the spread
MET_SIZES = (0.2, 0.3, 0.4, 0.5, 0.75, 1.0)  # the changes tried for where the goal is met
TIMED = ("elapsed_s", "throughput_rows_s")
SCALED_UP = ("elapsed_s", "noise_client_cpu_s", "noise_engine_cpu_s")
RATE = "throughput_rows_s"
# What compare reads of a row, and the provenance it lists: the columns --store keeps.
STORED = (
    "sweep",
    "point_id",
    "engine",
    "workload",
    "dataset_rows",
    "seed",
    "cache_requested",
    "access_mode",
    "host_name",
    "host_cpu",
    "host_cores",
    "host_mem_gib",
    "host_kernel",
    "host_fs",
    "tunelab_version",
    "git_commit",
    "engine_version",
    "image",
    "cache_achieved",
    "cache_method",
    "cpus_client",
    "cpus_engine",
    "client_route",
    "access_path",
    "rep",
    "round",
    "order_in_round",
    "order_mode",
    "started_at",
    "elapsed_s",
    "throughput_rows_s",
    "rows_touched",
    "c_physical_reads",
    "noise_cpu_probe_s",
    "noise_client_cpu_s",
    "noise_engine_cpu_s",
    "noise_engine_cpu_probe_s",
    "noise_steal_share",
    "noise_interfered",
    "device_read_us",
    "device_sync_us",
)
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
    except compare.ResultsDirError as exc:
        raise BenchInputError(str(exc)) from None


def split_rounds(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A pack's even and odd rounds, each renumbered 0, 1, ..."""
    halves = []
    for parity in (0, 1):
        half = frame[frame["round"] % 2 == parity].copy()
        half["round"] = half["round"] // 2
        halves.append(half.reset_index(drop=True))
    return halves[0], halves[1]


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


def pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{100 * x:.0f} %"


class Bench:
    """The trials. Each pair is compared once as it is (``compare_frames``); a trial's
    decision is ``analysis.change.judge`` (what ``compare_frames`` calls) on that pair's
    estimates: a share of them for an A/A trial (with the pair's CPU and device references),
    or with a regression injected, which moves NEW's level of a point's time and throughput
    by log(1 + size) and leaves their uncertainty as it was (every repetition scaled alike:
    exactly what the rows would give). Small sweeps are compared from their rows."""

    def __init__(
        self,
        pairs: list[tuple[pd.DataFrame, pd.DataFrame, str]],
        trials: int,
        share: float,
        keep: float,
        seed: int,
        level: float,
        min_effect: float,
    ) -> None:
        self.pairs, self.trials, self.share, self.keep = pairs, trials, share, keep
        self.rng = np.random.default_rng(seed)
        self.level, self.min_effect = level, min_effect
        self.spread: list[dict[str, float]] = []
        # per pair: [(point key, estimate)], and the CPU and device references
        self.estimates: list[list[tuple[str, change.Estimate]]] = []
        self.refs: list[tuple[dict, dict]] = []

    def judge(self, old: pd.DataFrame, new: pd.DataFrame, procedure: str) -> compare.Comparison:
        return compare.compare_frames(old, new, self.level, self.min_effect, procedure=procedure)

    def decide(self, i: int, estimates: list[change.Estimate], procedure: str) -> change.Judgement:
        cpu, device = self.refs[i]
        return change.judge(
            estimates, self.level, self.min_effect, None, None, cpu, device, procedure=procedure
        )

    def as_they_are(self) -> dict[str, list[int]]:
        exits: dict[str, list[int]] = {p: [] for p in PROCEDURES}
        for old, new, name in self.pairs:
            t0 = time.monotonic()
            for procedure in PROCEDURES:
                result = self.judge(old, new, procedure)
                exits[procedure].append(int(result.worse))
                if procedure == compare.BH:
                    self.spread.append({k: c.judged.sd for k, c in timed_changes(result).items()})
                    self.estimates.append(
                        [(f"{s.name}/{p.point}", c.judged.estimate) for s, p, c in result.changes()]
                    )
                    self.refs.append((result.cpu, result.device))
                    flagged = [x for x in compare.text_lines(result) if x.endswith(": worse")]
                    print(f"{name}: BH exit {int(result.worse)}; {compare.summary_line(result)}")
                    for line in flagged:
                        print(f"  flagged: {line}")
            print(f"  ({time.monotonic() - t0:.1f} s)")
        return exits

    def subset(self, frame: pd.DataFrame, keys: set[str]) -> pd.DataFrame:
        return frame[point_keys(frame).isin(keys).to_numpy()]

    def aa_trials(self) -> dict[str, float]:
        alarms = dict.fromkeys(PROCEDURES, 0)
        for _ in range(self.trials):
            i = int(self.rng.integers(len(self.pairs)))
            keys = sorted({k for k, _ in self.estimates[i]})
            chosen = set(
                self.rng.choice(keys, size=max(2, round(self.keep * len(keys))), replace=False)
            )
            estimates = [e for k, e in self.estimates[i] if k in chosen]
            for procedure in PROCEDURES:
                alarms[procedure] += self.decide(i, estimates, procedure).worse
        return {p: 1 - alarms[p] / self.trials for p in PROCEDURES}

    def small_sweeps(self) -> tuple[dict[str, float], int, int, str]:
        """Every pair, sweep and point of it with the sweep's shortest point, compared from
        their rows: (share exiting 0, comparisons, those with a sub-millisecond point, the
        shortest sections)."""
        alarms = dict.fromkeys(PROCEDURES, 0)
        shortest = []
        for old, new, _ in self.pairs:
            for sweep in sorted(set(old["sweep"]) & set(new["sweep"])):
                rows = old[old["sweep"] == sweep]
                median = rows.groupby(point_keys(rows))["elapsed_s"].median().sort_values()
                for other in median.index[1:]:
                    chosen = {median.index[0], other}
                    shortest.append(float(median.iloc[0]))
                    o, n = self.subset(old, chosen), self.subset(new, chosen)
                    for procedure in PROCEDURES:
                        alarms[procedure] += self.judge(o, n, procedure).worse
        done = len(shortest)
        sub_ms = sum(s < 0.001 for s in shortest)
        return (
            {p: 1 - alarms[p] / done for p in PROCEDURES},
            done,
            sub_ms,
            f"{1000 * min(shortest):.2g}-{1000 * max(shortest):.3g} ms",
        )

    def power(self, size: float, limit: float) -> dict[str, tuple[float, float, int, int]]:
        """Per procedure: (share of trials exiting 1, share of injected points flagged,
        trials, injected points) with the points drawn from those of spread <= ``limit``."""
        caught = dict.fromkeys(PROCEDURES, 0)
        flagged = dict.fromkeys(PROCEDURES, 0)
        done = injected = 0
        step = math.log1p(size)
        for _ in range(self.trials):
            i = int(self.rng.integers(len(self.pairs)))
            spread = self.spread[i]
            quiet = sorted(k for k, v in spread.items() if v <= limit)
            want = max(1, round(self.share * len(spread)))
            if not quiet:
                continue
            chosen = set(self.rng.choice(quiet, size=min(want, len(quiet)), replace=False))
            done += 1
            injected += len(chosen)
            estimates = [
                dataclasses.replace(
                    e, new=dataclasses.replace(e.new, level=e.new.level + e.direction * step)
                )
                if k in chosen and e.metric in TIMED
                else e
                for k, e in self.estimates[i]
            ]
            keys = [k for k, _ in self.estimates[i]]
            for procedure in PROCEDURES:
                j = self.decide(i, estimates, procedure)
                caught[procedure] += j.worse
                hit = {
                    k
                    for k, x in zip(keys, j.points)
                    if x.verdict == change.WORSE and x.estimate.metric in TIMED
                }
                flagged[procedure] += len(hit & chosen)
        return {
            p: (
                caught[p] / done if done else math.nan,
                flagged[p] / injected if injected else math.nan,
                done,
                injected,
            )
            for p in PROCEDURES
        }


def where_met(bench: Bench) -> tuple[str, dict[str, str]]:
    """The smallest change of ``MET_SIZES`` each procedure catches in >= 90 % of trials on the
    points of spread <= 8 %: where the power goal can be met at these packs' spreads."""
    met: dict[str, str] = dict.fromkeys(PROCEDURES, "none up to " + pct(MET_SIZES[-1]))
    for size in MET_SIZES:
        got = bench.power(size, GOALS[0.20])
        for p in PROCEDURES:
            if met[p].startswith("none") and got[p][2] and got[p][0] >= 0.9:
                met[p] = f"+{100 * size:g} % (trial {pct(got[p][0])}, points {pct(got[p][1])})"
        if not any(m.startswith("none") for m in met.values()):
            break
    label = (
        f"smallest change caught in >= 90 % of trials, {100 * bench.share:g} % of the points, "
        f"spread <= {100 * GOALS[0.20]:g} %"
    )
    return label, met


def run(bench: Bench) -> int:
    exits = bench.as_they_are()
    sds = np.array([v for d in bench.spread for v in d.values()])
    print(
        f"points' spread (SD of a change between two runs under the model): median "
        f"{100 * np.median(sds):.1f} %; "
        + ", ".join(
            f"{bucket_name(b)}: {int(sum(bucket(v) == b for v in sds))}"
            for b in range(len(BUCKETS))
        )
    )
    rows: list[tuple[str, dict[str, str]]] = []
    whole = {p: f"exit 0 in {len(e) - sum(e)} of {len(e)}" for p, e in exits.items()}
    rows.append((f"A/A, whole pairs ({len(bench.pairs)})", whole))
    aa = bench.aa_trials()
    rows.append(
        (f"A/A, {100 * bench.keep:g} % of the points, exit 0", {p: pct(v) for p, v in aa.items()})
    )
    small, done, sub_ms, sections = bench.small_sweeps()
    rows.append(
        (
            f"A/A, small sweeps: every 2 points of a sweep, one its shortest ({done}; "
            f"its section {sections}, sub-millisecond in {sub_ms}), exit 0",
            {p: pct(v) for p, v in small.items()},
        )
    )
    ok = aa[compare.BH] >= 0.95 and small[compare.BH] >= 0.95
    for size, limit in GOALS.items():
        got = bench.power(size, limit)
        _, _, done, injected = got[compare.BH]
        label = (
            f"+{100 * size:g} % on {100 * bench.share:g} % of the points, spread <= "
            f"{100 * limit:g} % ({done} trials, {injected} points): trial exits 1 / "
            "points flagged"
        )
        rows.append((label, {p: f"{pct(v[0])} / {pct(v[1])}" for p, v in got.items()}))
        ok = ok and done > 0 and got[compare.BH][0] >= 0.9
        wider = bench.power(size, math.inf)
        rows.append(
            (
                f"+{100 * size:g} %, points drawn from all ({wider[compare.BH][2]} trials)",
                {p: f"{pct(v[0])} / {pct(v[1])}" for p, v in wider.items()},
            )
        )
    rows.append(where_met(bench))
    print()
    print("| | " + " | ".join(NAMES[p] for p in PROCEDURES) + " |")
    print("|---|" + "---|" * len(PROCEDURES))
    for label, cells in rows:
        print(f"| {label} | " + " | ".join(cells[p] for p in PROCEDURES) + " |")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("packs", nargs="*", type=Path, help="results directories, one per pack")
    p.add_argument("--rows", type=Path, help="stored rows with a 'pack' column")
    p.add_argument(
        "--split",
        type=Path,
        action="append",
        default=[],
        help="a results directory whose even and odd rounds are compared",
    )
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--share", type=float, default=0.1, help="share of points injected")
    p.add_argument("--keep", type=float, default=0.8, help="share of points in an A/A trial")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fdr", type=float, default=compare.DEFAULT_LEVEL)
    p.add_argument("--min-effect", type=float, default=compare.DEFAULT_MIN_EFFECT)
    p.add_argument("--store", type=Path, help="write the packs' rows to this file and stop")
    args = p.parse_args(argv)
    try:
        if args.rows and args.packs:
            raise BenchInputError("give packs or --rows, not both")
        packs = (
            packs_from_rows(args.rows)
            if args.rows
            else packs_from_dirs(args.packs)
            if args.packs
            else []
        )
        if args.store:
            store(packs, args.store)
            return 0
        pairs = [
            (packs[i], packs[j], f"pack {i + 1} -> pack {j + 1}")
            for i, j in itertools.permutations(range(len(packs)), 2)
        ]
        for d in args.split:
            even, odd = split_rounds(packs_from_dirs([d])[0])
            pairs.append((even, odd, f"{d}: even -> odd rounds"))
        if not pairs:
            raise BenchInputError("at least two packs, or --split DIR, are needed")
        bench = Bench(
            pairs, args.trials, args.share, args.keep, args.seed, args.fdr, args.min_effect
        )
        return run(bench)
    except BenchInputError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
