"""`tunelab compare OLD NEW`: what changed between two runs of the same sweeps.

OLD and NEW are results directories (``<engine>/<sweep>.csv`` merged files) or result CSVs.
Points are matched on every column that says what was measured (engine, sweep, knobs as
asked, workload and its parameters, cache state asked, access mode, data set); the point id
only names them, so results written under another id scheme still match.

Per matched point and metric: the ratio of medians NEW/OLD, a percentile bootstrap interval
for it (each side's repetitions resampled, seeded per point, so adding a point changes no
other point's numbers) and a two-sided Mann–Whitney U test. A change is significant when the
interval excludes 1 and p < alpha; it is "worse" when, in addition, it moves past the
threshold in the worse direction and past the point's noise floor on that host (the larger of
the spread within the runs plus an allowance for how much more points move between runs plus
how far the host's CPU speed moved between them, and the A/A floor of earlier runs of one
commit, ``report.noise``, times a multiplier). Points whose provenance makes them
incomparable (another engine version, another host, a cache state achieved another way) are
listed, not compared.

Comparing two runs of one clean commit on one host records each point's |log ratio| as an A/A
observation in the floor file (``noise-floor.json`` in NEW's results directory, with OLD's
observations carried over, unless ``--noise-floor`` names one), after judging them.

Exit codes: 1 when a point got significantly worse beyond the threshold and its noise floor,
0 otherwise, 2 for bad input (one line ``file: message`` on stderr).
"""

from __future__ import annotations

import argparse
import html
import math
import numbers
import platform
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tunelab.analysis import hostspeed, stats
from tunelab.cache import method_family
from tunelab.report import noise
from tunelab.report.data import ReportInputError, read_rows
from tunelab.report.labels import fmt, label
from tunelab.results import APPLIED_PREFIX, KNOB_PREFIX, WORKLOAD_PREFIX

# Metric -> +1 when a higher value is worse, -1 when a lower one is.
METRICS: dict[str, int] = {"elapsed_s": 1, "throughput_rows_s": -1, "c_physical_reads": 1}
# Counters whose medians must also differ by this many units to pass the noise: a cold point
# reading a few pages (the pool's first misses, a catalog page) moves by several times from
# run to run; 64 pages is 256 KiB to 2 MiB, below what any sweep's effect is made of.
COUNT_FLOOR: dict[str, float] = {"c_physical_reads": 64}
# Columns beside knob_* and wl_* that say what a point measured.
IDENTITY = (
    "engine",
    "sweep",
    "workload",
    "cache_requested",
    "access_mode",
    "dataset_rows",
    "seed",
)
# Differences that make a point's times incomparable: (what, columns). Hosts are told apart
# by name where both sides recorded one, else by their hardware.
INCOMPARABLE = (
    ("engine version", ("engine_version",)),
    ("host", ("host_name",)),
    ("host", ("host_cpu", "host_cores", "host_mem_gib")),
    ("cache state achieved", ("cache_achieved", "cache_method")),
)
# Differences that are listed but do not stop the comparison (applied_* are added: the
# values the engine applied, calibrated knob values among them).
LISTED = (
    "image",
    "host_cpu",
    "host_cores",
    "host_mem_gib",
    "host_kernel",
    "host_fs",
    "tunelab_version",
    "git_commit",
    "access_path",
    "client_route",
)

DEFAULT_ALPHA = 0.05
DEFAULT_THRESHOLD = 0.10
DEFAULT_RESAMPLES = stats.DEFAULT_RESAMPLES
DEFAULT_SEED = stats.DEFAULT_SEED
DEFAULT_NOISE_MULTIPLIER = 1.0

# Verdicts, most severe first (the order of the tables and of the text lines). "-noise":
# significant and past the threshold, but not past the point's noise floor.
WORSE, WORSE_NOISE, WORSE_WITHIN, BETTER, BETTER_NOISE, BETTER_WITHIN, TOO_FEW, SAME = (
    "worse",
    "worse-noise",
    "worse-within",
    "better",
    "better-noise",
    "better-within",
    "too-few",
    "same",
)
RANK = {
    v: i
    for i, v in enumerate(
        (WORSE, WORSE_NOISE, WORSE_WITHIN, BETTER, BETTER_NOISE, BETTER_WITHIN, TOO_FEW, SAME)
    )
}
SIGNIFICANT = (WORSE, WORSE_NOISE, WORSE_WITHIN, BETTER, BETTER_NOISE, BETTER_WITHIN)
INCOMPARABLE_RANK = len(RANK)


class CompareInputError(ValueError):
    """Bad input; the message is one line ``file: message``."""


# -- statistics (analysis.stats) --------------------------------------------------------------
RatioTest = stats.RatioTest
compare_samples = stats.compare_samples
mann_whitney_p = stats.mann_whitney_p
_finite = stats.finite_values


