"""Two runs compared (`tunelab compare OLD NEW`): what changed between them.

OLD and NEW are results directories (``<engine>/<sweep>.csv`` merged files) or result CSVs.
Their points are matched (``report.compare.match``), each matched point's metrics are taken
(times and rates at one CPU speed, ``analysis.hostspeed``) and judged together
(``analysis.change``): each point's change beyond the run's host shift, against the
uncertainty of both runs' medians and the between-run variance of the engine's points, the
Benjamini-Hochberg procedure over the points and over the shifts (strict: Holm's) so that
two runs of one commit exit 1 in at most ``level`` of comparisons, a flag's change past
``min_effect`` as well; and each engine's run-wide shift, flagged when the CPU reference did
not move with it. A point whose timed section is too short to compare
(``change.MIN_SECTION_S``) is reported as such, its times not tested. Printing is
``report.compare.text``, ``report.compare.table`` and ``report.compare.page``.

Comparing two runs of one clean commit on one host records what they measured of the host's
noise in its A/A history (``report.compare.history``), after judging them.

Exit codes: 1 when a point (or a whole run) got worse, 0 otherwise, 2 for bad input (one
line ``file: message`` on stderr).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tunelab.analysis import change, hostspeed
from tunelab.report.compare import history as history_mod
from tunelab.report.compare.match import (
    CompareInputError,
    Difference,
    canon,
    column,
    groups,
    match_sweep,
    one,
    point_name,
    provenance,
)
from tunelab.report.results_dir import load_side, results_root

__all__ = ["CompareInputError", "canon", "compare"]

# Metric -> +1 when a higher value is worse, -1 when a lower one is.
METRICS: dict[str, int] = {"elapsed_s": 1, "throughput_rows_s": -1, "c_physical_reads": 1}
TIMED = ("elapsed_s", "throughput_rows_s")
DEFAULT_LEVEL = change.DEFAULT_LEVEL
DEFAULT_MIN_EFFECT = change.DEFAULT_MIN_EFFECT
BH, HOLM = change.BH, change.HOLM

WORSE, BETTER, NOISY, SAME = "worse", "better", "noisy", "same"
NOT_REPEATED = "not-repeated"  # flagged worse, not again when measured again (--confirm)
TOO_SHORT, TOO_FEW = "too-short", "too-few"
RANK = {v: i for i, v in enumerate((WORSE, NOT_REPEATED, BETTER, NOISY, SAME, TOO_SHORT, TOO_FEW))}
INCOMPARABLE_RANK = len(RANK)
ROUNDS, PASSES, REPETITIONS = "rounds", "passes", "repetitions"


@dataclass
class MetricChange:
    metric: str
    judged: change.Judged
    n_old: int
    n_new: int
    old_median: float
    new_median: float
    source: str  # the unit the medians' uncertainty was taken at
    scaled: bool = False  # compared at one CPU speed
    repeated: bool | None = None  # flagged worse again when measured again (None: not asked)

    @property
    def verdict(self) -> str:
        v = self.judged.verdict
        if v == change.WORSE and self.repeated is False:
            return NOT_REPEATED
        if v in (change.WORSE, change.BETTER):
            return v
        return NOISY if self.judged.noisy else SAME

    @property
    def ratio(self) -> float:
        if self.old_median == 0:
            return 1.0 if self.new_median == 0 else math.inf
        return self.new_median / self.old_median


@dataclass
class PointComparison:
    point: str
    changes: list[MetricChange] = field(default_factory=list)
    incomparable: list[Difference] = field(default_factory=list)
    differences: dict[str, tuple[str, str]] = field(default_factory=dict)
    too_few: list[str] = field(default_factory=list)  # metrics with too few values to test
    too_short: float = math.nan  # its timed section's seconds when too short to compare

    @property
    def short(self) -> bool:
        return math.isfinite(self.too_short)

    @property
    def rank(self) -> int:
        if self.incomparable:
            return INCOMPARABLE_RANK
        if not self.changes:
            return RANK[TOO_SHORT if self.short else TOO_FEW]
        return min(RANK[c.verdict] for c in self.changes)


@dataclass
class SweepComparison:
    engine: str
    sweep: str
    points: list[PointComparison]
    only_old: list[str]
    only_new: list[str]
    one_sided: list[str]

    @property
    def name(self) -> str:
        return f"{self.engine}/{self.sweep}"


@dataclass
class Confirmation:
    """The flagged points measured again (`--confirm`) and which alarms repeated."""

    points: int  # measured again
    repetitions: int  # rows measured
    seconds: float  # wall time of the measuring
    alarms: int  # worse flags (points' hypotheses and shifts) before
    repeated: set[str] = field(default_factory=set)  # their keys flagged worse again
    lines: list[str] = field(default_factory=list)  # what the second comparison flagged


@dataclass
class Comparison:
    old: str
    new: str
    level: float
    min_effect: float
    procedure: str
    sweeps: list[SweepComparison]
    sweeps_only_old: list[str]
    sweeps_only_new: list[str]
    judgement: change.Judgement
    history_path: str = ""
    history_entries: int = 0
    # A/A entries this comparison makes: (host, group, entry), recorded by ``record``.
    aa: list[tuple[str, str, dict]] = field(default_factory=list)
    aa_commit: str = ""
    recorded: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # engine:metric -> CPU probe's log change
    device: dict[str, float] = field(default_factory=dict)  # engine/kind -> device probe's
    confirmation: Confirmation | None = None

    def points(self) -> list[tuple[SweepComparison, PointComparison]]:
        return [(s, p) for s in self.sweeps for p in s.points]

    def changes(self) -> list[tuple[SweepComparison, PointComparison, MetricChange]]:
        return [(s, p, c) for s, p in self.points() for c in p.changes]

    def count(self, *verdicts: str) -> int:
        return sum(c.verdict in verdicts for _, _, c in self.changes())

    @property
    def shifts(self) -> list[change.Shift]:
        return self.judgement.shifts

    @property
    def worse(self) -> bool:
        if self.confirmation is not None:
            return bool(self.confirmation.repeated)
        return self.judgement.worse


# -- taking the values -----------------------------------------------------------------------
def _unit_source(frame: pd.DataFrame) -> tuple[str, str]:
    """(order mode, source label) of a side's rows of one point."""
    if "round" not in frame or not frame["round"].notna().all():
        return "", REPETITIONS
    mode = one(frame, "order_mode")
    return mode, PASSES if mode == "blocked" else ROUNDS


