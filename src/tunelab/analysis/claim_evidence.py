"""One comparison of a claim: its ratio test, evidence in words, sides' figures and causes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tunelab.analysis import decisions, figures, hostspeed, sequential, stats
from tunelab.analysis.claim_rows import metric_column, metric_values
from tunelab.analysis.decisions import CONTRADICTED, HOLDS, INCONCLUSIVE, SHORT
from tunelab.sweep.claimspec import FLAT_THEN_FALLS, Claim

CLIENT_BOUND = 0.5  # as the report flags it
# the direction a claim of each directional kind states (``decisions.directional``)
DIRECTION = {
    "lower": decisions.LOWER,
    "falls": decisions.LOWER,
    FLAT_THEN_FALLS: decisions.LOWER,
    "higher": decisions.HIGHER,
    "rises": decisions.HIGHER,
}


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
    # curve's shape in words (``claim_trends``)
    curve: dict[str, Any] | None = None
    metric: str = ""  # the sides' metric ("" for a ratio of ratios)


def ratio_test(
    a: pd.DataFrame, b: pd.DataFrame, metric: str, alpha: float
) -> stats.RatioTest | None:
    """``a``'s rows against ``b``'s (ratio a/b), paired by round where both carry one (by
    pass where a blocked order measured them a pass apart: ``sequential.pairing``); None
    when a side has no finite value. Seeded by the compared points, so the report's own
    figures and tables give the same interval for the same comparison."""
    ids = [r.get("point_id", []) for r in (b, a)]
    old, new = hostspeed.values([b, a], metric_column(metric)) or (
        metric_values(b, metric),
        metric_values(a, metric),
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


def n_text(t: stats.RatioTest) -> str:
    units = "passes" if t.unit == "pass" else f"{t.unit}s"
    n = f"{t.n} {units} paired" if t.paired else f"n={t.n_new}/{t.n_old}"
    return f"{n}, smallest possible p {t.min_p:.2g}"


def compare_text(
    t: stats.RatioTest | None, metric: str, a: str, b: str, sides: Sequence[dict] = ()
) -> str:
    """ "a 41 ms vs b 69 ms: ratio ...": each side's median its figure (``side_figure``) where it
    has one, the test's medians otherwise."""
    if t is None:
        return f"{a} vs {b}: no finite values on one side"
    med = [s.get("median", math.nan) for s in sides] or [math.nan, math.nan]
    new = med[0] if math.isfinite(med[0]) else t.new_median
    old = med[1] if math.isfinite(med[1]) else t.old_median
    return (
        f"{a} {_fmt(new, metric)} vs {b} {_fmt(old, metric)}: ratio "
        f"{t.ratio:.3g} [{t.low:.3g}, {t.high:.3g}], p={t.p:.2g}, {n_text(t)}"
    )


def side_figure(shown: pd.DataFrame, label: str, rows: pd.DataFrame, metric: str) -> dict[str, Any]:
    """One compared side as the pages quote it: its label, points and figure (median, its
    interval and that interval's real coverage), from every row of the sweep (``shown``)."""
    points = sorted({str(p) for p in rows.get("point_id", [])})
    f = figures.of_points(shown, points, metric_column(metric))
    if f.n == 0 and metric == "uses_index":
        f = stats.median_interval(metric_values(rows, metric))
    return {
        "label": label,
        "points": points,
        "median": f.median,
        "low": f.low,
        "high": f.high,
        "level": f.coverage,
        "n": f.n,
    }


def test_detail(t: stats.RatioTest | None) -> dict[str, Any] | None:
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


def row_causes(rows: pd.DataFrame, metric: str) -> list[str]:
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


def outcome(
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
    detail = test_detail(t)
    metric = claim.metric if metric is None else metric
    if verdict == HOLDS:
        return Outcome(verdict, text, ratio=ratio, test=detail, curve=curve, metric=metric)
    evidence, needed = _evidence_causes(verdict, t, claim, between)
    causes = [*extra, *evidence, *row_causes(rows, claim.metric)]
    return Outcome(
        verdict, text, causes, needed, ratio=ratio, test=detail, curve=curve, metric=metric
    )


def figure_text(value: float, metric: str) -> str:
    """A side's median as the evidence quotes it (a stored context's ``sides``)."""
    return _fmt(value, metric)