def verdict(
    test: RatioTest,
    direction: int,
    alpha: float,
    threshold: float,
    bar: float = 0.0,
    count_floor: float = 0.0,
) -> str:
    """worse/better beyond the threshold and the noise bar (a |log ratio|, ``Noise.bar``;
    for a counter also ``count_floor`` units between the medians), within the noise, within
    the threshold, or no significant change. For a metric where lower is worse the threshold
    is the same change seen from the other side, 1 / (1 + threshold): a time 10 % up is a
    throughput 9.1 % down."""
    if not test.significant(alpha):
        return TOO_FEW if test.min_p >= alpha else SAME
    up = test.ratio > 1
    worse = up if direction > 0 else not up
    past = test.ratio > 1 + threshold or test.ratio < 1 / (1 + threshold)
    beyond_noise = test.ratio == 0 or abs(math.log(test.ratio)) > bar  # inf passes any bar
    beyond_noise = beyond_noise and abs(test.new_median - test.old_median) >= count_floor
    if worse:
        return (WORSE if beyond_noise else WORSE_NOISE) if past else WORSE_WITHIN
    return (BETTER if beyond_noise else BETTER_NOISE) if past else BETTER_WITHIN


# -- input ---------------------------------------------------------------------------------
def _engine_names() -> set[str]:
    from tunelab import engines

    return set(engines.names())


def result_files(path: Path) -> list[Path]:
    """The merged result files of a results directory (``<engine>/<sweep>.csv``; other
    folders, such as bpsim's curves, are left alone), or the CSVs of a directory that holds
    them directly (one engine's folder, one sweep's point files), or the file itself."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CompareInputError(f"{path}: no such file or directory")
    names = _engine_names()
    files = sorted(p for p in path.glob("*/*.csv") if p.parent.name in names)
    if not files:
        files = sorted(p for p in path.glob("*.csv") if not p.name.endswith(".partial.csv"))
    if not files:
        raise CompareInputError(f"{path}: no result CSVs (<engine>/<sweep>.csv) in it")
    return files


def load_side(path: Path) -> pd.DataFrame:
    """Every result row under ``path``; engine and sweep from the file's place when the rows
    lack them."""
    frames = []
    for file in result_files(path):
        try:
            frame = read_rows(file)
        except ReportInputError as exc:
            raise CompareInputError(str(exc)) from None
        if "engine" not in frame:
            frame["engine"] = file.parent.name
        if "sweep" not in frame:
            frame["sweep"] = file.stem
        frames.append(frame)
    return pd.concat(frames, ignore_index=True, sort=False)


def canon(value: object) -> str:
    """One text per value whatever type a CSV column got (10, 10.0 and "10" are the same
    knob value; a missing value is "")."""
    if value is None:
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value)).lower()
    if isinstance(value, numbers.Real):
        f = float(value)
        if math.isnan(f):
            return ""
        return str(int(f)) if f.is_integer() and abs(f) < 1e15 else repr(f)
    text = str(value)
    if text.lower() in ("true", "false"):
        return text.lower()
    try:
        f = float(text)
    except ValueError:
        return text
    return canon(f) if math.isfinite(f) else text


def _column(frame: pd.DataFrame, metric: str) -> np.ndarray:
    return _finite(frame[metric]) if metric in frame else np.array([])


def _present(frame: pd.DataFrame, col: str) -> bool:
    return col in frame and frame[col].notna().any()


def _values(frame: pd.DataFrame, col: str) -> str:
    """The distinct values of a column, sorted, as one text ("—" when not recorded); warm-up
    methods that leave the same state count as one (``cache.method_family``)."""
    if not _present(frame, col):
        return "—"
    values = frame[col].dropna()
    if col == "cache_method":
        values = values.astype(str).map(method_family)
    return ", ".join(sorted({canon(v) for v in values}))


# -- comparison ----------------------------------------------------------------------------
@dataclass
class MetricChange:
    metric: str
    test: RatioTest
    verdict: str
    noise: noise.Noise = field(default_factory=lambda: noise.Noise(float("nan"), noise.ROUNDS))
    scaled: bool = False  # compared at one CPU speed (analysis.hostspeed)


@dataclass(frozen=True)
class Difference:
    what: str  # engine version, host, cache state achieved
    column: str
    old: str
    new: str

    def text(self, arrow: str = "->") -> str:
        return f"{self.column}: {self.old} {arrow} {self.new}"


@dataclass
class PointComparison:
    point: str
    changes: list[MetricChange] = field(default_factory=list)
    incomparable: list[Difference] = field(default_factory=list)
    differences: dict[str, tuple[str, str]] = field(default_factory=dict)  # listed columns

    @property
    def rank(self) -> int:
        if self.incomparable:
            return INCOMPARABLE_RANK
        return min((RANK[c.verdict] for c in self.changes), default=RANK[SAME])


@dataclass
class SweepComparison:
    engine: str
    sweep: str
    points: list[PointComparison]
    only_old: list[str]
    only_new: list[str]
    one_sided: list[str]  # identity columns recorded on one side only, left out of matching

    @property
    def name(self) -> str:
        return f"{self.engine}/{self.sweep}"


@dataclass
class Comparison:
    old: str
    new: str
    alpha: float
    threshold: float
    resamples: int
    seed: int
    sweeps: list[SweepComparison]
    sweeps_only_old: list[str]
    sweeps_only_new: list[str]
    noise_multiplier: float = DEFAULT_NOISE_MULTIPLIER
    floor_path: str = ""  # the A/A floor file read ("" when none)
    floor_observations: int = 0  # observations it held when read
    # A/A observations this comparison makes (two runs of one commit on one host):
    # (host, point key, metric, observation), recorded after judging by `record`.
    aa: list[tuple[str, str, str, dict]] = field(default_factory=list)
    aa_commit: str = ""
    recorded: int = 0

    @property
    def sources(self) -> set[str]:
        """Where the in-run noise came from: rounds, repetitions or both."""
        return {c.noise.source for _, _, c in self.changes()}

    def points(self) -> list[tuple[SweepComparison, PointComparison]]:
        return [(s, p) for s in self.sweeps for p in s.points]

    def changes(self) -> list[tuple[SweepComparison, PointComparison, MetricChange]]:
        return [(s, p, c) for s, p in self.points() for c in p.changes]

    def count(self, *verdicts: str) -> int:
        return sum(c.verdict in verdicts for _, _, c in self.changes())

    @property
    def worse(self) -> bool:
        return self.count(WORSE) > 0


def _identity(old: pd.DataFrame, new: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(columns to match on, columns left out because one side lacks them). A column only
    one side recorded and that takes one value there (a parameter added with its default)
    cannot tell points apart: it is left out and listed; one that varies stays, so its
    points only match where both sides agree."""
    cols = []
    for frame in (old, new):
        for c in frame.columns:
            if (c in IDENTITY or c.startswith((KNOB_PREFIX, WORKLOAD_PREFIX))) and c not in cols:
                cols.append(c)
    keep, one_sided = [], []
    for c in cols:
        in_old, in_new = _present(old, c), _present(new, c)
        if in_old and in_new:
            keep.append(c)
        elif in_old or in_new:
            side = old if in_old else new
            if side[c].map(canon).nunique() > 1:
                keep.append(c)
            else:
                one_sided.append(f"{c} ({'OLD' if in_old else 'NEW'} only: {_values(side, c)})")
    return keep, one_sided