def _side(values: np.ndarray, frame: pd.DataFrame, metric: str) -> change.Side | None:
    mode, _ = _unit_source(frame)
    raw = pd.to_numeric(frame[metric], errors="coerce").to_numpy(dtype=float)
    rounds = frame["round"].to_numpy(dtype=float) if "round" in frame else None
    if rounds is not None and not np.isfinite(rounds).all():
        rounds = None
    passes = (
        pd.to_numeric(frame["pass"], errors="coerce").to_numpy(dtype=float)
        if "pass" in frame
        else None
    )
    unit = change.units(rounds, mode, raw.size, passes)
    keep = np.isfinite(values)
    return change.side(values[keep], unit[keep], change.COUNT_OFFSET.get(metric, 0.0))


def _mirrored(o: pd.DataFrame, n: pd.DataFrame) -> bool:
    """Whether a point's throughput is its rows over its time on every row (then the two are
    one change, one hypothesis)."""
    for f in (o, n):
        if not all(c in f for c in TIMED):
            return False
        product = pd.to_numeric(f[TIMED[0]], errors="coerce") * pd.to_numeric(
            f[TIMED[1]], errors="coerce"
        )
        product = product.dropna()
        if product.empty or not np.allclose(product, product.iloc[0], rtol=1e-6):
            return False
    return True


@dataclass
class _Pending:
    sweep: int
    point: PointComparison
    metric: str
    estimate: change.Estimate
    medians: tuple[float, float]
    n: tuple[int, int]
    source: str
    scaled: bool


def _point_estimates(
    engine: str,
    sweep: str,
    name: str,
    o: pd.DataFrame,
    n: pd.DataFrame,
    pc: PointComparison,
    index: int,
) -> list[_Pending]:
    out = []
    mirrored = _mirrored(o, n)
    source = _unit_source(o)[1] if _unit_source(o)[1] == _unit_source(n)[1] else REPETITIONS
    section = min(_section(o), _section(n))
    if section < change.MIN_SECTION_S:
        pc.too_short = section
    for metric, direction in METRICS.items():
        if metric in TIMED and pc.short:
            continue
        scaled = hostspeed.values([o, n], metric)
        x, y = (
            scaled
            if scaled is not None
            else [
                pd.to_numeric(f[metric], errors="coerce").to_numpy(dtype=float)
                if metric in f
                else np.full(len(f), np.nan)
                for f in (o, n)
            ]
        )
        if not (np.isfinite(x).any() and np.isfinite(y).any()):
            continue
        a, b = _side(x, o, metric), _side(y, n, metric)
        if a is None or b is None:
            pc.too_few.append(metric)
            continue
        key = f"{engine}/{sweep}/{name}/{metric}"
        family = f"{engine}/{sweep}/{name}/time" if mirrored and metric in TIMED else key
        est = change.Estimate(
            key,
            f"{engine}:{metric}",
            metric,
            direction,
            a,
            b,
            family,
            block(sweep, n),
            section if metric in TIMED else math.nan,
        )
        xf, yf = x[np.isfinite(x)], y[np.isfinite(y)]
        out.append(
            _Pending(
                index,
                pc,
                metric,
                est,
                (float(np.median(xf)), float(np.median(yf))),
                (int(xf.size), int(yf.size)),
                source,
                scaled is not None,
            )
        )
    return out


