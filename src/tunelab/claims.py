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
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tunelab import results
from tunelab.report import stats

KINDS = ("lower", "higher", "similar", "crossover", "falls", "rises")
PAIR_KINDS = ("lower", "higher", "similar")
ALONG_KINDS = ("crossover", "falls", "rises")
VERDICTS = ("holds", "contradicted", "inconclusive")
ALPHA = 0.05
MIN_EFFECT = 0.05
CLIENT_BOUND = 0.5  # as the report flags it

# Row columns a claim may name as its metric; counters also by their short name.
METRICS = (
    "elapsed_s", "throughput_rows_s", "engine_elapsed_s", "client_share", "q_first_s",
    "q_rest_median_s", "q_p50_s", "q_p95_s", "q_p99_s", "q_max_s", "data_mb_s", "read_mb_s",
    "physical_reads_per_s", "hit_ratio_app", "hit_ratio_sys", "written_bytes", "uses_index",
)  # fmt: skip
COUNTERS = (
    "logical_reads", "physical_reads", "prefetch_reads", "os_read_bytes", "os_write_bytes",
    "lock_waits", "lock_wait_time_ms", "lock_escalations",
)  # fmt: skip
SPECIAL_KEYS = {"cache": "cache_requested", "workload": "workload"}


@dataclass(frozen=True)
class Claim:
    index: int
    kind: str
    says: str
    metric: str = "elapsed_s"
    a: dict[str, Any] = field(default_factory=dict)
    b: dict[str, Any] = field(default_factory=dict)
    where: dict[str, Any] = field(default_factory=dict)
    along: str | None = None
    within: tuple[float, float] | None = None
    alpha: float = ALPHA
    min_effect: float = MIN_EFFECT
    engines: tuple[str, ...] = ()

    def applies_to(self, engine: str) -> bool:
        return not self.engines or engine in self.engines


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


# -- parsing and validation ---------------------------------------------------------------
def metric_column(name: str) -> str:
    return f"{results.COUNTER_PREFIX}{name}" if name in COUNTERS else name


def _claim_list(expect: Any) -> tuple[list[dict], float, float]:
    """``expect`` is a list of claims, or a mapping with sweep-wide ``alpha``/``min_effect``
    and ``claims``."""
    if isinstance(expect, dict):
        return (
            list(expect.get("claims") or []),
            float(expect.get("alpha", ALPHA)),
            float(expect.get("min_effect", MIN_EFFECT)),
        )
    return list(expect or []), ALPHA, MIN_EFFECT


def parse(expect: Any) -> list[Claim]:
    """Claims from a sweep document's ``expect`` (already checked by the schema)."""
    raw, alpha, min_effect = _claim_list(expect)
    claims = []
    for i, c in enumerate(raw):
        within = c.get("within")
        claims.append(
            Claim(
                index=i,
                kind=c["kind"],
                says=c.get("says") or describe(c),
                metric=c.get("metric", "elapsed_s"),
                a=dict(c.get("a") or {}),
                b=dict(c.get("b") or {}),
                where=dict(c.get("where") or {}),
                along=c.get("along"),
                within=(float(within[0]), float(within[1])) if within else None,
                alpha=float(c.get("alpha", alpha)),
                min_effect=float(c.get("min_effect", min_effect)),
                engines=tuple(c.get("engines") or ()),
            )
        )
    return claims