def _groups(frame: pd.DataFrame, cols: list[str]) -> dict[tuple[str, ...], pd.DataFrame]:
    """The frame's rows per distinct value of ``cols`` (compared as canonical text)."""
    parts = [frame[c].map(canon) if c in frame else pd.Series("", frame.index) for c in cols]
    index: dict[tuple[str, ...], list[int]] = {}
    for i, key in enumerate(zip(*parts)):
        index.setdefault(key, []).append(i)
    return {k: frame.iloc[rows].reset_index(drop=True) for k, rows in index.items()}


def _point_name(rows: pd.DataFrame, key: tuple[str, ...], cols: list[str]) -> str:
    if _present(rows, "point_id"):
        return str(rows["point_id"].dropna().iloc[0])
    named = [f"{c}={v}" for c, v in zip(cols, key) if c not in ("engine", "sweep") and v]
    return ",".join(named) or "(the only point)"


def _provenance(old: pd.DataFrame, new: pd.DataFrame) -> tuple[list[Difference], dict]:
    """(why the point is incomparable, listed differences {column: (old, new)})."""
    reasons: list[Difference] = []
    used: set[str] = set()
    for what, cols in INCOMPARABLE:
        both = [c for c in cols if _present(old, c) and _present(new, c)]
        if not both or (what == "host" and "host_name" in used):
            continue
        used.update(both)
        for c in both:
            a, b = _values(old, c), _values(new, c)
            if a != b:
                reasons.append(Difference(what, c, a, b))
    listed = [c for c in LISTED if c not in used]
    listed += sorted({c for c in [*old.columns, *new.columns] if c.startswith(APPLIED_PREFIX)})
    differences = {}
    for c in listed:
        a, b = _values(old, c), _values(new, c)
        if a != b:
            differences[c] = (a, b)
    return reasons, differences


def _one(frame: pd.DataFrame, col: str) -> str:
    """The column's only value ("" when it is missing or takes several)."""
    if col not in frame:
        return ""
    values = {canon(v) for v in frame[col]}
    return values.pop() if len(values) == 1 else ""


def _in_rounds(frame: pd.DataFrame) -> bool:
    """Whether every row says its round: repetitions spread over the run, not back to back."""
    return "round" in frame and bool(frame["round"].notna().all())


def _run_name(frame: pd.DataFrame) -> str:
    started = frame["started_at"].dropna() if "started_at" in frame else []
    return noise.run_fingerprint(started, _column(frame, "elapsed_s"))


def _aa_commit(o: pd.DataFrame, n: pd.DataFrame) -> str:
    """The commit both runs measured when it is one clean commit (a dirty tree may differ
    between runs), else ""."""
    commit = _one(o, "git_commit")
    if commit != _one(n, "git_commit") or commit in ("", "unknown") or commit.endswith("-dirty"):
        return ""
    return commit


@dataclass
class NoiseContext:
    """What a sweep's comparison needs to judge against noise and to record A/A observations."""

    multiplier: float = DEFAULT_NOISE_MULTIPLIER
    floor: noise.FloorFile | None = None
    old: str = ""
    new: str = ""
    aa: list[tuple[str, str, str, dict]] = field(default_factory=list)
    commits: set[str] = field(default_factory=set)


