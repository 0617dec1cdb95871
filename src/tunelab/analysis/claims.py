"""What a sweep expects (its ``expect:`` list), checked on the stored rows.

A claim compares groups of repetitions, never single numbers (``analysis.stats``): where the
rows carry the ``round`` they were measured in, per round the ratio of the two sides, with a
bootstrap interval over rounds and a Wilcoxon signed-rank test (drift between rounds then
cancels out); otherwise the ratio of the medians with a bootstrap interval and a two-sided
Mann–Whitney U test. Times of an engine that runs in the measuring process are compared at
one CPU speed (``analysis.hostspeed``). ``analysis.decisions`` turns a comparison into a verdict:

- ``holds``: significant (p < alpha, interval excluding 1) in the claimed direction and at
  least ``min_effect`` large;
- ``contradicted``: significant the other way with the whole interval at least
  ``min_effect`` from 1 (for ``similar``: significant and the interval outside
  ±min_effect);
- ``similar``: the claimed effect is shown absent, by two one-sided tests (the 1 − 2·alpha
  interval within ±min_effect);
- ``short`` (``lower``, ``higher``, ``falls``, ``rises``): the claimed effect is shown
  absent, the whole interval short of ``min_effect`` in the claimed direction, as ``holds``
  needs it wholly beyond: the claimed margin is the one boundary between the two;
- ``inconclusive``: anything else; the verdict then says how many repetitions the observed
  spread would need (``Verdict.needed``; not for ``crossover``, whose undecided values
  near the crossing need not be decided).

A verdict names likely causes from the evidence and the rows: no difference seen, too few
repetitions, a crossing outside or at the edge of the tested range, a plan other than the
one asked for, a cold repetition that was not cold, a client-bound point (for timed metrics).
A verdict on rows measured on more than one host says so (``hosts``).

Kinds (``a``/``b``/``where`` map keys -- a knob, a workload parameter, ``cache`` or
``workload`` -- to values):

- ``lower`` / ``higher``: ``a``'s metric is below / above ``b``'s;
- ``similar``: within ``min_effect`` of each other;
- ``lower`` / ``higher`` with ``than``: the ratio a/b where ``where`` holds is below / above
  the ratio a/b where ``than`` replaces some of ``where``'s values (an interaction: "the
  inserts' row/table ratio is lower than the updates'"); per round (or pass) the one ratio
  over the other, tested as any paired comparison;
- ``crossover``: ``a`` is lower at small values of ``along``, ``b`` at large ones, and they
  cross within ``within: [low, high]``; a crossing outside the values swept is reported as
  such, and contradicts the claim only where the window lies inside the tested range;
- ``falls`` / ``rises``: the largest value of ``along`` against the smallest for the size,
  a trend test over every value (Page's L, blocked by round, where rows carry rounds;
  Kendall's tau otherwise: ``decisions.trend``), and each step between neighbouring values
  for points that break it (significantly, by more than ``min_effect``, the other way: the
  claim is then contradicted). A verdict along a swept key shows the whole curve: the
  median at every value and its shape, each step in words (``_curve``: "level, then
  falls");
- ``flat_then_falls`` (along ``buffer_pool``): no gain while the pool is smaller than the
  data (the table with its indexes, from the rows' ``data_bytes``), a gain once it holds
  them (``_flat_then_falls``).

Rows that differ in a swept key a claim does not mention are compared within each value of
that key (e.g. cold and warm apart); one verdict follows from theirs by the findings file's
``rules.contexts`` (``decisions.combine``; ``all``: the claim holds when it holds in every
one, each at alpha, and is refuted by one context against it at alpha; ``all-bonferroni``:
refuted only by one against it at alpha over the contexts, a context against it at alpha but
not at that level tested again by the same comparison and left undecided, ``_refuted``). A
sweep's looks spend alpha over the looks first (``evaluate_in_looks``), so the refuting
level of a look is the look's alpha (over the contexts, under ``all-bonferroni``). Each
context's verdict is kept (``Verdict.contexts``), so a page shows how many reproduced, did
not, or stayed undecided (``report.contexts.tally``).

Metrics are row columns, counters by their short name, and ``uses_index``: 1 for a row whose
plan (``access_path``) goes through an index, 0 otherwise, so that ``access: optimizer``
sweeps can state which plan the optimizer chooses. Its median is 0 or 1, so state such a
claim as ``lower`` with the side expected to use the index as ``b``: the ratio 0/1 can hold,
while 1/0 is infinite and gets no verdict.

What a claim may say, and its check against the sweep's points, is ``tunelab.sweep.claimspec``;
the ``tunelab check`` command is ``tunelab.run.check``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tunelab.analysis import decisions, figures, hostspeed, sequential, stats
from tunelab.analysis.decisions import CONTRADICTED, HOLDS, INCONCLUSIVE, SHORT
from tunelab.store import results
from tunelab.sweep.claimspec import (
    COUNTERS,
    FLAT_THEN_FALLS,
    PAIR_KINDS,
    Claim,
    as_number,
    kv,
    parse,
    same,
)
from tunelab.sweep.findings import FINDING

VERDICTS = decisions.VERDICTS
# What a verdict says in words: of a finding, whether it reproduced here; of an explanation
# or a sweep's own claim, whether it holds. A directional claim shown equivalent within its
# margin (SIMILAR) or wholly short of it (SHORT) did not reproduce: the effect is shown absent.
REPRODUCED, NOT_REPRODUCED, UNDECIDED = "reproduced", "not reproduced", "undecided"
HOLDS_WORD, FAILS_WORD = "holds", "does not hold"
CANNOT_RUN = "cannot run here"
WORDS = (REPRODUCED, NOT_REPRODUCED, UNDECIDED, HOLDS_WORD, FAILS_WORD, CANNOT_RUN)


def word(verdict: str, role: str) -> str:
    """The verdict of a claim in its role's words (``claimspec.Claim.role``)."""
    if verdict == INCONCLUSIVE or verdict not in decisions.DECIDED:
        return UNDECIDED
    if role == FINDING:
        return REPRODUCED if verdict == HOLDS else NOT_REPRODUCED
    return HOLDS_WORD if verdict == HOLDS else FAILS_WORD


def word_of(stored: dict[str, Any]) -> str:
    """The word of a stored verdict (``Verdict.to_json``; a file written before words were
    stored has the verdict alone)."""
    return str(stored.get("word") or word(str(stored.get("verdict")), stored.get("role", "")))


def css_class(text: str) -> str:
    """The class a page styles a verdict word by (tl-reproduced, tl-not-reproduced, ...)."""
    word = "-".join(str(text).split()).replace("-here", "")
    return "tl-" + re.sub(r"[^A-Za-z0-9_-]", "", word)  # a stored file's word: nothing else


CLIENT_BOUND = 0.5  # as the report flags it
# the direction a claim of each directional kind states (``decisions.directional``)
DIRECTION = {
    "lower": decisions.LOWER,
    "falls": decisions.LOWER,
    FLAT_THEN_FALLS: decisions.LOWER,
    "higher": decisions.HIGHER,
    "rises": decisions.HIGHER,
}
SPECIAL_KEYS = {"cache": "cache_requested", "workload": "workload"}


