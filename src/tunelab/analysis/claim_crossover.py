"""``crossover`` claims: where ``a``'s curve along a swept key crosses ``b``'s."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from tunelab.analysis import decisions, stats
from tunelab.analysis.claim_evidence import Outcome, n_text, ratio_test, row_causes, side_figure
from tunelab.analysis.claim_rows import rows_at, select
from tunelab.analysis.decisions import CONTRADICTED, HOLDS, INCONCLUSIVE
from tunelab.sweep.claimspec import Claim, as_number


def crossover(
    claim: Claim, rows: pd.DataFrame, col: str, along: list[Any], shown: pd.DataFrame
) -> Outcome:
    """``a`` lower than ``b`` at small values of ``along``, higher at large ones, crossing
    within the claimed window: the crossing lies between the last value where ``a`` is
    clearly lower (the comparison holds for ``lower``) and the first after it where it is
    clearly higher. A crossing beyond a swept end is reported as outside the tested range,
    and contradicts only when the window does not reach past that end. Curves that cross
    back (``a`` clearly lower again after ``b`` was) have no one crossing: inconclusive."""
    metric, alpha, m = claim.metric, claim.alpha, claim.min_effect
    a_rows, b_rows = select(rows, claim.a), select(rows, claim.b)
    xs, signs, tests = [], [], []
    for v in along:
        t = ratio_test(rows_at(a_rows, col, v), rows_at(b_rows, col, v), metric, alpha)
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
            side_figure(shown, "", rows_at(a_rows, col, v), metric)["median"],
            side_figure(shown, "", rows_at(b_rows, col, v), metric)["median"],
        )
        for x, v in zip(xs, along)
    ]
    estimate = _crossing_estimate(medians, _bracket(xs, signs)) if once else None
    est = f"≈{show(estimate)} " if estimate is not None else ""
    ratios = ", ".join(f"{show(x)}: {t.ratio:.2f}" for x, t in zip(xs, tests) if t is not None)
    shown = next((t for t in tests if t is not None), None)
    n = f"; {n_text(shown)} per value" if shown is not None else ""
    text = f"crossing {est}({where}; a/b by {claim.along}: {ratios}{n})"
    if verdict == HOLDS:
        return Outcome(verdict, text, crossing=estimate)
    causes = [*extra, *row_causes(pd.concat([a_rows, b_rows]), metric)]
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