def compare_sweep(
    engine: str,
    sweep: str,
    old: pd.DataFrame,
    new: pd.DataFrame,
    alpha: float,
    threshold: float,
    resamples: int,
    seed: int,
    context: NoiseContext | None = None,
) -> SweepComparison:
    context = context or NoiseContext()
    old, new = hostspeed.annotate([old, new])  # the CPU reference's weight, from both runs
    cols, one_sided = _identity(old, new)
    old_groups, new_groups = _groups(old, cols), _groups(new, cols)
    common = sorted(set(old_groups) & set(new_groups))
    points = []
    for key in common:
        o, n = old_groups[key], new_groups[key]
        point = PointComparison(_point_name(n, key, cols))
        point.incomparable, point.differences = _provenance(o, n)
        if not point.incomparable:
            point.changes = _judge(engine, sweep, key, point.point, o, n, alpha, threshold,
                                   resamples, seed, context)  # fmt: skip
        points.append(point)
    points.sort(key=lambda p: (p.rank, p.point))
    only_old = sorted(_point_name(old_groups[k], k, cols) for k in set(old_groups) - set(common))
    only_new = sorted(_point_name(new_groups[k], k, cols) for k in set(new_groups) - set(common))
    return SweepComparison(engine, sweep, points, only_old, only_new, one_sided)


def _judge(
    engine: str, sweep: str, key: tuple[str, ...], name: str, o: pd.DataFrame,
    n: pd.DataFrame, alpha: float, threshold: float, resamples: int, seed: int,
    context: NoiseContext,
) -> list[MetricChange]:  # fmt: skip
    """The point's metrics, each judged against the test, the threshold and its noise; the A/A
    observations it gives when both runs measured one clean commit on one host."""
    source = noise.ROUNDS if _in_rounds(o) and _in_rounds(n) else noise.REPETITIONS
    host = _one(n, "host_name") if _one(n, "host_name") == _one(o, "host_name") else ""
    floor_key = f"{engine}/{sweep}/{name}"
    commit = _aa_commit(o, n) if host else ""
    runs = (_run_name(o), _run_name(n)) if commit else ("", "")
    changes = []
    cpu_shift = hostspeed.shift(o, n)
    for metric, direction in METRICS.items():
        x, y = _column(o, metric), _column(n, metric)
        scaled = hostspeed.values([o, n], metric)
        if scaled is not None:
            x, y = (_finite(v) for v in scaled)
        if x.size == 0 or y.size == 0:
            continue
        where = f"{engine}/{sweep}/{'|'.join(key)}/{metric}"  # the bootstrap's seed, as before
        test = compare_samples(x, y, alpha, resamples, seed, where)
        aa, count = (float("nan"), 0)
        excess, seen = noise.DEFAULT_EXCESS.get(metric, 0.0), 0
        if context.floor is not None and host:
            aa, count = context.floor.floor(host, floor_key, metric)
            excess, seen = context.floor.excess(host, engine, metric)
        width = noise.in_run(x, y)
        floor = COUNT_FLOOR.get(metric, 0.0)
        cpu = cpu_shift if scaled is not None else 0.0
        point_noise = noise.Noise(width, source, aa, count, context.multiplier, excess, seen,
                                  floor, cpu)  # fmt: skip
        code = verdict(test, direction, alpha, threshold, point_noise.bar, floor)
        changes.append(MetricChange(metric, test, code, point_noise, scaled is not None))
        if commit and runs[0] != runs[1] and 0 < test.ratio < math.inf:
            obs = noise.observation(test.ratio, commit, runs, (x.size, y.size), source,
                                    context.old, context.new, in_run_width=width)  # fmt: skip
            context.aa.append((host, floor_key, metric, obs))
            context.commits.add(commit)
    return changes


def results_root(path: Path) -> Path:
    """The results directory a side names: the directory itself, or for a merged CSV
    ``<root>/<engine>/<sweep>.csv`` its root, for another CSV the folder holding it."""
    path = Path(path)
    if path.is_dir():
        return path
    return path.parent.parent if path.parent.name in _engine_names() else path.parent


def read_floor(old_path: Path, new_path: Path, floor_path: Path | None = None) -> noise.FloorFile:
    """The A/A floor: ``floor_path`` when given, else NEW's results directory's
    ``noise-floor.json`` with OLD's observations merged in (the floor travels with the
    results). Raises CompareInputError for a file that cannot be used."""
    try:
        if floor_path is not None:
            return noise.load(floor_path)
        floor = noise.load(results_root(new_path) / noise.FLOOR_NAME)
        floor.merge(noise.load(results_root(old_path) / noise.FLOOR_NAME))
    except noise.NoiseFloorError as exc:
        raise CompareInputError(str(exc)) from None
    return floor


def record(result: Comparison, floor: noise.FloorFile) -> int:
    """Add the comparison's A/A observations to the floor (after judging, so none judges
    itself); how many were new."""
    result.recorded = sum(floor.add(*item) for item in result.aa)
    return result.recorded