def _kv(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


def describe(c: dict) -> str:
    """A claim in words, when the sweep gives none."""
    metric = c.get("metric", "elapsed_s")
    where = f" ({_kv(c['where'])})" if c.get("where") else ""
    kind = c["kind"]
    if kind in PAIR_KINDS:
        rel = {"lower": "<", "higher": ">", "similar": "≈"}[kind]
        return f"{metric}: {_kv(c.get('a', {}))} {rel} {_kv(c.get('b', {}))}{where}"
    if kind == "crossover":
        lo, hi = c.get("within", ("?", "?"))
        return (
            f"{metric}: {_kv(c.get('b', {}))} overtakes {_kv(c.get('a', {}))} as "
            f"{c.get('along')} grows, between {lo:g} and {hi:g}{where}"
        )
    verb = "falls" if kind == "falls" else "rises"
    return f"{metric} {verb} as {c.get('along')} grows{where}"


def _values_of(points: Sequence[Any]) -> dict[str, list[Any]]:
    """Every key a claim may name, with the values the sweep's points take."""
    seen: dict[str, list[Any]] = {}

    def add(key: str, value: Any) -> None:
        vals = seen.setdefault(key, [])
        if not any(_same(v, value) for v in vals):
            vals.append(value)

    for p in points:
        for k, v in p.knobs.items():
            add(k, v)
        for k, v in p.workload.params.items():
            add(k, v)
        add("cache", p.cache)
        add("workload", p.workload.type)
    return seen


def validate(expect: Any, points: Sequence[Any], engine: str) -> list[tuple[str, str, str]]:
    """(field, message, allowed) for every claim on ``engine`` that names a key, value or
    metric the sweep does not have there (``points``: its expanded points on ``engine``)."""
    raw, _, _ = _claim_list(expect)
    values = _values_of(points)
    swept = {k for k, v in values.items() if len(v) > 1}
    allowed_keys = ", ".join(sorted(values))
    errors: list[tuple[str, str, str]] = []
    prefix = "expect.claims" if isinstance(expect, dict) else "expect"
    for i, c in enumerate(raw):
        if c.get("engines") and engine not in c["engines"]:
            continue
        at = f"{prefix}[{i}]"
        metric = c.get("metric", "elapsed_s")
        if metric not in METRICS and metric not in COUNTERS:
            errors.append((f"{at}.metric", f"unknown metric {metric!r}",
                           ", ".join((*METRICS, *COUNTERS))))  # fmt: skip
        for part in ("a", "b", "where"):
            for key, value in (c.get(part) or {}).items():
                if key not in values:
                    errors.append((f"{at}.{part}.{key}", "not a knob or parameter of the sweep",
                                   allowed_keys))  # fmt: skip
                elif not any(_same(v, value) for v in values[key]):
                    shown = ", ".join(map(str, values[key]))
                    errors.append((f"{at}.{part}.{key}", f"value {value!r} not in the sweep",
                                   shown))  # fmt: skip
        kind = c.get("kind")
        if kind in PAIR_KINDS + ("crossover",) and not (c.get("a") and c.get("b")):
            errors.append(
                (at, f"a '{kind}' claim compares a with b: give both", "a: {...}, b: {...}")
            )
        if kind in ALONG_KINDS:
            along = c.get("along")
            if along not in swept:
                errors.append((f"{at}.along", f"{along!r} is not swept (two or more values)",
                               ", ".join(sorted(swept)) or "none"))  # fmt: skip
        if kind == "crossover" and c.get("within"):
            lo, hi = c["within"]
            if not lo < hi:
                errors.append((f"{at}.within", "low must be below high", "[low, high]"))
    return errors


# -- evaluation ----------------------------------------------------------------------------
def _same(cell: Any, value: Any) -> bool:
    if isinstance(cell, float) and math.isnan(cell):
        return value is None
    for conv in (_number,):
        x, y = conv(cell), conv(value)
        if x is not None and y is not None:
            return math.isclose(x, y, rel_tol=1e-9)
    return str(cell).lower() == str(value).lower()


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    from tunelab.units import parse_size

    size = parse_size(value)
    if size is not None:
        return float(size)
    try:
        return float(str(value))
    except ValueError:
        return None


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
        mask &= frame[col].map(lambda cell, v=value: _same(cell, v))
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
    return sorted(vals, key=lambda v: (_number(v) is None, _number(v) or 0, str(v)))


def _evaluate_one(claim: Claim, rows: pd.DataFrame) -> tuple[str, str, list[str]]:
    """The verdict on one context's rows."""
    metric = claim.metric
    if claim.kind in PAIR_KINDS:
        a, b = _select(rows, claim.a), _select(rows, claim.b)
        t = _test(_values(a, metric), _values(b, metric), claim.alpha, claim.says)
        verdict = _pair_verdict(claim.kind, t, claim.alpha, claim.min_effect)
        text = _compare_text(t, metric, _kv(claim.a), _kv(claim.b))
        return verdict, text, [] if verdict == "holds" else _causes(pd.concat([a, b]))
    col = _column(rows, claim.along or "")
    if col is None:
        return "inconclusive", f"no column for {claim.along}", []
    along = _sorted_along(rows, col)
    if len(along) < 2:
        return "inconclusive", f"fewer than two values of {claim.along}", []
    if claim.kind in ("falls", "rises"):
        first = rows[rows[col].map(lambda c: _same(c, along[0]))]
        last = rows[rows[col].map(lambda c: _same(c, along[-1]))]
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
        x = _values(a_rows[a_rows[col].map(lambda c, v=v: _same(c, v))], claim.metric)
        y = _values(b_rows[b_rows[col].map(lambda c, v=v: _same(c, v))], claim.metric)
        t = _test(x, y, claim.alpha, f"{claim.says}/{v}")
        sign = 0
        if t is not None and t.significant(claim.alpha):
            sign = -1 if t.ratio < 1 else 1
        signs.append((_number(v) or math.nan, sign, t))
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
    where = ", ".join(x for x in (_kv(c.where), label) if x)
    where = f", {where}" if where else ""
    col = metric_column(c.metric)
    if c.metric == "uses_index" and col not in rows:
        rows = rows.assign(uses_index=_values(rows, "uses_index"))
    if c.kind == "crossover":
        est = held[0].evidence.split("crossing ", 1)[-1].split(" (", 1)[0]
        return f"{_kv(c.b)} overtakes {_kv(c.a)} at {c.along} {est}{where}"
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
    return f"{_kv(c.a)} {_fmt(a, c.metric)} {rel} {_kv(c.b)} {_fmt(b, c.metric)}{where}"


# -- the command ---------------------------------------------------------------------------
def _sweep_doc(path: Path) -> tuple[dict | None, str | None]:
    from tunelab import spec

    if not path.is_file():
        return None, f"{path}: sweep file not found"
    doc, errors = spec.load_yaml(path)
    if errors or not isinstance(doc, dict):
        return None, str(errors[0]) if errors else f"{path}: not a sweep file"
    return doc, None


def check_file(csv: Path, sweep: Path | None = None) -> tuple[str, list[Verdict], dict | None]:
    """The verdicts of one merged results file; raises ValueError with a one-line message."""
    try:
        frame = pd.read_csv(csv)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"{csv}: cannot read results: {exc}") from None
    if frame.empty or "sweep_file" not in frame or "engine" not in frame:
        raise ValueError(f"{csv}: not a merged results file (no rows, or no sweep_file/engine)")
    path = sweep or Path(str(frame["sweep_file"].iloc[0]))
    doc, err = _sweep_doc(path)
    if err:
        raise ValueError(err)
    name = str(frame["sweep"].iloc[0]) if "sweep" in frame else csv.stem
    verdicts = evaluate_sweep(doc.get("expect"), frame, str(frame["engine"].iloc[0]))
    return name, verdicts, doc