@dataclass
class Verdict:
    claim: Claim
    verdict: str
    evidence: str
    causes: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)  # the compared rows' hosts
    needed: int | None = None  # inconclusive: repetitions the observed spread would need
    # per context (e.g. cold, warm): its label, verdict, ratio [low, high] or crossing
    contexts: list[dict[str, Any]] = field(default_factory=list)
    # rows measured under another version of the findings file than the one judging them
    other_version: str = ""
    # the look of a sequential procedure that gave the verdict (look, looks, rounds, alpha)
    look: dict[str, Any] | None = None
    # the weight of the CPU-speed correction of its times (None: times as measured)
    weight: float | None = None

    @property
    def decided(self) -> bool:
        return self.verdict in decisions.DECIDED

    @property
    def pooled(self) -> str:
        """A warning when the compared rows come from more than one host ("" otherwise)."""
        if len(self.hosts) < 2:
            return ""
        return f"warning: rows from {len(self.hosts)} hosts compared ({', '.join(self.hosts)})"

    def line(self, sweep: str) -> str:
        why = f"; likely cause: {'; '.join(self.causes)}" if self.causes else ""
        pooled = f"; {self.pooled}" if self.pooled else ""
        other = f"; {self.other_version}" if self.other_version else ""
        return f"{sweep}: {self.claim.says}: {self.word} ({self.evidence}{why}{pooled}{other})"

    @property
    def word(self) -> str:
        return word(self.verdict, self.claim.role)

    def to_json(self) -> dict[str, Any]:
        c = self.claim
        return {
            "claim": c.says,
            "kind": c.kind,
            "metric": metric_column(c.metric) if c.metric != "uses_index" else c.metric,
            "role": c.role,
            "finding": c.finding,
            "source": c.source,
            "reported": c.reported,
            "source_ratio": c.source_ratio,
            "findings_digest": c.findings_digest,
            "margin": c.min_effect,
            "window": list(c.within) if c.within else None,
            # the intervals in the evidence are at 1 - alpha of the look that decided
            "interval_level": round(1 - c.alpha, 4),
            "word": self.word,
            "verdict": self.verdict,
            "evidence": self.evidence,
            "causes": self.causes,
            "hosts": self.hosts,
            "decided": self.decided,
            "needed": self.needed,
            "contexts": self.contexts,
            # how the contexts' verdicts made this one (``decisions.combine``)
            "contexts_rule": c.contexts,
            "other_version": self.other_version,
            "look": self.look,
            "weight": self.weight,
        }


# -- evaluation ----------------------------------------------------------------------------
def metric_column(name: str) -> str:
    return f"{results.COUNTER_PREFIX}{name}" if name in COUNTERS else name


def column(frame: pd.DataFrame, key: str) -> str | None:
    """The rows' column a claim's key names (``index`` → ``knob_index``)."""
    for col in (
        SPECIAL_KEYS.get(key),
        f"{results.KNOB_PREFIX}{key}",
        f"{results.WORKLOAD_PREFIX}{key}",
    ):
        if col and col in frame:
            return col
    return None


def _select(frame: pd.DataFrame, conditions: dict[str, Any]) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for key, value in conditions.items():
        col = column(frame, key)
        if col is None:
            return frame.iloc[0:0]
        mask &= frame[col].map(lambda cell, v=value: same(cell, v))
    return frame[mask]


def _context_columns(frame: pd.DataFrame, claim: Claim) -> list[str]:
    """Swept columns the claim does not mention: compared within each of their values."""
    named = {column(frame, k) for k in (*claim.a, *claim.b, *claim.where, *claim.than)}
    if claim.along:
        named.add(column(frame, claim.along))
    cols = results.swept_columns(frame)
    for extra in ("cache_requested", "workload"):
        if extra in frame and frame[extra].nunique(dropna=False) > 1:
            cols.append(extra)
    keys = [c for c in named if c is not None and c in frame]
    keys = [c for c in keys if c not in {column(frame, k) for k in claim.where}]

    def follows_from_keys(col: str) -> bool:
        # e.g. a pool given in bytes is a different page count at each page size: it moves
        # with the page size the claim compares, so it is no context to compare within
        return (
            bool(keys) and frame.groupby(keys, dropna=False)[col].nunique(dropna=False).max() <= 1
        )

    return [c for c in cols if c not in named and not follows_from_keys(c)]


def _context_text(key: tuple, cols: Sequence[str]) -> str:
    names = [
        c.removeprefix(results.KNOB_PREFIX)
        .removeprefix(results.WORKLOAD_PREFIX)
        .replace("cache_requested", "cache")
        for c in cols
    ]
    # a workload that has no value of a key (a multipoint's selectivity) is not named by it
    return ", ".join(f"{n} {v}" for n, v in zip(names, key) if not pd.isna(v))


def _fmt(value: float, metric: str) -> str:
    """A figure of ``metric`` as the evidence quotes it: a time in ms or s, else a number."""
    if not math.isfinite(value):
        return "n/a"
    if metric.endswith("_s") and not metric.endswith(("rows_s", "per_s", "mb_s")):  # a time
        return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:.4g}"


@dataclass
class Outcome:
    """One context's verdict, its evidence, likely causes and repetitions needed."""

    verdict: str
    text: str
    causes: list[str] = field(default_factory=list)
    needed: int | None = None
    # the one figure of this context: a/b's ratio and interval, or where the curves cross
    ratio: tuple[float, float, float] | None = None
    crossing: float | None = None
    # the compared sides' own figures (``figures``: the figure every page quotes for them)
    # and the test behind the ratio, for the page's plain sentence and its detail
    sides: list[dict[str, Any]] = field(default_factory=list)
    test: dict[str, Any] | None = None
    # along a swept key (falls, rises, flat_then_falls): the medians at every value and the
    # curve's shape in words (``_curve``)
    curve: dict[str, Any] | None = None
    metric: str = ""  # the sides' metric ("" for a ratio of ratios)


def _test(a: pd.DataFrame, b: pd.DataFrame, metric: str, alpha: float) -> stats.RatioTest | None:
    """``a``'s rows against ``b``'s (ratio a/b), paired by round where both carry one (by
    pass where a blocked order measured them a pass apart: ``sequential.pairing``); None
    when a side has no finite value. Seeded by the compared points, so the report's own
    figures and tables give the same interval for the same comparison."""
    ids = [r.get("point_id", []) for r in (b, a)]
    old, new = hostspeed.values([b, a], metric_column(metric)) or (
        _values(b, metric),
        _values(a, metric),
    )
    (old_units, new_units), unit = sequential.pairing(b, a)
    try:
        return stats.compare_samples(
            old,
            new,
            alpha=alpha,
            key=stats.comparison_key(metric_column(metric), *ids),
            old_rounds=old_units,
            new_rounds=new_units,
            unit=unit,
        )
    except ValueError:
        return None


def _n_text(t: stats.RatioTest) -> str:
    units = "passes" if t.unit == "pass" else f"{t.unit}s"
    n = f"{t.n} {units} paired" if t.paired else f"n={t.n_new}/{t.n_old}"
    return f"{n}, smallest possible p {t.min_p:.2g}"