def compare(
    old_path: Path,
    new_path: Path,
    alpha: float = DEFAULT_ALPHA,
    threshold: float = DEFAULT_THRESHOLD,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    noise_multiplier: float = DEFAULT_NOISE_MULTIPLIER,
    floor: noise.FloorFile | None = None,
) -> Comparison:
    """Compare two runs; ``floor`` (``read_floor``) gives the A/A floor, none when None. The
    A/A observations the comparison makes are in ``result.aa`` (``record`` keeps them)."""
    old_path, new_path = Path(old_path), Path(new_path)
    by = ["engine", "sweep"]
    old, new = _groups(load_side(old_path), by), _groups(load_side(new_path), by)
    context = NoiseContext(noise_multiplier, floor, str(old_path), str(new_path))
    sweeps = [
        compare_sweep(*key, old[key], new[key], alpha, threshold, resamples, seed, context)
        for key in sorted(set(old) & set(new))
    ]
    result = Comparison(
        old=str(old_path),
        new=str(new_path),
        alpha=alpha,
        threshold=threshold,
        resamples=resamples,
        seed=seed,
        sweeps=sweeps,
        sweeps_only_old=[f"{e}/{s}" for e, s in sorted(set(old) - set(new))],
        sweeps_only_new=[f"{e}/{s}" for e, s in sorted(set(new) - set(old))],
        noise_multiplier=noise_multiplier,
        floor_path=str(floor.path) if floor is not None else "",
        floor_observations=floor.count() if floor is not None else 0,
        aa=context.aa,
        aa_commit=", ".join(sorted(context.commits)),
    )
    if not result.points():
        raise CompareInputError(
            f"{new_path}: no point in common with {old_path} (points match on engine, sweep, "
            "knobs, workload and its parameters, cache state, data set)"
        )
    return result


# -- text ----------------------------------------------------------------------------------
def ratio_text(r: float) -> str:
    if math.isnan(r):
        return "nan"
    if math.isinf(r):
        return "inf"
    return f"{r:.2f}" if 0.01 <= r < 100 else f"{r:.3g}"


def times_text(r: float) -> str:
    """A ratio as "1.23x"; "inf" where the old median was 0."""
    text = ratio_text(r)
    return text if math.isinf(r) or math.isnan(r) else f"{text}x"


