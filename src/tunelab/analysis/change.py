"""Judging the changes between two runs of the same points (`tunelab compare`): pure
functions over each point's values, no files.

The model. A point's log change between two runs of one commit on one host is the sum of

- the uncertainty of each run's level: the median of the point's log values, with a
  standard error from the unit at which its values vary (``units``: the round for rounds
  measured one at a time, the pass where a server engine's rounds go in passes), never
  below what the values would give as independent repetitions;
- a between-run component, a variance common to the engine's points for that metric on
  that host (``between``): a point's engine opened anew, a server started, the data laid out
  again; estimated from the comparison's own points (robustly, so that a few changed points
  do not set it), pooled with the host's earlier A/A comparisons and a stated prior;
- a host shift common to a block of the run: the median change over the points measured
  together (a sweep's points of one workload and cache state, ``Estimate.kind``), which a
  slower host that stretch of the run gives them alike; each point is tested against its
  block's median change without it (its own value would pull the shift toward it and hide
  part of its change), whose variance is that of a median (``median_variance``). Blocks of
  too few points are tested
  beyond the median change over all of the engine's points, with a block's drift from run to
  run as part of their noise. A shift over points of different sweeps would mix stretches of
  the run that do not drift together.

Each point's change is tested beyond its block's shift, one-sided for worse and for better.
The decision "some point got worse" is two families: every point and metric compared, at
half of ``level``, and every run-wide shift, at the other half; by default each by the
Benjamini-Hochberg procedure (``bh``): when nothing changed, the chance of any flag is at
most ``level``, however many points; when several changed, as a regression usually touches
several, each is tested at a level that grows with how many others stand out. ``strict``
keeps Holm's step-down procedure (``holm``): a family-wise rate whatever changed. Either way
a change is flagged only when its estimate is also past ``min_effect`` (the ratio beyond the
shift above 1 + min_effect for worse, below 1 / (1 + min_effect) for better), as benchmark
tools do: a real but smaller change is not a regression worth a failed job. A run-wide shift
(a block's, and the engine's over all its points) is not taken for the host when the CPU
reference did not move with it: a change that every point shows alike and the host's CPU
does not is the system's (``flag_shift``).

A point whose timed section is shorter than ``MIN_SECTION_S`` is not tested for its times:
sections that short move between two processes by far more than their rounds vary within
one (memory layout, CPU placement, caches); they are reported as too short to compare.
Above it a between-run floor that grows as the section shrinks (``section_floor``) bounds
the between-run SD from below.

Per point the change comes with its interval and the smallest change that point could have
shown (``detectable``): the change its test would flag with probability ``POWER`` if it
were the only one (at the family's strictest level, ``level`` over the number of
hypotheses), and past ``min_effect``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sst

from tunelab.analysis.sequential import RECORDED_PASS_ROUNDS

# The between-run component until a host has its own A/A comparisons: SD 3 % on the log
# scale for times, as much as the comparison's own points count for at 30 points (the sd
# measured between two processes measuring one SQLite sweep; docs/compare.md).
PRIOR_BETWEEN_SD = {"elapsed_s": 0.03, "throughput_rows_s": 0.03, "c_physical_reads": 0.03}
PRIOR_BETWEEN_WEIGHT = 30
# How far a block's level (a sweep's points of one workload and cache state) moves between
# two runs of one commit on one host (the host's drift that stretch of the run, after the
# CPU-speed correction): SD 5 %, worth 3 comparisons until the host has its own.
PRIOR_RUN_SD = 0.05
PRIOR_RUN_WEIGHT = 3
POWER = 0.8  # of the smallest change a point could have shown
LEVEL = 0.95  # of a point's interval
# Counters are compared as log(value + offset): a cold point reading a handful of pages
# moves several-fold from run to run, and 64 pages is far below any sweep's read effect.
COUNT_OFFSET = {"c_physical_reads": 64.0}
NOISY = 0.25  # a point that could not have shown a change below this is reported as noisy
MIN_VALUES = 3  # a side's values below which a point is not tested
# A block's points below which its own shift is not taken out: a point is judged against
# the median of the others, which must hold 3 values to stay robust to one changed point
# (the median of 2 is their mean).
MIN_SHIFT_POINTS = 4
SHIFT_SHARE = 0.5  # strict (Holm): the share of alpha the points get; the shifts the rest
BH, HOLM = "bh", "holm"
DEFAULT_LEVEL = 0.05  # BH's false-discovery rate (strict: Holm's family-wise rate)
DEFAULT_MIN_EFFECT = 0.05  # a flagged change's estimate must be past 5 % as well
# Timed sections shorter than this are not compared: a two-point sweep's 0.4 ms repetitions
# came out 1.56x between two runs of one commit on one host (p = 8e-4 under the model),
# and the stored A/A packs' two sub-millisecond points moved 7-23 % beyond their blocks
# where their rounds said 2-4 %.
MIN_SECTION_S = 0.001
# Above it, the between-run SD is at least SECTION_FLOOR_SD * sqrt(1 ms / section): 10 % at
# 1 ms, 5 % at 4 ms, 3 % (the prior) at 11 ms. The stored A/A packs' points of 3-10 ms moved
# 7 % (RMS) beyond their blocks, within what the model gave them (z RMS 0.87): the floor
# bounds what points just past the cut-off are judged against, where no rows tell.
SECTION_FLOOR_SD = 0.10
# A reference (the CPU's, the device's) that ran this much slower (log) explains a run-wide
# shift the same way: the host changed, and a shift of the system cannot be told from it.
REFERENCE_MOVED = math.log(1.10)

WORSE, BETTER, SAME, TOO_FEW = "worse", "better", "same", "too-few"


def section_floor(seconds: float) -> float:
    """The least between-run SD (log) of a point whose timed section takes ``seconds``
    (0 when it is not known)."""
    if not (math.isfinite(seconds) and seconds > 0):
        return 0.0
    return SECTION_FLOOR_SD * math.sqrt(MIN_SECTION_S / seconds)


@dataclass(frozen=True)
class Side:
    """One run's level of a point: the median log value, its standard error and what it
    rests on."""

    level: float
    se: float
    n: int  # values
    units: int  # distinct units (rounds or passes)
    sd: float  # SD of the log values

    @property
    def dof(self) -> int:
        """Degrees of freedom of ``se``: its units' less one."""
        return max(self.units - 1, 1)