def _compare_text(
    t: stats.RatioTest | None, metric: str, a: str, b: str, sides: Sequence[dict] = ()
) -> str:
    """ "a 41 ms vs b 69 ms: ratio ...": each side's median its figure (``_side``) where it
    has one, the test's medians otherwise."""
    if t is None:
        return f"{a} vs {b}: no finite values on one side"
    med = [s.get("median", math.nan) for s in sides] or [math.nan, math.nan]
    new = med[0] if math.isfinite(med[0]) else t.new_median
    old = med[1] if math.isfinite(med[1]) else t.old_median
    return (
        f"{a} {_fmt(new, metric)} vs {b} {_fmt(old, metric)}: ratio "
        f"{t.ratio:.3g} [{t.low:.3g}, {t.high:.3g}], p={t.p:.2g}, {_n_text(t)}"
    )


def _side(shown: pd.DataFrame, label: str, rows: pd.DataFrame, metric: str) -> dict[str, Any]:
    """One compared side as the pages quote it: its label, points and figure (median, its
    interval and that interval's real coverage), from every row of the sweep (``shown``)."""
    points = sorted({str(p) for p in rows.get("point_id", [])})
    f = figures.of_points(shown, points, metric_column(metric))
    if f.n == 0 and metric == "uses_index":
        f = stats.median_interval(_values(rows, metric))
    return {
        "label": label,
        "points": points,
        "median": f.median,
        "low": f.low,
        "high": f.high,
        "level": f.coverage,
        "n": f.n,
    }


def _test_detail(t: stats.RatioTest | None) -> dict[str, Any] | None:
    """What a page folds beneath a ratio: its test, rounds and the interval's real level."""
    if t is None:
        return None
    return {
        "n": t.n,
        "unit": t.unit,
        "paired": t.paired,
        "n_old": t.n_old,
        "n_new": t.n_new,
        "p": t.p,
        "min_p": t.min_p,
        "level": t.real_level,
        "method": t.method,
    }


def _evidence_causes(
    verdict: str, t: stats.RatioTest | None, claim: Claim, between: str = ""
) -> tuple[list[str], int | None]:
    """Causes the comparison itself shows, and the repetitions an undecided one needs.
    ``between``: what the comparison compares where it is not the whole claim (a trend's
    ends: "buffer_pool 16 and 65536"), so a cause never speaks for the whole curve."""
    if t is None or verdict == HOLDS or math.isnan(t.ratio):
        return [], None
    found, m = [], claim.min_effect
    seen = f"no difference between {between} seen" if between else "no difference seen"
    if t.ratio == 1 and t.low == t.high == 1:
        found.append(f"{seen} (the same values on both sides)")
    elif verdict == SHORT:
        found.append(
            f"found instead: ratio {t.ratio:.3g} [{t.low:.3g}, {t.high:.3g}], short "
            f"of the claimed {m:.0%}"
        )
    elif abs(t.ratio - 1) < m:
        found.append(f"{seen} (ratio {t.ratio:.3g}, within ±{m:.0%})")
    elif verdict == CONTRADICTED:
        found.append(f"found instead: ratio {t.ratio:.3g} [{t.low:.3g}, {t.high:.3g}]")
    if verdict != INCONCLUSIVE:
        return found, None
    shown = t.low >= 1 + m or t.high <= 1 - m  # the whole interval past the margin
    if abs(t.ratio - 1) >= m and t.significant(claim.alpha) and not shown:
        found.append(
            f"a difference, not shown to reach ±{m:.0%} (ratio {t.ratio:.3g}, "
            f"interval [{t.low:.3g}, {t.high:.3g}])"
        )
    if not t.can_decide(claim.alpha):
        n = f"{t.n} {t.unit}s" if t.paired else f"{t.n_new} and {t.n_old} repetitions"
        found.append(f"too few repetitions: {n} give no p below {t.min_p:.2g}")
    needed = stats.repetitions_needed(t, m, claim.alpha, DIRECTION.get(claim.kind, 0))
    if needed is not None:
        found.append(f"too few repetitions for the observed variance (needs ~{needed})")
    return found, needed


def _row_causes(rows: pd.DataFrame, metric: str) -> list[str]:
    """What in the rows themselves makes a comparison doubtful."""
    found: list[str] = []
    if "access_matches" in rows:
        bad = rows[rows["access_matches"].astype(str).str.lower() == "false"]
        for pid, g in bad.groupby("point_id"):
            found.append(
                f"plan not the one asked for at {pid} ({g['access_path'].iloc[0]}, "
                f"expected {g['access_expected'].iloc[0]})"
            )
    if {"cache_requested", "cache_achieved"} <= set(rows):
        cold = rows[rows["cache_requested"] == "cold"]
        missed = cold[cold["cache_achieved"] != "cold"]
        for pid, g in missed.groupby("point_id"):
            asked = int((cold["point_id"] == pid).sum())
            found.append(
                f"cache not cold at {pid} ({len(g)} of {asked} repetitions "
                f"{g['cache_achieved'].iloc[0]})"
            )
    # the client's share of the time can only blur a time or a rate, never a count
    if "client_share" in rows and metric_column(metric).endswith("_s"):
        for pid, g in rows.groupby("point_id"):
            share = pd.to_numeric(g["client_share"], errors="coerce").median()
            if math.isfinite(share) and share > CLIENT_BOUND:
                found.append(f"client-bound at {pid} (client share {share:.2f})")
    return found


def _outcome(
    verdict: str,
    text: str,
    t: stats.RatioTest | None,
    claim: Claim,
    rows: pd.DataFrame,
    extra: Sequence[str] = (),
    between: str = "",
    curve: dict[str, Any] | None = None,
    metric: str | None = None,
) -> Outcome:
    ratio = (t.ratio, t.low, t.high) if t is not None and math.isfinite(t.ratio) else None
    detail = _test_detail(t)
    metric = claim.metric if metric is None else metric
    if verdict == HOLDS:
        return Outcome(verdict, text, ratio=ratio, test=detail, curve=curve, metric=metric)
    evidence, needed = _evidence_causes(verdict, t, claim, between)
    causes = [*extra, *evidence, *_row_causes(rows, claim.metric)]
    return Outcome(
        verdict, text, causes, needed, ratio=ratio, test=detail, curve=curve, metric=metric
    )


def _uses_index(path: Any) -> float:
    """1 for a plan through an index (``index:`` or ``index-only:``), 0 for any other, NaN
    when no plan was recorded."""
    if not isinstance(path, str) or path.strip() in ("", "unknown"):
        return math.nan
    return 1.0 if path.strip().startswith("index") else 0.0


def _metric(rows: pd.DataFrame, metric: str) -> pd.Series | None:
    """The metric per row: its column, or derived from the plan (uses_index)."""
    col = metric_column(metric)
    if col in rows:
        return pd.to_numeric(rows[col], errors="coerce")
    if metric == "uses_index" and "access_path" in rows:
        return rows["access_path"].map(_uses_index).astype(float)
    return None


def _values(rows: pd.DataFrame, metric: str) -> np.ndarray:
    values = _metric(rows, metric)
    return np.array([]) if values is None else values.to_numpy(dtype=float)


def _sorted_along(rows: pd.DataFrame, col: str) -> list[Any]:
    vals = list(pd.unique(rows[col].dropna()))
    return sorted(vals, key=lambda v: (as_number(v) is None, as_number(v) or 0, str(v)))


