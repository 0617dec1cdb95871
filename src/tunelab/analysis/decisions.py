"""What one comparison (a ``stats.RatioTest`` of a against b) decides about a claim.

Four verdicts, for a claimed direction (``lower``: ratio below 1, ``higher``: above 1):

- ``holds``: the difference is significant (p < alpha and the 1 - alpha interval excludes 1)
  in the claimed direction and the whole interval lies beyond the margin (min_effect): the
  effect is shown to be at least ``margin`` large;
- ``contradicted``: the same the other way, so a 3 % effect against a 5 % margin never
  contradicts;
- ``similar``: equivalence within +-margin by two one-sided tests at alpha each (the
  1 - 2 alpha interval inside [1 - margin, 1 + margin]): the claimed effect is shown absent;
- ``short``: the whole 1 - alpha interval short of the claimed margin (above 1 - margin for
  ``lower``, below 1 + margin for ``higher``): the claimed effect is shown absent, by the
  interval that ``holds`` needs wholly beyond it. One boundary, the claimed margin, then
  decides a directional claim either way; without it an interval such as [0.97, 1.08] on a
  claim of "at least 5 % lower" (neither within +-5 % nor wholly above 1.05) stayed
  undecided though it excludes the claim, and packs flipped between the two there;
- ``inconclusive``: none of these (the interval straddles the claimed margin), including
  sample sizes whose rank test cannot reach p < alpha at all.

A claim of similarity holds on the equivalence test, and is contradicted when the
difference is significant and its whole interval lies outside +-margin; a large p alone
(absence of evidence) decides nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tunelab.analysis.stats import RatioTest

HOLDS, SIMILAR, CONTRADICTED, INCONCLUSIVE = "holds", "similar", "contradicted", "inconclusive"
SHORT = "short"
VERDICTS = (HOLDS, SIMILAR, SHORT, CONTRADICTED, INCONCLUSIVE)
DECIDED = (HOLDS, SIMILAR, SHORT, CONTRADICTED)
LOWER, HIGHER = -1, 1


def usable(t: RatioTest | None, alpha: float) -> bool:
    """A test that can decide at all: two values a side (or two rounds), a ratio that is a
    number, and sample sizes whose rank test can reach p < alpha."""
    return (
        t is not None
        and not math.isnan(t.ratio)
        and min(t.n_old, t.n_new) >= 2
        and t.can_decide(alpha)
    )


def beyond(t: RatioTest, direction: int, margin: float) -> bool:
    """The estimate at least ``margin`` from 1 in ``direction``."""
    return t.ratio <= 1 - margin if direction < 0 else t.ratio >= 1 + margin


def clears(t: RatioTest, direction: int, margin: float) -> bool:
    """The whole interval at least ``margin`` from 1 in ``direction``."""
    return t.high <= 1 - margin if direction < 0 else t.low >= 1 + margin


def short_of(t: RatioTest, direction: int, margin: float) -> bool:
    """The whole interval short of ``margin`` from 1 in ``direction``."""
    return t.low > 1 - margin if direction < 0 else t.high < 1 + margin


def directional(t: RatioTest | None, claimed: int, alpha: float, margin: float) -> str:
    """The verdict on a claim that the ratio lies below 1 (``claimed`` -1) or above (+1)."""
    if t is None or not usable(t, alpha):
        return INCONCLUSIVE
    significant = t.significant(alpha)
    if significant and clears(t, claimed, margin):
        return HOLDS
    if significant and clears(t, -claimed, margin):
        return CONTRADICTED
    if t.equivalent(margin):
        return SIMILAR
    if short_of(t, claimed, margin):
        return SHORT
    return INCONCLUSIVE


def similarity(t: RatioTest | None, alpha: float, margin: float) -> str:
    """The verdict on a claim that the ratio lies within +-margin of 1."""
    if t is None or not usable(t, alpha):
        return INCONCLUSIVE
    if t.equivalent(margin):
        return HOLDS
    if t.significant(alpha) and (clears(t, LOWER, margin) or clears(t, HIGHER, margin)):
        return CONTRADICTED
    return INCONCLUSIVE


# How the verdicts of a claim's contexts make one (the findings file's ``rules.contexts``).
ALL_BONFERRONI, ALL, MAJORITY = "all-bonferroni", "all", "majority"
CONTEXT_RULES = (ALL_BONFERRONI, ALL, MAJORITY)
AGAINST = (CONTRADICTED, SIMILAR, SHORT)


def refuting_alpha(alpha: float, contexts: int, rule: str) -> float:
    """The level at which one of a claim's ``contexts`` must show the claimed effect absent
    or reversed for the claim to be refuted: ``alpha`` over the contexts under
    ``all-bonferroni`` (its chance to refute falsely then stays within ``alpha`` over all of
    them), ``alpha`` itself under the other rules."""
    if rule == ALL_BONFERRONI and contexts > 1:
        return alpha / contexts
    return alpha


def strict(at_alpha: str, at_refuting: str | None) -> str:
    """A context's verdict for the combination: its verdict at alpha, except that one
    against the claim there must be against it at the refuting level too (``at_refuting``,
    the same comparison at ``refuting_alpha``), else it is inconclusive."""
    if at_alpha in AGAINST and at_refuting not in AGAINST:
        return INCONCLUSIVE
    return at_alpha


def combine(verdicts: list[str], rule: str = ALL) -> str:
    """One verdict from those of a claim's contexts (cold and warm, the selectivities, ...).

    ``all-bonferroni``: holds when it holds in every one, each at alpha;
    contradicted where one is; else similar or short where the claimed effect is shown absent
    in one; else inconclusive, with the contexts' verdicts against the claim already taken at
    ``refuting_alpha``, alpha over the contexts (``strict``). A finding states its effect
    without exception over the contexts it is judged in, so it holds only where each context
    shows it: an intersection-union test, whose chance to hold falsely stays within one
    context's alpha however many there are. To refute it one context is enough, so each of
    k contexts is a chance to refute falsely: at alpha / k each (Bonferroni), the chance that
    any does stays within alpha too (``benchmarks/context_rule.py`` simulates both).

    ``all`` (the lab's findings file's): the same with every context against the claim taken
    at alpha: over k contexts it refutes a claim whose effect sits at the margin up to k times
    as often, but it can refute at a sweep's first look (docs/measurement.md).

    ``majority`` (for comparison): the verdict of more than half of the contexts, the
    verdicts against it counted together (the most frequent of them named); inconclusive
    where none has more than half."""
    if rule not in CONTEXT_RULES:
        raise ValueError(f"contexts rule {rule!r}: one of {', '.join(CONTEXT_RULES)}")
    if not verdicts:
        return INCONCLUSIVE
    if rule == MAJORITY:
        half = len(verdicts) / 2
        against = [v for v in verdicts if v in AGAINST]
        if verdicts.count(HOLDS) > half:
            return HOLDS
        if len(against) > half:
            return max(AGAINST, key=against.count)
        return INCONCLUSIVE
    for v in (CONTRADICTED, SIMILAR, SHORT, INCONCLUSIVE):
        if v in verdicts:
            return v
    return HOLDS


@dataclass(frozen=True)
class Trend:
    """A test of a monotone trend over every value of a swept key: ``sign`` +1 where the
    metric rises with the value, -1 where it falls (nan: no spread); ``p`` two-sided."""

    sign: float
    p: float
    text: str


def trend(
    positions: np.ndarray,
    values: np.ndarray,
    rounds: np.ndarray | None = None,
    unit: str = "round",
) -> Trend:
    """The trend of ``values`` over ``positions`` (the rank of each row's value of ``along``).

    Rows measured in rounds are blocked by round, as every other comparison pairs them: Page's
    L test ranks the values within each round that holds every position (a round's drift
    moves all its ranks together, so it stays out of the test) and asks whether the ranks
    follow the positions; its one-sided exact p, doubled, is the two-sided p. Rows without
    rounds, or fewer than two complete rounds, or fewer than three positions, get Kendall's
    tau-b between position and value over every repetition. (nan, 1.0) when either has no
    spread. ``unit`` names what ``rounds`` number: a round, or a pass of a blocked order
    (``sequential.pairing``), whose median value per position is then ranked.
    """
    from scipy import stats

    x, y = np.asarray(positions, dtype=float), np.asarray(values, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    blocks = _blocks(x[keep], y[keep], None if rounds is None else np.asarray(rounds)[keep])
    if blocks is not None:
        up = stats.page_trend_test(blocks).pvalue
        down = stats.page_trend_test(blocks[:, ::-1]).pvalue
        p = min(1.0, 2 * min(up, down))
        sign = math.nan if up == down else (1.0 if up < down else -1.0)
        units = "passes" if unit == "pass" else f"{unit}s"
        return Trend(sign, p, f"Page's L over {blocks.shape[0]} {units}, p={p:.2g}")
    x, y = x[keep], y[keep]
    if x.size < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return Trend(math.nan, 1.0, "no spread")
    result = stats.kendalltau(x, y)
    tau = float(result.statistic)
    return Trend(
        math.copysign(1.0, tau) if tau else math.nan,
        float(result.pvalue),
        f"Kendall τ={tau:.2f}, p={result.pvalue:.2g}",
    )


def _blocks(x: np.ndarray, y: np.ndarray, rounds: np.ndarray | None) -> np.ndarray | None:
    """Rounds x positions (in position order) of the median value per cell, keeping the
    rounds that hold every position; None where Page's test does not apply."""
    if rounds is None:
        return None
    r = pd.to_numeric(pd.Series(rounds), errors="coerce").to_numpy()
    ok = np.isfinite(r)
    if not ok.any():
        return None
    cells = pd.DataFrame({"r": r[ok], "x": x[ok], "y": y[ok]})
    table = cells.pivot_table(index="r", columns="x", values="y", aggfunc="median").dropna()
    if table.shape[1] < 3 or table.shape[0] < 2:
        return None
    return table.sort_index(axis=1).to_numpy()