@dataclass(frozen=True)
class Estimate:
    """A point's metric in two runs: the log change NEW - OLD and its standard error."""

    key: str  # names the point and metric
    group: str  # the engine (and metric) whose points share a shift and a between-run SD
    metric: str
    direction: int  # +1: a higher value is worse, -1: a lower one
    old: Side
    new: Side
    family: str = ""  # points whose estimates are one hypothesis (a time and its throughput)
    kind: str = ""  # the block measured together (sweep, workload, cache state): one shift
    section: float = math.nan  # the timed section's median seconds (times only; NaN: none)

    @property
    def floor(self) -> float:
        """The least between-run SD of this point's metric (``section_floor``)."""
        return section_floor(self.section)

    @property
    def change(self) -> float:
        return self.new.level - self.old.level

    @property
    def se(self) -> float:
        return math.hypot(self.old.se, self.new.se)

    def dof(self, known: float = 0.0) -> float:
        """Welch–Satterthwaite degrees of freedom of se^2 + ``known`` (a variance taken as
        known: the between-run and the shift's, pooled over many points)."""
        parts = [(x.se**2, x.dof) for x in (self.old, self.new)]
        den = sum(v * v / k for v, k in parts)
        return math.inf if den <= 0 else (sum(v for v, _ in parts) + known) ** 2 / den


