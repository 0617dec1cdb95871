"""What a sweep expects (its ``expect:`` list), checked on the stored rows.

A claim compares groups of repetitions, never single numbers: the ratio of the medians
with a bootstrap interval and a two-sided Mann–Whitney U test (``report.stats``). Each
claim gets a verdict:

- ``holds``: the difference is significant (p < alpha, interval excluding 1) in the claimed
  direction and at least ``min_effect`` large;
- ``contradicted``: the difference is significant the other way (or, for ``similar``,
  significant and larger than ``min_effect``);
- ``inconclusive``: anything else (intervals overlap, effect too small, rows missing).

When a claim does not hold, the rows' own evidence names a likely cause: a plan other than
the one asked for, a cold repetition that was not cold, a client-bound point. A verdict on
rows measured on more than one host says so (``hosts``): its medians compare hosts too.

Kinds (``a``/``b``/``where`` map keys -- a knob, a workload parameter, ``cache`` or
``workload`` -- to values):

- ``lower`` / ``higher``: ``a``'s metric is below / above ``b``'s;
- ``similar``: within ``min_effect`` of each other;
- ``crossover``: ``a`` is lower at the smallest value of ``along``, ``b`` at the largest,
  and they cross within ``within: [low, high]``;
- ``falls`` / ``rises``: the metric at the largest value of ``along`` is below / above the
  one at the smallest.

Rows that differ in a swept key a claim does not mention are compared within each value of
that key (e.g. cold and warm apart); the claim holds when it holds in every one.

Metrics are row columns, counters by their short name, and ``uses_index``: 1 for a row whose
plan (``access_path``) goes through an index, 0 otherwise, so that ``access: optimizer``
sweeps can state which plan the optimizer chooses. Its median is 0 or 1, so state such a
claim as ``lower`` with the side expected to use the index as ``b``: the ratio 0/1 can hold,
while 1/0 is infinite and gets no verdict.

What a claim may say, and its check against the sweep's points, is ``tunelab.claimspec``;
the ``tunelab check`` command is ``tunelab.check``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tunelab import results
from tunelab.claimspec import COUNTERS, PAIR_KINDS, Claim, as_number, kv, parse, same
from tunelab.report import stats

VERDICTS = ("holds", "contradicted", "inconclusive")
CLIENT_BOUND = 0.5  # as the report flags it
SPECIAL_KEYS = {"cache": "cache_requested", "workload": "workload"}


@dataclass
class Verdict:
    claim: Claim
    verdict: str
    evidence: str
    causes: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)  # the compared rows' hosts

    @property
    def pooled(self) -> str:
        """A warning when the compared rows come from more than one host ("" otherwise)."""
        if len(self.hosts) < 2:
            return ""
        return f"warning: rows from {len(self.hosts)} hosts compared ({', '.join(self.hosts)})"

    def line(self, sweep: str) -> str:
        why = f"; likely cause: {'; '.join(self.causes)}" if self.causes else ""
        pooled = f"; {self.pooled}" if self.pooled else ""
        return f"{sweep}: {self.claim.says}: {self.verdict} ({self.evidence}{why}{pooled})"

    def to_json(self) -> dict[str, Any]:
        return {
            "claim": self.claim.says,
            "kind": self.claim.kind,
            "verdict": self.verdict,
            "evidence": self.evidence,
            "causes": self.causes,
            "hosts": self.hosts,
        }


# -- evaluation ----------------------------------------------------------------------------
def metric_column(name: str) -> str:
    return f"{results.COUNTER_PREFIX}{name}" if name in COUNTERS else name


def _column(frame: pd.DataFrame, key: str) -> str | None:
    for col in (SPECIAL_KEYS.get(key), f"{results.KNOB_PREFIX}{key}",
                f"{results.WORKLOAD_PREFIX}{key}"):  # fmt: skip
        if col and col in frame:
            return col
    return None


def _select(frame: pd.DataFrame, conditions: dict[str, Any]) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for key, value in conditions.items():
        col = _column(frame, key)
        if col is None:
            return frame.iloc[0:0]
        mask &= frame[col].map(lambda cell, v=value: same(cell, v))
    return frame[mask]


def _context_columns(frame: pd.DataFrame, claim: Claim) -> list[str]:
    """Swept columns the claim does not mention: compared within each of their values."""
    named = {_column(frame, k) for k in (*claim.a, *claim.b, *claim.where)}
    if claim.along:
        named.add(_column(frame, claim.along))
    cols = results.swept_columns(frame)
    for extra in ("cache_requested", "workload"):
        if extra in frame and frame[extra].nunique(dropna=False) > 1:
            cols.append(extra)
    keys = [c for c in named if c is not None and c in frame]
    keys = [c for c in keys if c not in {_column(frame, k) for k in claim.where}]

    def follows_from_keys(col: str) -> bool:
        # e.g. a pool given in bytes is a different page count at each page size: it moves
        # with the page size the claim compares, so it is no context to compare within
        return (
            bool(keys) and frame.groupby(keys, dropna=False)[col].nunique(dropna=False).max() <= 1
        )

    return [c for c in cols if c not in named and not follows_from_keys(c)]


def _context_text(key: tuple, cols: Sequence[str]) -> str:
    names = [c.removeprefix(results.KNOB_PREFIX).removeprefix(results.WORKLOAD_PREFIX)
             .replace("cache_requested", "cache") for c in cols]  # fmt: skip
    return ", ".join(f"{n} {v}" for n, v in zip(names, key))


def _fmt(value: float, metric: str) -> str:
    if not math.isfinite(value):
        return "n/a"
    if metric.endswith("_s") and not metric.endswith(("rows_s", "per_s", "mb_s")):  # a time
        return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _test(a: np.ndarray, b: np.ndarray, alpha: float, key: str) -> stats.RatioTest | None:
    """``a`` against ``b`` (ratio a/b), or None when a side has no finite value."""
    try:
        return stats.compare_samples(b, a, alpha=alpha, key=key)
    except ValueError:
        return None


def _compare_text(t: stats.RatioTest | None, metric: str, a: str, b: str) -> str:
    if t is None:
        return f"{a} vs {b}: no finite values on one side"
    return (
        f"{a} {_fmt(t.new_median, metric)} vs {b} {_fmt(t.old_median, metric)}: ratio "
        f"{t.ratio:.3g} [{t.low:.3g}, {t.high:.3g}], p={t.p:.2g}, n={t.n_new}/{t.n_old}"
    )


def _pair_verdict(kind: str, t: stats.RatioTest | None, alpha: float, min_effect: float) -> str:
    # An infinite ratio (b's median is 0: e.g. no index plan at all) is a real answer.
    if t is None or math.isnan(t.ratio) or t.n_new < 2 or t.n_old < 2:
        return "inconclusive"
    sig = t.significant(alpha)
    if kind == "similar":
        if t.low >= 1 - min_effect and t.high <= 1 + min_effect:
            return "holds"
        if sig and abs(t.ratio - 1) > min_effect:
            return "contradicted"
        return "inconclusive"
    below = kind in ("lower", "falls")
    if sig and (t.high < 1 if below else t.low > 1):
        big = t.ratio <= 1 - min_effect if below else t.ratio >= 1 + min_effect
        return "holds" if big else "inconclusive"
    if sig:
        return "contradicted"
    return "inconclusive"


def _causes(rows: pd.DataFrame) -> list[str]:
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
            found.append(f"cache not cold at {pid} ({len(g)} of {asked} repetitions "
                         f"{g['cache_achieved'].iloc[0]})")  # fmt: skip
    if "client_share" in rows:
        for pid, g in rows.groupby("point_id"):
            share = pd.to_numeric(g["client_share"], errors="coerce").median()
            if math.isfinite(share) and share > CLIENT_BOUND:
                found.append(f"client-bound at {pid} (client share {share:.2f})")
    return found


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


def _evaluate_one(claim: Claim, rows: pd.DataFrame) -> tuple[str, str, list[str]]:
    """The verdict on one context's rows."""
    metric = claim.metric
    if claim.kind in PAIR_KINDS:
        a, b = _select(rows, claim.a), _select(rows, claim.b)
        t = _test(_values(a, metric), _values(b, metric), claim.alpha, claim.says)
        verdict = _pair_verdict(claim.kind, t, claim.alpha, claim.min_effect)
        text = _compare_text(t, metric, kv(claim.a), kv(claim.b))
        return verdict, text, [] if verdict == "holds" else _causes(pd.concat([a, b]))
    col = _column(rows, claim.along or "")
    if col is None:
        return "inconclusive", f"no column for {claim.along}", []
    along = _sorted_along(rows, col)
    if len(along) < 2:
        return "inconclusive", f"fewer than two values of {claim.along}", []
    if claim.kind in ("falls", "rises"):
        first = rows[rows[col].map(lambda c: same(c, along[0]))]
        last = rows[rows[col].map(lambda c: same(c, along[-1]))]
        t = _test(_values(last, metric), _values(first, metric), claim.alpha, claim.says)
        verdict = _pair_verdict(claim.kind, t, claim.alpha, claim.min_effect)
        text = _compare_text(t, metric, f"{claim.along} {along[-1]}", f"{claim.along} {along[0]}")
        return verdict, text, [] if verdict == "holds" else _causes(pd.concat([first, last]))
    return _crossover(claim, rows, col, along)