def p_text(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def threshold_text(threshold: float) -> str:
    return f"{100 * threshold:g} %"


def verdict_text(code: str, threshold: float) -> str:
    within = f"within {threshold_text(threshold)}"
    return {
        WORSE: "worse",
        WORSE_NOISE: "worse, within the noise",
        WORSE_WITHIN: f"worse, {within}",
        BETTER: "better",
        BETTER_NOISE: "better, within the noise",
        BETTER_WITHIN: f"better, {within}",
        TOO_FEW: "too few repetitions to tell",
        SAME: "no significant change",
    }[code]


SCALED_MARK = " (1 CPU speed)"


def change_line(sweep: str, point: str, c: MetricChange, threshold: float) -> str:
    """E.g. "sqlite/s p: elapsed_s 1.12x [1.05, 1.19] p=0.002, noise ±6 % (rounds) / ±4 %
    (A/A, 3 comparisons): worse"."""
    t = c.test
    return (
        f"{sweep} {point}: {c.metric}{SCALED_MARK if c.scaled else ''} {times_text(t.ratio)} "
        f"[{ratio_text(t.low)}, {ratio_text(t.high)}] p={p_text(t.p)}, {c.noise.text()}: "
        f"{verdict_text(c.verdict, threshold)}"
    )


def summary_line(result: Comparison) -> str:
    points = result.points()
    compared = sum(not p.incomparable for _, p in points)
    within = result.count(WORSE_WITHIN, BETTER_WITHIN)
    unchanged = result.count(SAME, TOO_FEW)
    only_old = sum(len(s.only_old) for s in result.sweeps)
    only_new = sum(len(s.only_new) for s in result.sweeps)
    return (
        f"{compared} point(s) compared ({len(result.changes())} metrics): "
        f"{result.count(WORSE)} worse, {result.count(BETTER)} better, "
        f"{within} within {threshold_text(result.threshold)}, "
        f"{result.count(WORSE_NOISE, BETTER_NOISE)} within the noise, {unchanged} unchanged; "
        f"{len(points) - compared} incomparable; {only_old} only in OLD, {only_new} only in NEW"
    )


def text_lines(result: Comparison) -> list[str]:
    """One line per significant change, then one per incomparable point, then the counts."""
    changes = [
        (RANK[c.verdict], s.name, p.point, c)
        for s, p, c in result.changes()
        if c.verdict in SIGNIFICANT
    ]
    lines = [
        change_line(name, point, c, result.threshold)
        for _, name, point, c in sorted(changes, key=lambda t: t[:3])
    ]
    for s, p in result.points():
        if p.incomparable:
            lines.append(
                f"{s.name} {p.point}: incomparable ({'; '.join(d.text() for d in p.incomparable)})"
            )
    lines.append(summary_line(result))
    return lines


# -- HTML ----------------------------------------------------------------------------------
PAGE_CSS = """
.tl-worse { color: #b42318; font-weight: 600; }
.tl-better { color: #1a7f37; font-weight: 600; }
.tl-muted { color: #57606a; }
.jp-RenderedHTMLCommon table.tl-table td.tl-point { white-space: normal; max-width: 22rem;
  vertical-align: top; }
.jp-RenderedHTMLCommon table.tl-table td.tl-why { white-space: normal; max-width: 26rem;
  vertical-align: top; font-size: 12px; }
"""

VERDICT_CLASS = {WORSE: "tl-worse", WORSE_NOISE: "tl-worse", WORSE_WITHIN: "tl-worse",
                 BETTER: "tl-better", BETTER_NOISE: "tl-better",
                 BETTER_WITHIN: "tl-better"}  # fmt: skip


def _e(value: object) -> str:
    return html.escape(value if isinstance(value, str) else fmt(value))


def _note(text: str, kind: str = "note") -> str:
    return f'<div class="tl-{kind}">{text}</div>'


def _kv(rows: list[tuple[str, str]], table_id: str) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="tl-table tl-kv" id="{table_id}"><tbody>{body}</tbody></table>'


def _point_notes(p: PointComparison) -> str:
    bits = [
        f"<b>incomparable</b> ({html.escape(d.what)}): {html.escape(d.text('→'))}"
        for d in p.incomparable
    ]
    bits += [
        f"{html.escape(c)}: {html.escape(a)} → {html.escape(b)}"
        for c, (a, b) in p.differences.items()
    ]
    return "<br>".join(bits)


def sweep_table(s: SweepComparison, result: Comparison, table_id: str) -> str:
    level = f"{100 * (1 - result.alpha):g} %"
    head = ["point", "metric", "n OLD / NEW", "median OLD", "median NEW", "NEW / OLD",
            f"{level} interval", "noise floor", "p", "verdict", "provenance"]  # fmt: skip
    rows = []
    for p in s.points:
        notes = _point_notes(p)
        if p.incomparable or not p.changes:
            verdict_cell = "incomparable" if p.incomparable else "no metric on both sides"
            cells = [f'<td class="tl-point">{_e(p.point)}</td>', *["<td>—</td>"] * 8,
                     f"<td>{verdict_cell}</td>", f'<td class="tl-why">{notes}</td>']  # fmt: skip
            rows.append("<tr>" + "".join(cells) + "</tr>")
            continue
        span = len(p.changes)
        for i, c in enumerate(p.changes):
            t = c.test
            cls = VERDICT_CLASS.get(c.verdict, "tl-muted" if c.verdict != SAME else "")
            cells = []
            if i == 0:
                cells.append(f'<td class="tl-point" rowspan="{span}">{_e(p.point)}</td>')
            cells += [
                f"<td>{_e(label(c.metric) + (SCALED_MARK if c.scaled else ''))}</td>",
                f"<td>{t.n_old} / {t.n_new}</td>",
                f"<td>{_e(t.old_median)}</td>",
                f"<td>{_e(t.new_median)}</td>",
                f"<td><b>{times_text(t.ratio).replace('x', '×')}</b></td>",
                f"<td>[{ratio_text(t.low)}, {ratio_text(t.high)}]</td>",
                f"<td>{_e(c.noise.text().removeprefix('noise '))}</td>",
                f"<td>{p_text(t.p)}</td>",
                f'<td class="{cls}">{_e(verdict_text(c.verdict, result.threshold))}</td>',
            ]
            if i == 0:
                cells.append(f'<td class="tl-why" rowspan="{span}">{notes}</td>')
            rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return (
        f'<div class="tl-wide"><table class="tl-table" id="{table_id}"><thead><tr>{header}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _aggregate(s: SweepComparison) -> list[tuple[str, str]]:
    """Per column: each OLD → NEW change and how many points it concerns."""
    seen: Counter[tuple[str, str, str, bool]] = Counter()
    for p in s.points:
        seen.update((d.column, d.old, d.new, True) for d in p.incomparable)
        seen.update((col, a, b, False) for col, (a, b) in p.differences.items())
    rows = []
    for (col, a, b, stops), n in sorted(seen.items(), key=lambda kv: (not kv[0][3], kv[0][0])):
        tag = " <b>(incomparable)</b>" if stops else ""
        rows.append(
            (
                col,
                f"{_e(a)} → {_e(b)} <span class='tl-muted'>({n} of {len(s.points)} "
                f"points)</span>{tag}",
            )
        )
    if s.one_sided:
        rows.append(("left out of matching", _e("; ".join(s.one_sided))))
    if s.only_old:
        rows.append(("points only in OLD", _e(", ".join(s.only_old))))
    if s.only_new:
        rows.append(("points only in NEW", _e(", ".join(s.only_new))))
    return rows


def method_text(result: Comparison) -> str:
    level = f"{100 * (1 - result.alpha):g} %"
    return (
        f"Per point and metric: the ratio of the medians NEW / OLD; its {level} interval is a "
        f"percentile bootstrap ({result.resamples} resamples of each side's repetitions, seed "
        f"{result.seed}); p is a two-sided Mann–Whitney U test (exact for small samples, by "
        "exact permutation where values tie). A change is significant when the interval "
        f"excludes 1 and p < {result.alpha:g}; it is worse when it also moves past "
        f"{threshold_text(result.threshold)} in the worse direction (time and physical reads "
        f"up by more than {threshold_text(result.threshold)}, throughput down by the same "
        "change seen from the other side). Points match on engine, sweep, every knob as asked, "
        "workload and its parameters, cache state asked, access mode and data set. A point "
        "measured with another engine version (for engines in containers it names the image), "
        "on another host, or whose cache state was achieved another way is incomparable and "
        "not compared; other differences (code version, kernel, file system, the values the "
        "engine applied — calibrated knob values among them — and the access path) are listed. "
        f"Times and rates marked {SCALED_MARK.strip()} are compared {hostspeed.NOTE}: "
        "the CPU seconds of the measuring process and of a server engine, each by the "
        "reference timed on its own CPUs, the seconds spent waiting kept as measured, and the "
        "correction weighted by how far both runs' repetitions follow it."
    )


def percent_text(h: float) -> str:
    """A log allowance as "7.8 %"."""
    return noise.percent(h).removeprefix("±")


def noise_text(result: Comparison) -> str:
    """How the noise floor was estimated, where the A/A floor came from and what was kept."""
    k = result.noise_multiplier
    times = "" if k == 1 else f"{k:g} × "
    text = (
        "A change is flagged worse or better only when it also passes the point's noise "
        f"floor: {times}the larger of two estimates of how much the point moves from run to run "
        f"on this host. In the run: the width of the central {noise.IN_RUN_CENTRAL:.0%} of "
        "the point's values within one run (90th over 10th percentile), the wider side: a "
        "run's median can land anywhere among them when the host's state lasts for a while, "
        "so two runs of one commit differ by up to that much. Where the rows carry their "
        "round, the repetitions were spread over the run, so this includes the host's drift "
        "across it "
        '("rounds"); otherwise they ran back to back and their spread hides that drift '
        "(\"repetitions\"). Between runs: a run's state can last the whole run (the point's "
        "engine opened anew, a server start, the device that day), so single points move from run "
        "to run by more than their in-run width; the in-run width gets the largest such "
        "excess added, seen over every point of the engine in this host's A/A comparisons "
        f"once there are {noise.MIN_EXCESS_POINTS} of them, until then "
        f"{percent_text(noise.DEFAULT_EXCESS['elapsed_s'])} for times (the largest seen in "
        "this lab's own A/A comparisons of its default packs; docs/compare.md), and for "
        "times compared at one CPU speed how far the CPU reference puts the two runs' CPU "
        "speeds apart (the correction does not take all of a slower CPU out). A/A: the "
        "largest |log ratio| between two runs of one commit on this host, over the last "
        f"{noise.KEEP} such comparisons of the point. A significant change past the threshold "
        'but not past the floor is "within the noise".'
    )
    if result.floor_path:
        text += (
            f" A/A floor file: {result.floor_path} ({result.floor_observations} observation(s) read"
        )
        if result.aa:
            text += (
                f"; OLD and NEW measured commit {result.aa_commit} on one host: "
                f"{result.recorded} observation(s) recorded after judging"
            )
        text += ")."
    return text


def fallback_text(result: Comparison) -> str:
    if noise.REPETITIONS not in result.sources:
        return ""
    return (
        "Rows without a round (measured before rounds, or back to back): their in-run noise is "
        "the spread of the repetitions, which hides drift across the run."
    )


def html_page(result: Comparison) -> str:
    from tunelab.report.render import CSS

    t = threshold_text(result.threshold)
    facts = (
        f"<b>OLD</b> <code>{_e(result.old)}</code> → <b>NEW</b> <code>{_e(result.new)}</code>"
        f" · α = {result.alpha:g} · threshold {t} · noise multiplier "
        f"{result.noise_multiplier:g}"
    )
    parts = [
        '<header class="tl-header"><h1>What changed between two runs</h1>'
        f'<p class="tl-facts">{facts}</p></header>',
        _note(_e(summary_line(result))),
    ]
    worse = [(s, p, c) for s, p, c in result.changes() if c.verdict == WORSE]
    if worse:
        items = "".join(
            f"<li>{_e(change_line(s.name, p.point, c, result.threshold))}</li>" for s, p, c in worse
        )
        parts.append(_note(f"<b>Significantly worse beyond {t}:</b><ul>{items}</ul>", "warn"))
    incomparable = [(s, p) for s, p in result.points() if p.incomparable]
    if incomparable:
        parts.append(
            _note(
                f"<b>{len(incomparable)} point(s) not compared</b>: their provenance differs "
                "in a way that changes the times by itself (see the tables and the provenance "
                "differences).",
                "warn",
            )
        )
    parts.append(_note(_e(method_text(result))))
    parts.append(_note(_e(noise_text(result))))
    if fallback_text(result):
        parts.append(_note(_e(fallback_text(result)), "warn"))
    parts.append("<h2>Changes per sweep</h2>")
    for i, s in enumerate(result.sweeps):
        parts.append(f"<h3>{_e(s.name)}</h3>")
        parts.append(sweep_table(s, result, f"compare-{i}"))
    parts.append("<h2>Provenance differences</h2>")
    rows = []
    if result.sweeps_only_old:
        rows.append(("sweeps only in OLD", _e(", ".join(result.sweeps_only_old))))
    if result.sweeps_only_new:
        rows.append(("sweeps only in NEW", _e(", ".join(result.sweeps_only_new))))
    if rows:
        parts.append(_kv(rows, "provenance-sweeps"))
    listed = False
    for i, s in enumerate(result.sweeps):
        rows = _aggregate(s)
        if rows:
            listed = True
            parts.append(f"<h3>{_e(s.name)}</h3>" + _kv(rows, f"provenance-{i}"))
    if not listed and not result.sweeps_only_old and not result.sweeps_only_new:
        parts.append(_note("OLD and NEW have the same provenance at every common point."))
    parts.append(
        f'<p class="tl-muted">Compared with Python {platform.python_version()}, '
        f"pandas {pd.__version__}, numpy {np.__version__}.</p>"
    )
    body = "".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>tunelab compare</title>\n<style>{CSS}{PAGE_CSS}</style>\n</head>\n"
        f'<body class="jp-Notebook">\n<main><div class="jp-RenderedHTMLCommon">\n{body}\n'
        "</div></main>\n</body>\n</html>\n"
    )


# -- command -------------------------------------------------------------------------------
class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message}")