@dataclass(frozen=True)
class Between:
    """The between-run variance of a group: pooled estimate and what it rests on."""

    sd: float
    points: int  # the comparison's own points that entered
    history: int  # earlier comparisons' points
    prior_sd: float
    prior_weight: float
    own_sd: float  # this comparison's own estimate

    @property
    def source(self) -> str:
        parts = [f"{self.points} points here"]
        if self.history:
            parts.append(f"{self.history} in this host's A/A comparisons")
        parts.append(f"prior {100 * self.prior_sd:g} % worth {self.prior_weight:g}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Shift:
    """The shift of a group's points of one block (all of the group's points: kind ""): the
    median change over them."""

    group: str
    kind: str
    metric: str
    direction: int
    shift: float  # log
    se: float  # of the median
    sd: float  # with the run-to-run SD of a whole run
    points: int
    runs: int  # earlier A/A comparisons the run SD rests on
    cpu: float = math.nan  # the CPU reference's log change over the run (NaN: not recorded)
    device: float = math.nan  # the device probe's log change over these points' rounds
    p_worse: float = 1.0
    q: float = 1.0  # adjusted: BH's q (strict: Holm's)
    verdict: str = SAME
    host: bool = False  # the CPU or device reference moved with it: the host's, not flagged

    @property
    def family(self) -> str:
        return f"{self.group.split(':')[0]}/{self.kind}"


@dataclass
class Judged:
    """One point's metric, judged."""

    estimate: Estimate
    residual: float = math.nan  # log change beyond its block's shift (without it)
    sd: float = math.nan  # of the residual under no change
    z: float = math.nan
    p_worse: float = 1.0
    p_better: float = 1.0
    p_adjusted: float = 1.0  # BH's q (strict: Holm-adjusted p), for the direction it moved
    detectable: float = math.nan  # smallest log change it could have shown
    dof: float = math.inf  # of its test's statistic (Welch–Satterthwaite)
    verdict: str = TOO_FEW

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate.change)

    @property
    def beyond(self) -> float:
        return math.exp(self.residual)

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        """The interval of the ratio beyond the shift."""
        q = sst.t.ppf(0.5 + level / 2, self.dof) * self.sd
        return math.exp(self.residual - q), math.exp(self.residual + q)

    @property
    def noisy(self) -> bool:
        return math.isfinite(self.detectable) and math.expm1(self.detectable) >= NOISY


@dataclass
class Judgement:
    points: list[Judged]
    shifts: list[Shift]
    between: dict[str, Between]
    level: float  # BH's false-discovery rate (strict: Holm's family-wise rate)
    min_effect: float
    procedure: str = BH
    hypotheses: int = 0  # points' hypotheses in the family
    detectable_z: float = math.nan
    notes: list[str] = field(default_factory=list)

    @property
    def worse(self) -> bool:
        return any(j.verdict == WORSE for j in self.points) or any(
            s.verdict == WORSE for s in self.shifts
        )


def units(
    rounds: Sequence[float] | np.ndarray | None,
    mode: str,
    size: int,
    passes: Sequence[float] | np.ndarray | None = None,
) -> np.ndarray:
    """The unit each value varies at: its pass when the rounds went in passes (``blocked``:
    the rows' ``pass``, or for rows that do not record it passes of the rounds they had
    then), its round otherwise, each value its own without rounds."""
    if rounds is None:
        return np.arange(size, dtype=float)
    r = np.asarray(rounds, dtype=float)
    if not np.isfinite(r).all():
        return np.arange(size, dtype=float)
    if mode == "blocked":
        p = None if passes is None else np.asarray(passes, dtype=float)
        if p is not None and p.size == r.size and np.isfinite(p).all():
            return p
        return np.floor((r - r.min()) / RECORDED_PASS_ROUNDS)
    return r


def side(values: np.ndarray, unit: np.ndarray, offset: float = 0.0) -> Side | None:
    """The level of one run's values (log scale, ``offset`` added first), or None when it
    cannot be told (fewer than ``MIN_VALUES`` values, a value at or below 0)."""
    v = np.asarray(values, dtype=float) + offset
    ok = np.isfinite(v)
    v, u = v[ok], np.asarray(unit, dtype=float)[ok]
    if v.size < MIN_VALUES or not (v > 0).all():
        return None
    logs = np.log(v)
    sd = float(np.std(logs, ddof=1))
    var = sd * sd / v.size
    labels = np.unique(u)
    units_n = int(labels.size) if 1 < labels.size < v.size else int(v.size)
    if 1 < labels.size < v.size:  # units hold several values: their means vary together
        means = np.array([logs[u == k].mean() for k in labels])
        var = max(var, float(np.var(means, ddof=1)) / labels.size)
    # the mean log value (a geometric mean): its standard error is honest whatever the
    # values' shape, a disturbed repetition widening it as much as it moves the level
    return Side(float(logs.mean()), math.sqrt(var), int(v.size), units_n, sd)