def default_results(results_dir: Path = Path("results")) -> list[Path]:
    """Every merged sweep file of every engine: results/<engine>/<sweep>.csv."""
    return sorted(p for p in results_dir.glob("*/*.csv") if p.is_file())


def check_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tunelab check",
        description="Check each sweep's expectations (`expect:`) on its merged results: one "
        "line per claim, exit 1 when one is contradicted.",
    )
    parser.add_argument("results", nargs="*", type=Path, metavar="RESULTS_CSV",
                        help="merged results (default: results/*/*.csv)")  # fmt: skip
    parser.add_argument("--sweep", type=Path, help="the sweep file (default: from the rows)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the verdicts here")
    parser.add_argument(
        "--no-fail", action="store_true", help="exit 0 even when a claim is contradicted"
    )
    args = parser.parse_args(argv)
    files = args.results or default_results()
    if not files:
        print("tunelab check: no results to check (results/*/*.csv is empty)", file=sys.stderr)
        return 2
    out: dict[str, Any] = {}
    contradicted = 0
    for csv in files:
        try:
            name, verdicts, _ = check_file(csv, args.sweep)
        except ValueError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        if not verdicts:
            print(f"{name}: no claims")
        for v in verdicts:
            print(v.line(name))
        contradicted += sum(v.verdict == "contradicted" for v in verdicts)
        frame = pd.read_csv(csv)
        out[str(csv)] = {
            "sweep": name,
            "engine": str(frame["engine"].iloc[0]),
            "verdicts": [v.to_json() for v in verdicts],
            "headline": headline(frame, verdicts),
        }
    if args.json:
        from tunelab import atomic

        atomic.write(args.json, lambda f: f.write(json.dumps(out, indent=2).encode()))
    return 1 if contradicted and not args.no_fail else 0


def summarize(verdicts: Iterable[Verdict]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for v in verdicts:
        counts[v.verdict] += 1
    return counts