def _section(rows: pd.DataFrame) -> float:
    """The median seconds of a point's timed section (its repetitions' ``elapsed_s`` as
    measured; NaN when not recorded)."""
    values = column(rows, "elapsed_s")
    values = values[values > 0]
    return float(np.median(values)) if values.size else math.nan


def block(sweep: str, rows: pd.DataFrame) -> str:
    """The block a point was measured in, whose points share the host's drift: its sweep
    (measured in one stretch of the run), workload and cache state."""
    return f"{sweep}/{one(rows, 'workload') or '?'}/{one(rows, 'cache_requested') or '?'}"


def _cpu_shift(old: pd.DataFrame, new: pd.DataFrame) -> float:
    """The CPU reference's log change over a run: median log probe NEW - OLD (NaN: none)."""
    logs = []
    for f in (old, new):
        probe = column(f, hostspeed.PROBE)
        probe = probe[probe > 0]
        if probe.size == 0:
            return math.nan
        logs.append(float(np.median(np.log(probe))))
    return logs[1] - logs[0]


DEVICE_PROBES = ("device_sync_us", "device_read_us")


def _device_shift(old: pd.DataFrame, new: pd.DataFrame) -> float:
    """The device probe's log change over the rounds of these rows: the larger of its sync's
    and its read's, mean log NEW - OLD (NaN: not recorded). The mean, not the median: a
    shared device is slow in bursts (syncs of 0.15 ms or 4 ms, seen), and a run is as slow as
    the share of its rounds a burst took."""
    moved = []
    for col in DEVICE_PROBES:
        a, b = column(old, col), column(new, col)
        a, b = a[a > 0], b[b > 0]
        if a.size and b.size:
            moved.append(float(np.mean(np.log(b)) - np.mean(np.log(a))))
    return max(moved, default=math.nan)


def _aa_commit(o: pd.DataFrame, n: pd.DataFrame) -> str:
    commit = one(o, "git_commit")
    if commit != one(n, "git_commit") or commit in ("", "unknown") or commit.endswith("-dirty"):
        return ""
    return commit


def _fingerprint(frame: pd.DataFrame) -> str:
    started = frame["started_at"].dropna() if "started_at" in frame else []
    return history_mod.fingerprint(started, column(frame, "elapsed_s"))