def robust_var(x: np.ndarray) -> float:
    """The variance of normal values from their median absolute deviation: a few points
    that changed move it no more than they move the median."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return math.nan
    return float((1.4826 * np.median(np.abs(x - np.median(x)))) ** 2)


def between(
    residuals: np.ndarray,
    se2: np.ndarray,
    metric: str,
    history: Sequence[tuple[float, int]] = (),
    prior_sd: float | None = None,
    prior_weight: float = PRIOR_BETWEEN_WEIGHT,
) -> Between:
    """The between-run SD of a group: its own points' robust variance beyond their medians'
    uncertainty, pooled with ``history`` ((variance, points) of earlier A/A comparisons on the
    host) and the prior, each weighted by its points."""
    prior = PRIOR_BETWEEN_SD.get(metric, 0.03) if prior_sd is None else prior_sd
    own = max(robust_var(residuals) - float(np.median(se2)), 0.0) if residuals.size >= 2 else 0.0
    n = int(residuals.size) if residuals.size >= 2 else 0
    hist_n = sum(k for _, k in history)
    total = prior_weight * prior**2 + n * own + sum(v * k for v, k in history)
    sd = math.sqrt(total / (prior_weight + n + hist_n))
    return Between(sd, n, hist_n, prior, prior_weight, math.sqrt(own))


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values: reject where adjusted p < alpha keeps the
    family-wise error rate at alpha."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(np.maximum.accumulate((m - np.arange(m)) * p[order]), 1.0)
    out = np.empty(m)
    out[order] = adjusted
    return out


def bh(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg's step-up adjusted p-values (q-values): reject where q < level
    keeps the false-discovery rate at level, and when no hypothesis is false the chance of
    any rejection at level too."""
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    out = np.empty(m)
    out[order] = adjusted
    return out


# m times the variance of the median of m normal values of variance 1 (Monte Carlo, 4e5
# draws; an even m's median is the mean of the middle two): pi/2 only for large m.
MEDIAN_VARIANCE = (1.0, 1.0, 1.34, 1.20, 1.43, 1.29, 1.47, 1.35, 1.49, 1.38, 1.52, 1.41)


def median_variance(m: int) -> float:
    """The variance of the median of ``m`` values, in units of one value's variance."""
    return (MEDIAN_VARIANCE[m - 1] if m <= len(MEDIAN_VARIANCE) else math.pi / 2) / m


def blocks(members: Sequence[Judged]) -> dict[str, list[Judged]]:
    """A group's points by the block they were measured in, for blocks of
    ``MIN_SHIFT_POINTS`` or more; ``""``: all of the group's points."""
    by_kind: dict[str, list[Judged]] = {}
    for j in members:
        by_kind.setdefault(j.estimate.kind, []).append(j)
    big = {k: v for k, v in by_kind.items() if k and len(v) >= MIN_SHIFT_POINTS}
    return {**big, "": list(members)}