def _at(rows: pd.DataFrame, col: str, value: Any) -> pd.DataFrame:
    return rows[rows[col].map(lambda c: same(c, value))]


def _ratio_per_unit(
    a: np.ndarray, b: np.ndarray, units_a: np.ndarray | None, units_b: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """a's median over b's in every unit both sides measured: (ratios, units)."""
    if units_a is None or units_b is None:
        return np.array([]), np.array([])
    pa, pb = stats.per_round(a, units_a), stats.per_round(b, units_b)
    shared = sorted(set(pa) & set(pb))
    ratios = np.array([pa[u] / pb[u] if pb[u] else math.nan for u in shared], dtype=float)
    return ratios, np.array(shared, dtype=float)


def _interaction(claim: Claim, rows: pd.DataFrame, other: pd.DataFrame) -> Outcome:
    """``than``: the ratio a/b in ``rows`` (where ``where`` holds) over the ratio a/b in
    ``other`` (where ``than`` replaces it), per shared unit, paired."""
    metric, alpha, m = claim.metric, claim.alpha, claim.min_effect
    sides = [
        _select(rows, claim.a),
        _select(rows, claim.b),
        _select(other, claim.a),
        _select(other, claim.b),
    ]
    values = hostspeed.values(sides, metric_column(metric)) or [_values(s, metric) for s in sides]
    units, unit = sequential.pairing(*sides)
    here, here_units = _ratio_per_unit(values[0], values[1], units[0], units[1])
    there, there_units = _ratio_per_unit(values[2], values[3], units[2], units[3])
    label = f"{kv(claim.a)}/{kv(claim.b)}"
    if here.size == 0 or there.size == 0:
        return Outcome(INCONCLUSIVE, f"{label}: no rounds measured on both sides")
    ids = [r.get("point_id", []) for r in (sides[2], sides[0])]
    try:
        t = stats.compare_samples(
            there,
            here,
            alpha=alpha,
            key=stats.comparison_key(metric_column(metric), *ids),
            old_rounds=there_units,
            new_rounds=here_units,
            unit=unit,
        )
    except ValueError:
        t = None
    claimed = decisions.LOWER if claim.kind == "lower" else decisions.HIGHER
    verdict = decisions.directional(t, claimed, alpha, m)
    where, than = kv(claim.where), kv({**claim.where, **claim.than})
    if t is None:
        text = f"{label} ({where}) vs ({than}): no finite values on one side"
    else:
        text = (
            f"{label} {float(np.median(here)):.3g} ({where}) vs {float(np.median(there)):.3g}"
            f" ({than}): ratio {t.ratio:.3g} [{t.low:.3g}, {t.high:.3g}], p={t.p:.2g}, "
            f"{_n_text(t)}"
        )
    out = _outcome(verdict, text, t, claim, pd.concat(sides), metric="")
    if t is None or not math.isfinite(t.ratio):
        return out
    # the sides: a/b's ratio where ``where`` holds and where ``than`` replaces it
    ratios = [{"label": where, "median": t.new_median}, {"label": than, "median": t.old_median}]
    return dataclasses.replace(out, sides=ratios)


def _evaluate_one(
    claim: Claim, rows: pd.DataFrame, other: pd.DataFrame | None, shown: pd.DataFrame
) -> Outcome:
    """The verdict on one context's rows (``other``: the same context where ``than``
    holds, for a claim that has one; ``shown``: every row of the sweep, whose figures the
    evidence quotes)."""
    metric, alpha, m = claim.metric, claim.alpha, claim.min_effect
    if claim.than:
        return _interaction(claim, rows, other if other is not None else rows.iloc[0:0])
    if claim.kind in PAIR_KINDS:
        a, b = _select(rows, claim.a), _select(rows, claim.b)
        t = _test(a, b, metric, alpha)
        if claim.kind == "similar":
            claimed, verdict = 0, decisions.similarity(t, alpha, m)
        else:
            claimed = decisions.LOWER if claim.kind == "lower" else decisions.HIGHER
            verdict = decisions.directional(t, claimed, alpha, m)
        sides = [_side(shown, kv(claim.a), a, metric), _side(shown, kv(claim.b), b, metric)]
        text = _compare_text(t, metric, kv(claim.a), kv(claim.b), sides)
        return dataclasses.replace(
            _outcome(verdict, text, t, claim, pd.concat([a, b])), sides=sides
        )
    col = column(rows, claim.along or "")
    if col is None:
        return Outcome(INCONCLUSIVE, f"no column for {claim.along}")
    along = _sorted_along(rows, col)
    if len(along) < 2:
        return Outcome(INCONCLUSIVE, f"fewer than two values of {claim.along}")
    if claim.kind in ("falls", "rises"):
        return _trend(claim, rows, col, along, shown)
    if claim.kind == FLAT_THEN_FALLS:
        return _flat_then_falls(claim, rows, col, along, shown)
    return _crossover(claim, rows, col, along, shown)


def _trend(
    claim: Claim, rows: pd.DataFrame, col: str, along: list[Any], shown: pd.DataFrame
) -> Outcome:
    """``falls``/``rises``: the largest value of ``along`` against the smallest gives the size
    and direction; a trend test over every value (``decisions.trend``: blocked by round where
    the rows carry one) tests the trend; each step between neighbouring values that goes
    significantly the other way, by more than min_effect, breaks it and contradicts the
    claim."""
    metric, alpha, m = claim.metric, claim.alpha, claim.min_effect
    claimed = decisions.LOWER if claim.kind == "falls" else decisions.HIGHER
    first, last = _at(rows, col, along[0]), _at(rows, col, along[-1])
    t = _test(last, first, metric, alpha)
    verdict = decisions.directional(t, claimed, alpha, m)
    name = claim.along
    ends = [(f"{name} {along[-1]}", last), (f"{name} {along[0]}", first)]
    sides = [_side(shown, label, r, metric) for label, r in ends]
    text = _compare_text(t, metric, ends[0][0], ends[1][0], sides)
    rank = rows[col].map(lambda c: next((i for i, v in enumerate(along) if same(c, v)), np.nan))
    scaled = hostspeed.values([rows], metric_column(metric))
    values = scaled[0] if scaled else _values(rows, metric)
    (units,), unit = sequential.pairing(rows)
    trend = decisions.trend(rank.to_numpy(dtype=float), values, units, unit)
    text += f"; trend over {len(along)} values: {trend.text}"
    breaks = []
    for low, high in zip(along, along[1:]):
        step = _test(_at(rows, col, high), _at(rows, col, low), metric, alpha)
        if decisions.directional(step, -claimed, alpha, m) == HOLDS and decisions.clears(
            step, -claimed, m
        ):
            breaks.append(
                f"{low} → {high} ratio {step.ratio:.3g} [{step.low:.3g}, {step.high:.3g}]"
            )
    extra = []
    if breaks:
        text += "; against the trend: " + ", ".join(breaks)
        verdict = CONTRADICTED
        extra.append(f"not monotonic: {len(breaks)} step(s) go the other way")
    elif verdict == HOLDS and not (trend.p < alpha and trend.sign * claimed > 0):
        verdict = INCONCLUSIVE
        extra.append(f"the trend over every value is not significant (p={trend.p:.2g})")
    curve = _curve(claim, rows, col, along, shown)
    text += f"; curve: {curve['text']}"
    ends = f"the ends ({name} {along[0]} and {along[-1]})"
    out = _outcome(verdict, text, t, claim, pd.concat([first, last]), extra, ends, curve)
    return dataclasses.replace(out, sides=sides)


# What a step between neighbouring values did, in a curve's shape (``_curve``).
STEP_FALLS, STEP_RISES, STEP_LEVEL, STEP_UNCLEAR = "falls", "rises", "level", "no clear step"


def _step_word(t: stats.RatioTest | None, alpha: float, m: float) -> str:
    """A step's word: falls or rises where the comparison holds at the margin (as a claim
    would), level where its whole interval lies within ±margin, else no clear step."""
    if decisions.directional(t, decisions.LOWER, alpha, m) == HOLDS:
        return STEP_FALLS
    if decisions.directional(t, decisions.HIGHER, alpha, m) == HOLDS:
        return STEP_RISES
    if (
        t is not None
        and decisions.usable(t, alpha)
        and decisions.short_of(t, decisions.LOWER, m)
        and decisions.short_of(t, decisions.HIGHER, m)
    ):
        return STEP_LEVEL
    return STEP_UNCLEAR


def _series_text(values: Sequence[float], metric: str) -> str:
    """Medians in one unit: "65.0, 65.4, 42.7 ms" for times under a second."""
    finite = [v for v in values if math.isfinite(v)]
    is_time = metric.endswith("_s") and not metric.endswith(("rows_s", "per_s", "mb_s"))
    if is_time and finite and max(finite) < 1:
        return ", ".join(f"{v * 1e3:.3g}" if math.isfinite(v) else "n/a" for v in values) + " ms"
    return ", ".join(_fmt(v, metric) for v in values)


def _curve(
    claim: Claim, rows: pd.DataFrame, col: str, along: list[Any], shown: pd.DataFrame
) -> dict[str, Any]:
    """The whole curve of a claim along a swept key: the median at every value (each value's
    figure, ``_side``: the number every page quotes for it) and its shape, each step between
    neighbours in words (``_step_word``), runs of one word merged: "65.0, 65.4, 64.1, 67.1,
    42.7 ms at buffer_pool 64 … 16384: level, then falls"."""
    metric, alpha, m = claim.metric, claim.alpha, claim.min_effect
    medians = [_side(shown, "", _at(rows, col, v), metric)["median"] for v in along]
    words = [
        _step_word(_test(_at(rows, col, high), _at(rows, col, low), metric, alpha), alpha, m)
        for low, high in zip(along, along[1:])
    ]
    shape = [w for i, w in enumerate(words) if i == 0 or w != words[i - 1]]
    at = (
        f"{claim.along} {along[0]} … {along[-1]}"
        if len(along) > 2
        else (f"{claim.along} {along[0]}, {along[-1]}")
    )
    text = f"{_series_text(medians, metric)} at {at}: {', then '.join(shape)}"
    return {
        "along": claim.along,
        "values": [_plain(v) for v in along],
        "medians": medians,
        "shape": ", then ".join(shape),
        "text": text,
    }


def _plain(value: Any) -> Any:
    """A swept value as JSON keeps it (numpy numbers as Python's)."""
    return value.item() if isinstance(value, np.generic) else value


def _pool_holds_data(rows: pd.DataFrame, col: str, along: list[Any]) -> list[bool] | None:
    """Per value of the pool: whether it holds the data (the table with its indexes), by the
    rows' medians: the pool as applied (pages) times the page size against ``data_bytes``.
    None where the rows do not record them."""
    need = {"applied_buffer_pool", "page_size_bytes", "data_bytes"}
    if not need <= set(rows):
        return None
    out = []
    for v in along:
        r = _at(rows, col, v)
        pool = pd.to_numeric(r["applied_buffer_pool"], errors="coerce") * pd.to_numeric(
            r["page_size_bytes"], errors="coerce"
        )
        data = pd.to_numeric(r["data_bytes"], errors="coerce")
        if not (pool.notna().any() and data.notna().any()):
            return None
        out.append(bool(pool.median() >= data.median()))
    return out


def _flat_then_falls(
    claim: Claim, rows: pd.DataFrame, col: str, along: list[Any], shown: pd.DataFrame
) -> Outcome:
    """``flat_then_falls`` (along the pool): no gain while the pool is smaller than the data,
    a gain once it holds them ("more memory often does not improve performance unless you
    can make the pool(s) larger than the data", The Buffer Pool Hit Ratio is Dead).

    Where the pool holds the data is read from the rows (``_pool_holds_data``), never given.
    Two paired comparisons, each as any other claim's (paired by round or pass, at the
    claim's alpha, which a sweep's looks spend): the largest pool below the data against
    the smallest, whose whole interval must lie short of a gain of the margin (level, or
    slower: ``decisions.short_of``); and the smallest pool that holds the data against the
    largest below, a gain of at least the margin (``decisions.directional`` holds). The
    claim holds only when both do (an intersection-union test: its chance to hold falsely
    stays within alpha with no correction); a gain shown below the data contradicts it, and
    no gain shown once the pool holds them (short, similar or the other way) does too."""
    metric, alpha, m = claim.metric, claim.alpha, claim.min_effect
    name = claim.along
    held = _pool_holds_data(rows, col, along)
    curve = _curve(claim, rows, col, along, shown)
    if held is None:
        return Outcome(
            INCONCLUSIVE,
            f"curve: {curve['text']}",
            ["the rows record no pool or data size to tell where the pool holds the data"],
            curve=curve,
            metric=metric,
        )
    below = [v for v, h in zip(along, held) if not h]
    holding = [v for v, h in zip(along, held) if h]
    if len(below) < 2 or not holding:
        why = (
            "no pool swept holds the data"
            if not holding
            else "fewer than two pools swept below the data"
        )
        return Outcome(
            INCONCLUSIVE, f"{why}; curve: {curve['text']}", [why], curve=curve, metric=metric
        )
    small, large, first = below[0], below[-1], holding[0]
    t_flat = _test(_at(rows, col, large), _at(rows, col, small), metric, alpha)
    t_gain = _test(_at(rows, col, first), _at(rows, col, large), metric, alpha)
    gained_below = decisions.directional(t_flat, decisions.LOWER, alpha, m) == HOLDS
    level_below = (
        t_flat is not None
        and decisions.usable(t_flat, alpha)
        and decisions.short_of(t_flat, decisions.LOWER, m)
    )
    gain = decisions.directional(t_gain, decisions.LOWER, alpha, m)
    extra: list[str] = []
    if gained_below:
        verdict = CONTRADICTED
        extra.append(
            f"a gain below the data: {name} {small} → {large} ratio "
            f"{t_flat.ratio:.3g} [{t_flat.low:.3g}, {t_flat.high:.3g}]"
        )
    elif gain in (SHORT, decisions.SIMILAR, CONTRADICTED):
        verdict = gain
        extra.append(
            f"no gain once the pool holds the data: {name} {large} → {first} ratio "
            f"{t_gain.ratio:.3g} [{t_gain.low:.3g}, {t_gain.high:.3g}]"
        )
    elif level_below and gain == HOLDS:
        verdict = HOLDS
    else:
        verdict = INCONCLUSIVE
        if not level_below:
            extra.append(
                f"below the data ({name} {small} → {large}) neither level nor a gain "
                f"of {m:.0%} shown"
            )

    def side(v: Any) -> dict[str, Any]:
        return _side(shown, f"{name} {v}", _at(rows, col, v), metric)

    flat_sides, gain_sides = [side(large), side(small)], [side(first), side(large)]
    text = (
        f"below the data: "
        f"{_compare_text(t_flat, metric, f'{name} {large}', f'{name} {small}', flat_sides)}"
        f"; once the pool holds the data: "
        f"{_compare_text(t_gain, metric, f'{name} {first}', f'{name} {large}', gain_sides)}"
        f"; curve: {curve['text']}"
    )
    rows_of_sides = pd.concat([_at(rows, col, v) for v in (small, large, first)])
    if verdict in (HOLDS, INCONCLUSIVE):
        between = f"{name} {large} and {first}"
        out = _outcome(verdict, text, t_gain, claim, rows_of_sides, extra, between, curve)
        return dataclasses.replace(out, sides=gain_sides)
    # decided against: the comparison that decided is named in ``extra``, not repeated, and
    # its ratio and sides are the figure the page quotes
    t, sides = (t_flat, flat_sides) if gained_below else (t_gain, gain_sides)
    ratio = (t.ratio, t.low, t.high) if t is not None and math.isfinite(t.ratio) else None
    causes = [*extra, *_row_causes(rows_of_sides, metric)]
    return Outcome(
        verdict,
        text,
        causes,
        ratio=ratio,
        sides=sides,
        test=_test_detail(t),
        curve=curve,
        metric=metric,
    )


def _crossover(
    claim: Claim, rows: pd.DataFrame, col: str, along: list[Any], shown: pd.DataFrame
) -> Outcome:
    """``a`` lower than ``b`` at small values of ``along``, higher at large ones, crossing
    within the claimed window: the crossing lies between the last value where ``a`` is
    clearly lower (the comparison holds for ``lower``) and the first after it where it is
    clearly higher. A crossing beyond a swept end is reported as outside the tested range,
    and contradicts only when the window does not reach past that end. Curves that cross
    back (``a`` clearly lower again after ``b`` was) have no one crossing: inconclusive."""
    metric, alpha, m = claim.metric, claim.alpha, claim.min_effect
    a_rows, b_rows = _select(rows, claim.a), _select(rows, claim.b)
    xs, signs, tests = [], [], []
    for v in along:
        t = _test(_at(a_rows, col, v), _at(b_rows, col, v), metric, alpha)
        sign = 0
        if decisions.directional(t, decisions.LOWER, alpha, m) == HOLDS:
            sign = -1
        elif decisions.directional(t, decisions.HIGHER, alpha, m) == HOLDS:
            sign = 1
        number = as_number(v)
        xs.append(math.nan if number is None else number)
        signs.append(sign)
        tests.append(t)
    lo, hi = claim.within or (-math.inf, math.inf)
    show = _along_text(claim.along)
    verdict, where, extra = _crossing(xs, signs, lo, hi, show)
    # Curves that cross back have no one crossing to place.
    once = _crossed_back(signs) is None
    # where the figures' medians cross, as the page's figure draws them
    medians = [
        (
            x,
            _side(shown, "", _at(a_rows, col, v), metric)["median"],
            _side(shown, "", _at(b_rows, col, v), metric)["median"],
        )
        for x, v in zip(xs, along)
    ]
    estimate = _crossing_estimate(medians, _bracket(xs, signs)) if once else None
    est = f"≈{show(estimate)} " if estimate is not None else ""
    ratios = ", ".join(f"{show(x)}: {t.ratio:.2f}" for x, t in zip(xs, tests) if t is not None)
    shown = next((t for t in tests if t is not None), None)
    n = f"; {_n_text(shown)} per value" if shown is not None else ""
    text = f"crossing {est}({where}; a/b by {claim.along}: {ratios}{n})"
    if verdict == HOLDS:
        return Outcome(verdict, text, crossing=estimate)
    causes = [*extra, *_row_causes(pd.concat([a_rows, b_rows]), metric)]
    return Outcome(verdict, text, causes, crossing=estimate)


def _along_text(along: str | None) -> Callable[[float], str]:
    """How a value along the swept key is written: a selectivity in % (as the findings and
    the figures speak of it), anything else as it is."""
    if along == "selectivity":
        return lambda x: f"{x * 100:.3g} %" if math.isfinite(x) else f"{x:g}"
    return lambda x: f"{x:g}"


def _crossing(
    xs: list[float], signs: list[int], lo: float, hi: float, show: Callable[[float], str]
) -> tuple[str, str, list[str]]:
    """(verdict, where the crossing lies, causes) from the sign at each value swept: -1 where
    ``a`` is clearly lower, +1 where ``b`` is, 0 where neither."""
    first, last = xs[0], xs[-1]
    back = _crossed_back(signs)
    if back is not None:
        where = (
            f"b clearly lower at {show(xs[back[0]])}, a clearly lower again at {show(xs[back[1]])}"
        )
        return INCONCLUSIVE, where, [f"the curves cross more than once ({where})"]
    below = [i for i, s in enumerate(signs) if s < 0]
    lower_end = max(below) if below else None
    above = [i for i, s in enumerate(signs) if s > 0 and (lower_end is None or i > lower_end)]
    upper_end = min(above) if above else None
    if lower_end is not None and upper_end is not None:
        left, right = xs[lower_end], xs[upper_end]
        where = f"between {show(left)} and {show(right)}"
        ends = [e for e, at in (("low", lower_end == 0), ("high", upper_end == len(xs) - 1)) if at]
        edge = [f"the crossing lies at the {e} edge of the tested range" for e in ends]
        where += f", at the tested range's {' and '.join(ends)} edge" if ends else ""
        if lo <= left and right <= hi:
            return HOLDS, where, []
        if right <= lo or left >= hi:
            return (
                CONTRADICTED,
                where,
                [f"found instead: the crossing {where}, outside [{show(lo)}, {show(hi)}]"],
            )
        return (
            INCONCLUSIVE,
            where,
            [
                f"the crossing ({show(left)}–{show(right)}) straddles an end "
                f"of [{show(lo)}, {show(hi)}]",
                *edge,
            ],
        )
    if upper_end is not None:  # a never clearly lower: the crossing lies before upper_end
        right = xs[upper_end]
        if upper_end == 0:
            where = (
                "below the tested range: b already lower at the smallest value swept "
                f"({show(first)})"
            )
        else:
            where = f"below {show(right)}, where b is first clearly lower"
        if right <= lo:
            return (
                CONTRADICTED,
                where,
                [f"found instead: the crossing {where}, below the window [{show(lo)}, {show(hi)}]"],
            )
        if upper_end == 0:
            to = f"down to {show(lo)}" if math.isfinite(lo) else "smaller values"
            return (
                INCONCLUSIVE,
                where,
                [f"the crossing lies below the tested range; sweep {to} to place it"],
            )
        return INCONCLUSIVE, where, [f"no value before {show(right)} where a is clearly lower"]
    if lower_end is not None:  # b never clearly lower: the crossing lies after lower_end
        left = xs[lower_end]
        if lower_end == len(xs) - 1:
            where = (
                f"above the tested range: a still lower at the largest value swept ({show(last)})"
            )
        else:
            where = f"above {show(left)}, where a is last clearly lower"
        if left >= hi:
            return (
                CONTRADICTED,
                where,
                [f"found instead: the crossing {where}, above the window [{show(lo)}, {show(hi)}]"],
            )
        if lower_end == len(xs) - 1:
            to = f"up to {show(hi)}" if math.isfinite(hi) else "larger values"
            return (
                INCONCLUSIVE,
                where,
                [f"the crossing lies above the tested range; sweep {to} to place it"],
            )
        return INCONCLUSIVE, where, [f"no value after {show(left)} where b is clearly lower"]
    return INCONCLUSIVE, "no clear difference at any value", ["no clear difference at any value"]


def _crossed_back(signs: list[int]) -> tuple[int, int] | None:
    """(i, j): ``b`` clearly lower at value i, ``a`` clearly lower again at a later j."""
    higher = next((i for i, s in enumerate(signs) if s > 0), None)
    if higher is None:
        return None
    again = next((j for j in range(higher + 1, len(signs)) if signs[j] < 0), None)
    return None if again is None else (higher, again)


def _bracket(xs: list[float], signs: list[int]) -> tuple[float, float]:
    """The values between which the crossing lies: after the last value where ``a`` is
    clearly lower, up to the first after it where ``b`` is (the swept ends otherwise)."""
    below = [i for i, s in enumerate(signs) if s < 0]
    start = max(below) if below else 0
    above = [i for i, s in enumerate(signs) if s > 0 and i > start]
    return xs[start], xs[min(above)] if above else xs[-1]


def _crossing_estimate(
    medians: list[tuple[float, float, float]], bracket: tuple[float, float]
) -> float | None:
    """Where a's median curve meets b's (medians of every repetition, as stored), as the
    report's selectivity figure marks it (``stats.crossings``: linear in log10 of ``along``
    when every value is positive), so the page quotes one number for it: the first meeting
    within ``bracket``, else the first; the medians can meet between values where neither
    point is clearly lower, away from where the tests place it."""
    pts = [p for p in medians if all(math.isfinite(v) for v in p)]
    if len(pts) < 2:
        return None
    x, a, b = (list(c) for c in zip(*pts))
    found = stats.crossings(x, a, b, log=all(v > 0 for v in x))
    inside = [f for f in found if bracket[0] <= f <= bracket[1]]
    return (inside or found or [None])[0]


def evaluate(
    claim: Claim,
    frame: pd.DataFrame,
    alpha: float | None = None,
    shown: pd.DataFrame | None = None,
) -> Verdict:
    """The claim's verdict on a sweep's rows (one engine). ``alpha``, when given, replaces
    the claim's own (a procedure that looks several times spends its alpha over the looks).
    ``shown``: every row of the sweep (``frame`` may be the rounds up to a look), whose
    figures (``figures``) the evidence quotes for the compared points."""
    if alpha is not None:
        claim = dataclasses.replace(claim, alpha=float(alpha))
    shown = figures.at_one_speed(frame if shown is None else shown)
    # The CPU reference's weight, from the whole sweep, within the unit its claims pair by
    (frame,) = hostspeed.annotate([frame], sequential.pairing(frame)[0])
    rows = _select(frame, claim.where)
    if rows.empty:
        return Verdict(claim, INCONCLUSIVE, "no rows match", ["no rows match"])
    context = _context_columns(rows, claim)
    groups = [((), rows)] if not context else list(rows.groupby(context, dropna=False, sort=True))
    other = _select(frame, {**claim.where, **claim.than}) if claim.than else None
    parts, causes, outcomes, contexts = [], [], [], []
    refuting = decisions.refuting_alpha(claim.alpha, len(groups), claim.contexts)
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        others = None if other is None else _within(other, context, key)
        o = _evaluate_one(claim, g, others, shown)
        if refuting < claim.alpha and o.verdict in decisions.AGAINST:
            o = _refuted(claim, o, g, others, shown, refuting, len(groups))
        label = _context_text(key, context)
        parts.append(f"{label}: {o.text}" if label else o.text)
        outcomes.append(o)
        ratio = list(o.ratio) if o.ratio else None
        contexts.append(
            {
                "label": label,
                "word": word(o.verdict, claim.role),
                "ratio": ratio,
                "crossing": o.crossing,
                "sides": o.sides,
                "test": o.test,
                "curve": o.curve,
                "metric": o.metric,
            }
        )
    overall = decisions.combine([o.verdict for o in outcomes], claim.contexts)
    # the causes of the contexts that gave the verdict, not of those that did otherwise
    for c, o in zip(contexts, outcomes):
        if o.verdict == overall:
            named = [
                f"{c['label']}: {w}" if len(outcomes) > 1 and c["label"] else w for w in o.causes
            ]
            causes.extend(w for w in named if w not in causes)
    needed = [o.needed for o in outcomes if o.verdict == INCONCLUSIVE and o.needed]
    weight = None
    if hostspeed.applies([rows], metric_column(claim.metric)):
        weight = hostspeed.weight_of(rows)
        parts.append(f"times {hostspeed.NOTE}, weight {weight:.2f}")
    return Verdict(
        claim,
        overall,
        "; ".join(parts),
        causes if overall != HOLDS else [],
        _hosts(rows),
        max(needed) if needed and overall == INCONCLUSIVE else None,
        contexts,
        weight=weight,
    )


def _refuted(
    claim: Claim,
    o: Outcome,
    rows: pd.DataFrame,
    other: pd.DataFrame | None,
    shown: pd.DataFrame,
    refuting: float,
    k: int,
) -> Outcome:
    """A context against the claim at alpha, tested again by the same comparison at the
    refuting level (``decisions.refuting_alpha``: alpha over the ``k`` contexts): against
    there too, it stays so; else it is undecided (``decisions.strict``), saying why."""
    again = _evaluate_one(dataclasses.replace(claim, alpha=refuting), rows, other, shown)
    verdict = decisions.strict(o.verdict, again.verdict)
    level = f"alpha {refuting:.2g}, alpha over {k} contexts"
    if verdict == o.verdict:
        return dataclasses.replace(o, text=f"{o.text}; against the claim at {level} too")
    why = (
        f"against the claim at alpha {claim.alpha:.2g} only, not at {level}, the level "
        f"that refutes it"
    )
    return dataclasses.replace(
        o, verdict=verdict, text=f"{o.text}; {why}", causes=[why, *o.causes], needed=None
    )


def _within(frame: pd.DataFrame, cols: Sequence[str], key: tuple) -> pd.DataFrame:
    """The rows of ``frame`` in the context ``key`` of the columns ``cols``."""
    mask = pd.Series(True, index=frame.index)
    for col, value in zip(cols, key):
        if col not in frame:
            return frame.iloc[0:0]
        mask &= (
            frame[col].isna()
            if pd.isna(value)
            else frame[col].map(lambda cell, v=value: same(cell, v))
        )
    return frame[mask]


def compared_points(chosen: Iterable[Claim], frame: pd.DataFrame) -> frozenset[str]:
    """The point_ids whose rows the claims compare: both sides of a pair claim, every point
    along a trend or crossover (within each claim's ``where``)."""
    found: set[str] = set()
    for claim in chosen:
        rows = _select(frame, claim.where)
        if claim.than:
            rows = pd.concat([rows, _select(frame, {**claim.where, **claim.than})])
        if claim.kind in PAIR_KINDS:
            rows = pd.concat([_select(rows, claim.a), _select(rows, claim.b)])
        if "point_id" in rows:
            found.update(rows["point_id"].astype(str))
    return frozenset(found)


def _hosts(rows: pd.DataFrame) -> list[str]:
    """The hosts that measured ``rows``, by name (as the rows' provenance records them)."""
    if "host_name" not in rows:
        return []
    return sorted({str(h).strip() for h in rows["host_name"].dropna() if str(h).strip()})


def looks_of(frame: pd.DataFrame) -> list[int] | None:
    """The looks of a sweep measured in rounds with ``repetitions: {min, max}``, as its rows
    record them (``tunelab.analysis.sequential``); None for a fixed count or rows without rounds."""
    cols = {"round", "repetitions_min", "repetitions_max"}
    if frame.empty or not cols <= set(frame):
        return None
    low = pd.to_numeric(frame["repetitions_min"], errors="coerce").min()
    high = pd.to_numeric(frame["repetitions_max"], errors="coerce").max()
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        return None
    mode = str(frame["order_mode"].iloc[0]) if "order_mode" in frame else "rounds"
    return sequential.looks_for(int(low), int(high), mode)


def evaluate_in_looks(
    claim: Claim, frame: pd.DataFrame, looks: Sequence[int], shown: pd.DataFrame | None = None
) -> Verdict:
    """The verdict the sequential procedure reaches on rows measured in rounds: the claim is
    tested at each look the rows reach (on the rounds up to it, at the alpha that look
    spends); the first decided verdict stands, else the last look's. The same replay that
    decided when measuring stopped, so a check of the stored rows reaches its verdict."""
    rounds = pd.to_numeric(frame["round"], errors="coerce")
    # The looks this claim's own rows reached: once its points are no longer measured (it was
    # decided, or beyond the budget), later rounds of other points change nothing for it.
    if "point_id" in frame:
        mine = frame["point_id"].astype(str).isin(compared_points([claim], frame))
        own = rounds[mine] if mine.any() else rounds
    else:
        own = rounds
    n = int(own.max()) + 1 if own.notna().any() else 0
    reached = [k for k, look in enumerate(looks) if look <= n] or [0]
    verdict = None
    for k in reached:
        alpha = sequential.look_alpha(claim.alpha, k, looks)
        verdict = evaluate(
            claim, frame[rounds < looks[k]], alpha, frame if shown is None else shown
        )
        verdict.evidence += f"; look {k + 1} of {len(looks)} ({looks[k]} rounds, alpha {alpha:.3g})"
        verdict.look = {"look": k + 1, "looks": len(looks), "rounds": looks[k], "alpha": alpha}
        if verdict.decided:
            break
    assert verdict is not None
    return verdict


def evaluate_sweep(
    expect: Any, frame: pd.DataFrame, engine: str, alpha: float | None = None
) -> list[Verdict]:
    """Every claim of ``expect`` (``claimspec.sweep_claims``: the claims on ``engine``)
    evaluated; ``alpha`` as in ``evaluate``. Rows of a sweep that measures until its claims
    are decided (``repetitions: {min, max}``) are judged as the procedure that stopped it
    judged them (``evaluate_in_looks``). A verdict on rows measured under another version of
    the findings file says so (``Verdict.other_version``)."""
    looks = looks_of(frame) if alpha is None else None
    chosen = parse(expect)
    shown = figures.at_one_speed(frame)  # once: every verdict quotes the same figures
    if looks:
        verdicts = [evaluate_in_looks(c, frame, looks, shown) for c in chosen]
    else:
        verdicts = [evaluate(c, frame, alpha, shown) for c in chosen]
    measured = _digests(frame)
    for v in verdicts:
        judged = v.claim.findings_digest
        if judged and measured and measured != {judged}:
            v.other_version = (
                f"rows measured under findings {', '.join(sorted(measured))}, judged under {judged}"
            )
    return verdicts


def _digests(frame: pd.DataFrame) -> set[str]:
    if "findings_digest" not in frame:
        return set()
    return {str(d) for d in frame["findings_digest"].dropna() if str(d).strip()}


def headline(frame: pd.DataFrame, verdicts: Sequence[Verdict]) -> str | None:
    """One finding worth a line on the index, in numbers, from the first claim that holds:
    the medians of the knob it compares in order (e.g. "covering 11 ms < clustered 38 ms <
    nonclustered 55 ms, cache cold"), where a crossover lies, or how far a metric moved."""
    held = [v for v in verdicts if v.verdict == "holds"]
    if not held:
        return None
    c = held[0].claim
    rows = _select(figures.at_one_speed(frame), c.where)  # the figures every page quotes
    context = _context_columns(rows, c)
    label = ""
    if context:  # the first context only (e.g. cold before warm), named
        key, rows = next(iter(rows.groupby(context, dropna=False, sort=True)))
        label = _context_text(key if isinstance(key, tuple) else (key,), context)
    where = ", ".join(x for x in (kv(c.where), label) if x)
    where = f", {where}" if where else ""
    col = metric_column(c.metric)
    if c.metric == "uses_index" and col not in rows:
        rows = rows.assign(uses_index=_values(rows, "uses_index"))
    if c.kind == "crossover":
        est = held[0].evidence.split("crossing ", 1)[-1].split(" (", 1)[0]
        return f"{kv(c.b)} overtakes {kv(c.a)} at {c.along} {est}{where}"
    if c.kind in ("falls", "rises", FLAT_THEN_FALLS):
        along = column(rows, c.along or "")
        medians = rows.groupby(along)[col].median()
        order = _sorted_along(rows, along)
        first, last = medians[order[0]], medians[order[-1]]
        return (
            f"{c.metric} {_fmt(first, c.metric)} → {_fmt(last, c.metric)} as {c.along} "
            f"goes {order[0]} → {order[-1]}{where}"
        )
    keys = set(c.a) | set(c.b)
    key_col = column(rows, next(iter(keys))) if len(keys) == 1 else None
    if key_col and rows["point_id"].nunique() == rows[key_col].nunique():
        medians = rows.groupby(key_col)[col].median().sort_values()
        name = next(iter(keys))
        order = " < ".join(f"{k} {_fmt(m, c.metric)}" for k, m in medians.items())
        return f"{name}: {order}{where}"
    a, b = _select(rows, c.a)[col].median(), _select(rows, c.b)[col].median()
    rel = {"lower": "<", "higher": ">", "similar": "≈"}[c.kind]
    return f"{kv(c.a)} {_fmt(a, c.metric)} {rel} {kv(c.b)} {_fmt(b, c.metric)}{where}"


def summarize(verdicts: Iterable[Verdict]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for v in verdicts:
        counts[v.verdict] += 1
    return counts


def figure_text(value: float, metric: str) -> str:
    """A side's median as the evidence quotes it (a stored context's ``sides``)."""
    return _fmt(value, metric)