def _crossover(claim: Claim, rows: pd.DataFrame, col: str, along: list[Any]):
    """``a`` lower than ``b`` at the low end of ``along``, higher at the high end, crossing
    within the claimed range: the crossing lies between the last value where ``a`` is
    significantly lower and the first after it where it is significantly higher."""
    a_rows, b_rows = _select(rows, claim.a), _select(rows, claim.b)
    signs: list[tuple[float, int, stats.RatioTest | None]] = []
    for v in along:
        x = _values(a_rows[a_rows[col].map(lambda c, v=v: same(c, v))], claim.metric)
        y = _values(b_rows[b_rows[col].map(lambda c, v=v: same(c, v))], claim.metric)
        t = _test(x, y, claim.alpha, f"{claim.says}/{v}")
        sign = 0
        if t is not None and t.significant(claim.alpha):
            sign = -1 if t.ratio < 1 else 1
        signs.append((as_number(v) or math.nan, sign, t))
    lo, hi = claim.within or (-math.inf, math.inf)
    estimate = _crossing_estimate(signs)
    est_text = f"≈{estimate:.3g}" if estimate is not None else "none seen"
    ratios = ", ".join(f"{v:g}: {t.ratio:.2f}" for v, _, t in signs if t is not None)
    text = f"crossing {est_text} (a/b by {claim.along}: {ratios})"
    causes = _causes(pd.concat([a_rows, b_rows]))
    below = [v for v, s, _ in signs if s < 0]
    if not below:
        verdict = "contradicted" if signs[0][1] > 0 else "inconclusive"
        return verdict, text, causes
    last_below = max(below)
    above = [v for v, s, _ in signs if s > 0 and v > last_below]
    if not above:
        # a still lower at the high end: contradicted when that end is past the window
        verdict = "contradicted" if signs[-1][1] < 0 and signs[-1][0] >= hi else "inconclusive"
        return verdict, text, causes
    first_above = min(above)
    if lo <= last_below and first_above <= hi:
        return "holds", text, []
    # the crossing lies strictly between them: before ``lo`` when b already wins at ``lo``
    if first_above <= lo or last_below >= hi:
        return "contradicted", text, causes
    return "inconclusive", text, causes