def judge(
    estimates: Sequence[Estimate],
    level: float = DEFAULT_LEVEL,
    min_effect: float = DEFAULT_MIN_EFFECT,
    history: dict[str, Sequence[tuple[float, int]]] | None = None,
    run_history: dict[str, Sequence[float]] | None = None,
    cpu: dict[str, float] | None = None,
    device: dict[str, float] | None = None,
    shifted: Sequence[str] = ("elapsed_s", "throughput_rows_s"),
    procedure: str = BH,
) -> Judgement:
    """Judge every estimate: the run's shift per block of points and over the whole group
    (for the metrics in ``shifted``; a counter's host does not change what it counts), the
    group's between-run SD, each point's test beyond its block's shift, then the family's
    decision (``decide``): BH at ``level`` (``procedure`` HOLM: Holm), a flag's estimate past
    ``min_effect`` as well.
    ``history`` gives per group the earlier A/A comparisons' (between-run variance, points),
    ``run_history`` their run shifts, ``cpu`` per group the CPU reference's log change between
    the runs, ``device`` per ``engine/kind`` the device probe's."""
    history, run_history, cpu, device = history or {}, run_history or {}, cpu or {}, device or {}
    judged = [Judged(e) for e in estimates]
    groups: dict[str, list[Judged]] = {}
    for j in judged:
        groups.setdefault(j.estimate.group, []).append(j)
    shifts: list[Shift] = []
    betweens: dict[str, Between] = {}
    for group, members in groups.items():
        e0 = members[0].estimate
        runs = list(run_history.get(group, ()))
        run_var = (PRIOR_RUN_WEIGHT * PRIOR_RUN_SD**2 + sum(x * x for x in runs)) / (
            PRIOR_RUN_WEIGHT + len(runs)
        )
        d = np.array([j.estimate.change for j in members])
        se2 = np.array([j.estimate.se**2 for j in members])
        if e0.metric in shifted and len(members) >= MIN_SHIFT_POINTS:
            parts = blocks(members)
            h = {k: float(np.median([j.estimate.change for j in v])) for k, v in parts.items()}
            # a point of a small block: beyond the engine's shift, its block's drift as noise
            own = {j.estimate.key: j.estimate.kind if j.estimate.kind in h else "" for j in members}
            # Each point against its block's shift without it: its own value would pull the
            # median toward it, hide part of its change and shrink the residuals the
            # between-run SD is estimated from (to half the variance in blocks of 4-6).
            base, others = {}, {}
            for kind, part in parts.items():
                values = np.array([j.estimate.change for j in part])
                for i, j in enumerate(part):
                    if own[j.estimate.key] == kind:
                        base[j.estimate.key] = float(np.median(np.delete(values, i)))
                        others[j.estimate.key] = len(part) - 1
            residual = np.array([j.estimate.change - base[j.estimate.key] for j in members])
            inflate = np.array([1 + median_variance(others[j.estimate.key]) for j in members])
            b = between(residual / np.sqrt(inflate), se2, e0.metric, history.get(group, ()))
            noise = {
                kind: float(np.mean([j.estimate.se**2 + b.sd**2 for j in part]))
                for kind, part in parts.items()
            }
            engine = group.split(":")[0]
            for kind, part in parts.items():
                extra = noise[kind] * median_variance(len(part))
                shifts.append(
                    Shift(
                        group,
                        kind,
                        e0.metric,
                        e0.direction,
                        h[kind],
                        math.sqrt(extra),
                        math.sqrt(run_var + extra),
                        len(part),
                        len(runs),
                        cpu.get(group, math.nan),
                        device.get(f"{engine}/{kind}", math.nan),
                    )
                )
            for j in members:
                key = j.estimate.key
                kind = own[key]
                j.residual = j.estimate.change - base[key]
                j.sd = math.sqrt(
                    j.estimate.se**2
                    + max(b.sd, j.estimate.floor) ** 2
                    + noise[kind] * median_variance(others[key])
                    + (0.0 if kind else run_var)
                )
        else:
            b = between(d, se2, e0.metric, history.get(group, ()))
            # too few points to take the host's shift out: a whole run's drift is noise
            extra0 = run_var if e0.metric in shifted else 0.0
            for j in members:
                j.residual = j.estimate.change
                j.sd = math.sqrt(j.estimate.se**2 + max(b.sd, j.estimate.floor) ** 2 + extra0)
        betweens[group] = b
        for j in members:
            j.z = j.residual / j.sd
            j.dof = j.estimate.dof(j.sd**2 - j.estimate.se**2)
            signed = j.estimate.direction * j.residual
            j.p_worse = float(sst.t.sf(signed / j.sd, j.dof))
            j.p_better = float(sst.t.sf(-signed / j.sd, j.dof))
    judged_shifts = test_shifts(shifts)
    m = decide(judged, judged_shifts, level, min_effect, procedure)
    strictest = level * SHIFT_SHARE if shifts else level
    margin = math.log1p(min_effect)
    z_detect = float(max(sst.norm.isf(strictest / max(m, 1)), 0.0) + sst.norm.ppf(POWER))
    for j in judged:
        # flagged with probability POWER as the only change: its test at the strictest level
        # and its estimate past min_effect, each the weaker of the two needs
        t_level = max(float(sst.t.isf(strictest / max(m, 1), j.dof)) * j.sd, margin)
        j.detectable = t_level + float(sst.t.ppf(POWER, j.dof)) * j.sd
        if j.verdict == TOO_FEW:
            j.verdict = SAME
    return Judgement(judged, judged_shifts, betweens, level, min_effect, procedure, m, z_detect)