def _fraction(text: str) -> float:
    """0.1 or 10 % (a percentage needs its sign, so 1 stays 100 %)."""
    try:
        value = float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or a percentage") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tunelab compare",
        description="What changed between two runs: per matched point, the ratio of medians "
        "NEW/OLD with a bootstrap interval and a Mann-Whitney U test, judged against the "
        "point's noise on the host (its spread over the run's rounds, and the A/A floor of "
        "earlier runs of one commit). Exit 1 when a point got significantly worse beyond the "
        "threshold and its noise floor, 2 for bad input.",
    )
    p.add_argument("old", type=Path, metavar="OLD", help="results directory or result CSV")
    p.add_argument("new", type=Path, metavar="NEW", help="results directory or result CSV")
    p.add_argument("--html", type=Path, default=Path("compare.html"),
                   help="comparison report to write (default: compare.html)")  # fmt: skip
    p.add_argument("--threshold", type=_fraction, default=DEFAULT_THRESHOLD,
                   help="worse means past this change (0.1 or 10%%; default 10%%)")  # fmt: skip
    p.add_argument("--alpha", type=_fraction, default=DEFAULT_ALPHA,
                   help="significance level of test and interval (default 0.05)")  # fmt: skip
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                   help="bootstrap resamples (default 2000)")  # fmt: skip
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed (default 0)")
    p.add_argument("--noise-floor", type=Path, metavar="FILE",
                   help="A/A noise floor file to read and update (default: noise-floor.json "
                   "in NEW's results directory, with OLD's observations carried over)")  # fmt: skip
    p.add_argument("--noise-multiplier", type=_multiplier, default=DEFAULT_NOISE_MULTIPLIER,
                   help="a change must pass this many noise floors (default 1; 0: the test "
                   "and the threshold alone)")  # fmt: skip
    p.add_argument("--no-record", action="store_true",
                   help="do not record A/A observations (two runs of one commit)")  # fmt: skip
    return p


