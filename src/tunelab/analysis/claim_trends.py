"""``falls``, ``rises`` and ``flat_then_falls`` claims: the trend, its steps, the curve's shape."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tunelab.analysis import decisions, hostspeed, sequential, stats
from tunelab.analysis.claim_evidence import (
    Outcome,
    compare_text,
    figure_text,
    outcome,
    ratio_test,
    row_causes,
    side_figure,
    test_detail,
)
from tunelab.analysis.claim_rows import metric_column, metric_values, rows_at
from tunelab.analysis.decisions import CONTRADICTED, HOLDS, INCONCLUSIVE, SHORT
from tunelab.sweep.claimspec import Claim, same


def falls_or_rises(
    claim: Claim, rows: pd.DataFrame, col: str, along: list[Any], shown: pd.DataFrame
) -> Outcome:
    """``falls``/``rises``: the largest value of ``along`` against the smallest gives the size
    and direction; a trend test over every value (``decisions.trend``: blocked by round where
    the rows carry one) tests the trend; each step between neighbouring values that goes
    significantly the other way, by more than min_effect, breaks it and contradicts the
    claim."""
    metric, alpha, m = claim.metric, claim.alpha, claim.min_effect
    claimed = decisions.LOWER if claim.kind == "falls" else decisions.HIGHER
    first, last = rows_at(rows, col, along[0]), rows_at(rows, col, along[-1])
    t = ratio_test(last, first, metric, alpha)
    verdict = decisions.directional(t, claimed, alpha, m)
    name = claim.along
    ends = [(f"{name} {along[-1]}", last), (f"{name} {along[0]}", first)]
    sides = [side_figure(shown, label, r, metric) for label, r in ends]
    text = compare_text(t, metric, ends[0][0], ends[1][0], sides)
    rank = rows[col].map(lambda c: next((i for i, v in enumerate(along) if same(c, v)), np.nan))
    scaled = hostspeed.values([rows], metric_column(metric))
    values = scaled[0] if scaled else metric_values(rows, metric)
    (units,), unit = sequential.pairing(rows)
    trend = decisions.trend(rank.to_numpy(dtype=float), values, units, unit)
    text += f"; trend over {len(along)} values: {trend.text}"
    breaks = []
    for low, high in zip(along, along[1:]):
        step = ratio_test(rows_at(rows, col, high), rows_at(rows, col, low), metric, alpha)
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
    out = outcome(verdict, text, t, claim, pd.concat([first, last]), extra, ends, curve)
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
    return ", ".join(figure_text(v, metric) for v in values)


def _curve(
    claim: Claim, rows: pd.DataFrame, col: str, along: list[Any], shown: pd.DataFrame
) -> dict[str, Any]:
    """The whole curve of a claim along a swept key: the median at every value (each value's
    figure, ``side_figure``: the number every page quotes for it) and its shape, each step between
    neighbours in words (``_step_word``), runs of one word merged: "65.0, 65.4, 64.1, 67.1,
    42.7 ms at buffer_pool 64 … 16384: level, then falls"."""
    metric, alpha, m = claim.metric, claim.alpha, claim.min_effect
    medians = [side_figure(shown, "", rows_at(rows, col, v), metric)["median"] for v in along]
    words = [
        _step_word(
            ratio_test(rows_at(rows, col, high), rows_at(rows, col, low), metric, alpha), alpha, m
        )
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
        r = rows_at(rows, col, v)
        pool = pd.to_numeric(r["applied_buffer_pool"], errors="coerce") * pd.to_numeric(
            r["page_size_bytes"], errors="coerce"
        )
        data = pd.to_numeric(r["data_bytes"], errors="coerce")
        if not (pool.notna().any() and data.notna().any()):
            return None
        out.append(bool(pool.median() >= data.median()))
    return out


def flat_then_falls(
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
    t_flat = ratio_test(rows_at(rows, col, large), rows_at(rows, col, small), metric, alpha)
    t_gain = ratio_test(rows_at(rows, col, first), rows_at(rows, col, large), metric, alpha)
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
        return side_figure(shown, f"{name} {v}", rows_at(rows, col, v), metric)

    flat_sides, gain_sides = [side(large), side(small)], [side(first), side(large)]
    text = (
        f"below the data: "
        f"{compare_text(t_flat, metric, f'{name} {large}', f'{name} {small}', flat_sides)}"
        f"; once the pool holds the data: "
        f"{compare_text(t_gain, metric, f'{name} {first}', f'{name} {large}', gain_sides)}"
        f"; curve: {curve['text']}"
    )
    rows_of_sides = pd.concat([rows_at(rows, col, v) for v in (small, large, first)])
    if verdict in (HOLDS, INCONCLUSIVE):
        between = f"{name} {large} and {first}"
        out = outcome(verdict, text, t_gain, claim, rows_of_sides, extra, between, curve)
        return dataclasses.replace(out, sides=gain_sides)
    # decided against: the comparison that decided is named in ``extra``, not repeated, and
    # its ratio and sides are the figure the page quotes
    t, sides = (t_flat, flat_sides) if gained_below else (t_gain, gain_sides)
    ratio = (t.ratio, t.low, t.high) if t is not None and math.isfinite(t.ratio) else None
    causes = [*extra, *row_causes(rows_of_sides, metric)]
    return Outcome(
        verdict,
        text,
        causes,
        ratio=ratio,
        sides=sides,
        test=test_detail(t),
        curve=curve,
        metric=metric,
    )