def _flag_points(judged: Sequence[Judged]) -> dict[str, list[Judged]]:
    """The family's point hypotheses: one per point's time and throughput (rows over time),
    one per other metric."""
    families: dict[str, list[Judged]] = {}
    for j in judged:
        families.setdefault(j.estimate.family or j.estimate.key, []).append(j)
    return families


def decide(
    judged: Sequence[Judged],
    shifts: list[Shift],
    level: float,
    min_effect: float,
    procedure: str = BH,
) -> int:
    """Set each point's and shift's verdict and adjusted p; the number of the points'
    hypotheses. The points are one family at ``SHIFT_SHARE`` of ``level``, the shifts
    another at the rest (so that a block-wide change, many shifts flagged, does not loosen
    the points' tests), each by BH (``procedure`` HOLM: Holm's); a flag's estimate is past
    ``min_effect`` as well. Better is decided over the points alone, at their level."""
    margin = math.log1p(min_effect)
    families = _flag_points(judged)
    names = list(families)
    m = len(names)
    shift_families: dict[str, list[int]] = {}
    for i, s in enumerate(shifts):
        shift_families.setdefault(s.family, []).append(i)
    shift_names = list(shift_families)

    def moved(j: Judged, worse: bool) -> bool:
        signed = j.estimate.direction * j.residual
        return (signed if worse else -signed) > margin

    for worse in (True, False):
        attr = "p_worse" if worse else "p_better"
        p = [min(getattr(j, attr) for j in families[f]) for f in names]
        q = [min(shifts[i].p_worse for i in shift_families[f]) for f in shift_names]
        adjust = holm if procedure == HOLM else bh
        point_level = level * SHIFT_SHARE if shifts else level
        shift_level = level * (1 - SHIFT_SHARE)
        adjusted, adjusted_shifts = list(adjust(p)), list(adjust(q))
        for f, a in zip(names, adjusted):
            for j in families[f]:
                if a < point_level and moved(j, worse):
                    j.verdict = WORSE if worse else BETTER
                if worse == (j.estimate.direction * j.residual > 0):
                    j.p_adjusted = float(a)
        if worse:
            for f, a in zip(shift_names, adjusted_shifts):
                for i in shift_families[f]:
                    shifts[i] = flag_shift(shifts[i], float(a), shift_level, margin)
    return m


def test_shifts(shifts: list[Shift]) -> list[Shift]:
    """Each run-wide shift's p (worse) against the run-to-run SD of a whole run."""
    return [
        dataclasses.replace(s, p_worse=float(sst.norm.sf(s.direction * s.shift / s.sd)))
        for s in shifts
    ]


def flag_shift(s: Shift, adjusted: float, level: float, margin: float) -> Shift:
    """The shift judged: worse when its adjusted p is below ``level`` and it moved past
    ``margin`` (log) the worse way. A worse shift while the CPU reference or the device
    probe ran slower (by ``REFERENCE_MOVED``) is the host's: reported, not flagged."""
    verdict = WORSE if adjusted < level and s.direction * s.shift > margin else SAME
    # a slower reference (> 0) is the worse way for a time and a rate alike
    shared = [r for r in (s.cpu, s.device) if math.isfinite(r)]
    host = verdict == WORSE and any(r >= REFERENCE_MOVED for r in shared)
    return dataclasses.replace(s, q=adjusted, verdict=SAME if host else verdict, host=host)