def compare_frames(
    old: pd.DataFrame,
    new: pd.DataFrame,
    level: float = DEFAULT_LEVEL,
    min_effect: float = DEFAULT_MIN_EFFECT,
    history: history_mod.History | None = None,
    old_name: str = "OLD",
    new_name: str = "NEW",
    procedure: str = BH,
) -> Comparison:
    """Compare two runs' rows (``load_side``'s frames)."""
    keys_old, keys_new = groups(old, ["engine", "sweep"]), groups(new, ["engine", "sweep"])
    common = sorted(set(keys_old) & set(keys_new))
    sweeps: list[SweepComparison] = []
    pending: list[_Pending] = []
    per_engine: dict[str, list[tuple[pd.DataFrame, pd.DataFrame]]] = {}
    per_kind: dict[str, list[tuple[pd.DataFrame, pd.DataFrame]]] = {}
    for i, key in enumerate(common):
        engine, sweep = key
        o, n = hostspeed.annotate([keys_old[key], keys_new[key]])
        m = match_sweep(engine, sweep, o, n)
        points = []
        for k, po, pn in m.common:
            pc = PointComparison(point_name(pn, k, m.cols))
            pc.incomparable, pc.differences = provenance(po, pn)
            if not pc.incomparable:
                pending += _point_estimates(engine, sweep, pc.point, po, pn, pc, i)
                per_engine.setdefault(engine, []).append((po, pn))
                per_kind.setdefault(f"{engine}/{block(sweep, pn)}", []).append((po, pn))
            points.append(pc)
        sweeps.append(SweepComparison(engine, sweep, points, m.only_old, m.only_new, m.one_sided))
    if not any(s.points for s in sweeps):
        raise CompareInputError(
            f"{new_name}: no point in common with {old_name} (points match on engine, sweep, "
            "knobs, workload and its parameters, cache state, data set)"
        )
    # The host and the runs per engine: history pooled where both sides are one host.
    hosts, runs, commits, cpu = {}, {}, {}, {}
    device = {
        k: _device_shift(
            pd.concat([p for p, _ in v], ignore_index=True, sort=False),
            pd.concat([q for _, q in v], ignore_index=True, sort=False),
        )
        for k, v in per_kind.items()
    }
    for engine, pairs in per_engine.items():
        o = pd.concat([p for p, _ in pairs], ignore_index=True, sort=False)
        n = pd.concat([q for _, q in pairs], ignore_index=True, sort=False)
        hosts[engine] = one(n, "host_name") if one(n, "host_name") == one(o, "host_name") else ""
        runs[engine] = (_fingerprint(o), _fingerprint(n))
        commits[engine] = _aa_commit(o, n) if hosts[engine] else ""
        for metric in METRICS:
            cpu[f"{engine}:{metric}"] = _cpu_shift(o, n)
        device[f"{engine}/"] = _device_shift(o, n)
    between, run_shifts = {}, {}
    if history is not None:
        for engine, host in hosts.items():
            if not host:
                continue
            for metric in METRICS:
                group = f"{engine}:{metric}"
                between[group] = history.between(host, group, runs[engine])
                run_shifts[group] = history.shifts(host, group, runs[engine])
    judgement = change.judge(
        [p.estimate for p in pending],
        level,
        min_effect,
        between,
        run_shifts,
        cpu,
        device,
        procedure=procedure,
    )
    for p, j in zip(pending, judgement.points):
        p.point.changes.append(MetricChange(p.metric, j, *p.n, *p.medians, p.source, p.scaled))
    for s in sweeps:
        s.points.sort(key=lambda p: (p.rank, p.point))
    result = Comparison(
        old_name,
        new_name,
        level,
        min_effect,
        procedure,
        sweeps,
        [f"{e}/{s}" for e, s in sorted(set(keys_old) - set(keys_new))],
        [f"{e}/{s}" for e, s in sorted(set(keys_new) - set(keys_old))],
        judgement,
    )
    # the history's drift of a run: the root mean square of its blocks' shifts (the whole
    # run's where no block had its own), what a block's shift is judged against next time
    shifts = {}
    for group in judgement.between:
        own = [s.shift for s in judgement.shifts if s.group == group and s.kind]
        whole = [s.shift for s in judgement.shifts if s.group == group and not s.kind]
        if own or whole:
            shifts[group] = math.sqrt(float(np.mean(np.square(own or whole))))
    for group, b in judgement.between.items():
        engine = group.split(":")[0]
        if commits.get(engine) and runs[engine][0] != runs[engine][1] and b.points:
            entry = history_mod.entry(
                b.own_sd**2, b.points, shifts.get(group, math.nan), commits[engine], runs[engine]
            )
            result.aa.append((hosts[engine], group, entry))
    result.aa_commit = ", ".join(sorted({c for c in commits.values() if c}))
    result.cpu, result.device = cpu, device
    if history is not None:
        result.history_path, result.history_entries = str(history.path), history.count()
    return result


def compare(
    old_path: Path,
    new_path: Path,
    level: float = DEFAULT_LEVEL,
    min_effect: float = DEFAULT_MIN_EFFECT,
    history: history_mod.History | None = None,
    procedure: str = BH,
) -> Comparison:
    """Compare two runs' results; ``history`` (``read_history``) pools the host's A/A
    comparisons into the noise, none when None (the prior then)."""
    old_path, new_path = Path(old_path), Path(new_path)
    return compare_frames(
        load_side(old_path),
        load_side(new_path),
        level,
        min_effect,
        history,
        str(old_path),
        str(new_path),
        procedure,
    )


def read_history(old_path: Path, new_path: Path, path: Path | None = None) -> history_mod.History:
    """``path`` when given, else NEW's results directory's history with OLD's merged in.
    Raises CompareInputError for a file that cannot be used."""
    try:
        if path is not None:
            return history_mod.load(path)
        h = history_mod.load(results_root(new_path) / history_mod.NAME)
        h.merge(history_mod.load(results_root(old_path) / history_mod.NAME))
    except history_mod.HistoryError as exc:
        raise CompareInputError(str(exc)) from None
    return h


def record(result: Comparison, history: history_mod.History) -> int:
    """Add the comparison's A/A entries to the history (after judging); how many were new."""
    result.recorded = sum(history.add(*item) for item in result.aa)
    return result.recorded