def _multiplier(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or above")
    return value


def _save_floor(floor: noise.FloorFile, result: Comparison) -> None:
    """Write the floor when it gained observations; a floor that cannot be written costs the
    next comparison its A/A floor, not this one its result, so it is a warning."""
    if not floor.changed:
        return
    try:
        floor.save()
    except OSError as exc:
        print(
            f"{exc.filename or floor.path}: {exc.strerror or exc} (A/A noise floor not saved)",
            file=sys.stderr,
        )
        return
    if result.recorded:
        print(
            f"tunelab compare: {result.recorded} A/A observation(s) of commit "
            f"{result.aa_commit} recorded in {floor.path}",
            file=sys.stderr,
        )


def compare_main(argv: Sequence[str] | None = None) -> int:
    from tunelab.report.render import write_atomic

    try:
        args = _parser().parse_args(argv)
        if args.alpha >= 1:
            raise _UsageError("tunelab compare: --alpha must be below 1")
        if args.resamples < 100:
            raise _UsageError("tunelab compare: --resamples must be at least 100")
        floor = read_floor(args.old, args.new, args.noise_floor)
        result = compare(args.old, args.new, args.alpha, args.threshold, args.resamples,
                         args.seed, args.noise_multiplier, floor)  # fmt: skip
        if not args.no_record:
            record(result, floor)
            _save_floor(floor, result)
        out = write_atomic(args.html, html_page(result))
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (_UsageError, CompareInputError) as exc:
        print(exc, file=sys.stderr)
        return 2
    except OSError as exc:  # the report could not be written
        print(f"{exc.filename or args.html}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for line in text_lines(result):
        print(line)
    if fallback_text(result):
        print(f"tunelab compare: {fallback_text(result)}", file=sys.stderr)
    print(f"tunelab compare: wrote {out}", file=sys.stderr)
    return 1 if result.worse else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(compare_main())