def _crossing_estimate(signs: list[tuple[float, int, stats.RatioTest | None]]) -> float | None:
    """Where a's median curve first meets b's, as the report's selectivity figure marks it
    (``report.marks.crossings``: linear in log10 of ``along`` when every value is positive)."""
    from tunelab.report.marks import crossings

    pts = [(v, t.new_median, t.old_median) for v, _, t in signs if t is not None]
    if len(pts) < 2:
        return None
    x, a, b = (list(c) for c in zip(*pts))
    found = crossings(x, a, b, log=all(v > 0 for v in x))
    return found[0] if found else None


def evaluate(claim: Claim, frame: pd.DataFrame) -> Verdict:
    """The claim's verdict on a sweep's rows (one engine)."""
    rows = _select(frame, claim.where)
    if rows.empty:
        return Verdict(claim, "inconclusive", "no rows match")
    context = _context_columns(rows, claim)
    groups = [((), rows)] if not context else list(rows.groupby(context, dropna=False, sort=True))
    parts, causes, verdicts = [], [], []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        verdict, text, why = _evaluate_one(claim, g)
        label = _context_text(key, context)
        parts.append(f"{label}: {text}" if label else text)
        verdicts.append(verdict)
        causes.extend(w for w in why if w not in causes)
    if all(v == "holds" for v in verdicts):
        overall = "holds"
    elif "contradicted" in verdicts:
        overall = "contradicted"
    else:
        overall = "inconclusive"
    if overall != "holds" and not causes and "inconclusive" in verdicts:
        causes.append("the intervals overlap or the effect is below the minimum")
    kept = causes if overall != "holds" else []
    return Verdict(claim, overall, "; ".join(parts), kept, _hosts(rows))


def _hosts(rows: pd.DataFrame) -> list[str]:
    """The hosts that measured ``rows``, by name (as the rows' provenance records them)."""
    if "host_name" not in rows:
        return []
    return sorted({str(h).strip() for h in rows["host_name"].dropna() if str(h).strip()})


def evaluate_sweep(expect: Any, frame: pd.DataFrame, engine: str) -> list[Verdict]:
    return [evaluate(c, frame) for c in parse(expect) if c.applies_to(engine)]


def headline(frame: pd.DataFrame, verdicts: Sequence[Verdict]) -> str | None:
    """One finding worth a line on the index, in numbers, from the first claim that holds:
    the medians of the knob it compares in order (e.g. "covering 11 ms < clustered 38 ms <
    nonclustered 55 ms, cache cold"), where a crossover lies, or how far a metric moved."""
    held = [v for v in verdicts if v.verdict == "holds"]
    if not held:
        return None
    c = held[0].claim
    rows = _select(frame, c.where)
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
    if c.kind in ("falls", "rises"):
        along = _column(rows, c.along or "")
        medians = rows.groupby(along)[col].median()
        order = _sorted_along(rows, along)
        first, last = medians[order[0]], medians[order[-1]]
        return (f"{c.metric} {_fmt(first, c.metric)} → {_fmt(last, c.metric)} as {c.along} "
                f"goes {order[0]} → {order[-1]}{where}")  # fmt: skip
    keys = set(c.a) | set(c.b)
    key_col = _column(rows, next(iter(keys))) if len(keys) == 1 else None
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
