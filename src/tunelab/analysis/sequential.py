"""Decide, then stop: after which rounds a sweep's claims are looked at, the alpha each look
spends, and whether measuring stops.

A sweep's ``repetitions: {min, max}`` measures at least ``min`` rounds and at most ``max``.
The claims are evaluated at a few looks (``looks``), never after every round; at look k a
claim's test uses ``look_alpha(alpha, k, looks)`` instead of the claim's alpha. The alphas
of the looks add up to the claim's alpha, so by the union bound the chance that any look
declares a difference that is not there stays at most alpha, however the looks' tests
depend on each other (they share rounds). An integer ``repetitions`` has one look, after
its last round, with the whole alpha: what a fixed number of repetitions always did.

The first look spends most of alpha (``FIRST_SHARE``): the claims' paired test is an exact
signed-rank test whose smallest two-sided p with n rounds is 2/2**n, 0.031 at six, so a
first look at six rounds must spend more than that for a large effect to stop there. The
rest is shared equally by the later looks.

``n`` is always a count of finished rounds (rows number them from 0). A claim decided at
a look keeps that verdict (``settle``): later looks only decide the claims still open.

A claim still undecided at a look whose comparison, at the spread observed, would need more
than ``FUTILITY_FACTOR`` times the budget's rounds (``claim_verdict.Verdict.needed``, 80 % power) is
not measured for any longer: more rounds up to the budget would most likely leave it
undecided (a futility stop; it only ever keeps a claim from being decided, so alpha still
holds). It ends ``inconclusive`` with the rounds it would need. The projection takes the
rounds' robust spread (``stats.repetitions_needed``), not the interval's width: at the first
look the paired interval is the whole range of six rounds' ratios, so one disturbed round
would set it, and a claim the budget decides in most runs would be given up in some. Why a
factor and not the budget itself: six rounds estimate the spread roughly (the 90 % interval
of an SD from six rounds spans 0.67 to 2.1 times the estimate, so the rounds needed may be
0.45 times the projection), and a claim projected just past the budget has a fair chance to
be decided there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
import pandas as pd

from tunelab.analysis.decisions import DECIDED

# Share of alpha the first look spends: 0.035 of 0.05, above the 0.03125 six rounds that
# all agree reach with the exact signed-rank test. The later looks share the rest.
FIRST_SHARE = 0.7
# Each look after the first comes at this many times the previous one's rounds.
GROWTH = 2
UNDECIDED = "inconclusive"
FIXED = "fixed repetitions"


# A claim is given up at a look only when it would need more than this many times the
# budget's rounds (see the module's docstring).
FUTILITY_FACTOR = 3


def futile(needed: int | None, budget: int) -> bool:
    """Whether an undecided claim that would need ``needed`` rounds is given up."""
    return needed is not None and needed > FUTILITY_FACTOR * budget


class StopDecision(NamedTuple):
    stop: bool
    reason: str


def looks(n_min: int, n_max: int) -> list[int]:
    """Round counts after which the claims are evaluated: ``n_min``, then about ``GROWTH``
    times the previous look, and ``n_max``. A last step under half the one before is merged
    into it (6..25 looks at 6, 12, 25, not 6, 12, 24, 25): a look that adds little data
    would only take alpha from the others."""
    if not 1 <= n_min <= n_max:
        raise ValueError(f"rounds {n_min}..{n_max}: need 1 <= min <= max")
    out = [n_min]
    while out[-1] < n_max:
        out.append(min(n_max, out[-1] * GROWTH))
    if len(out) >= 3 and 2 * (out[-1] - out[-2]) < out[-2] - out[-3]:
        del out[-2]
    return out


# A server engine's sweep measures its rounds in passes of this many (tunelab.measure.sweeprun):
# its looks fall on a pass's end. One: a comparison between blocks is paired by pass
# (``pairing``), and with passes of three, six to twelve rounds were two to four passes, too
# few for the signed-rank test to reach alpha at all (2 / 2**4 = 0.125): none of the
# simulated claims between blocks was ever decided (``benchmarks/verdict_error_rates.py``),
# while pairing their rounds as independent let claims at the margin hold in 7-12 % of the
# simulated sweeps at alpha 0.05.
# A pass of one round costs a block's set-up (a restart, another data directory or table)
# every round instead of every third.
PASS_ROUNDS = 1
# The passes of rows that do not record theirs (``pass``): measured when passes had three.
RECORDED_PASS_ROUNDS = 3
ROUND, PASS = "round", "pass"


def pairing(*sides: pd.DataFrame) -> tuple[list[np.ndarray | None], str]:
    """The unit each side's rows are paired by, per side, and its name (``round`` or
    ``pass``): where the measurements vary independently.

    Rows measured in ``rounds`` order, or all in one block of a ``blocked`` order (one
    server and table: ``sweeprun.block_of``), took every point of a round side by side: the
    round is the unit. Rows of a blocked order in more than one block were measured a block's
    part of a pass apart, each block's rounds of a pass back to back: what the host, the
    server's start and the table's build did in that part is shared by the pass's rounds, so
    the pass is the unit (each side's median in it; ``stats.compare_samples`` pairs them).
    Rows without a ``block`` count as more than one block, and those without a ``pass`` as
    passes of ``RECORDED_PASS_ROUNDS``. None per side for rows without rounds."""
    if not sides or any("round" not in s for s in sides):
        return [None] * len(sides), ROUND
    rounds = [pd.to_numeric(s["round"], errors="coerce").to_numpy(dtype=float) for s in sides]
    modes = {
        m
        for s in sides
        if "order_mode" in s
        for m in s["order_mode"].unique()
        if isinstance(m, str)
    }
    if modes <= {"rounds"}:
        return rounds, ROUND
    if all("block" in s for s in sides):
        blocks = {str(b) for s in sides for b in s["block"].unique()}
        if len(blocks) == 1 and all(s["block"].notna().all() for s in sides):
            return rounds, ROUND
    units = []
    for s, r in zip(sides, rounds):
        if "pass" in s:
            units.append(pd.to_numeric(s["pass"], errors="coerce").to_numpy(dtype=float))
        else:
            units.append(np.floor(r / RECORDED_PASS_ROUNDS))
    return units, PASS


def looks_for(n_min: int, n_max: int, order_mode: str = "rounds") -> list[int]:
    """``looks`` where a look can be taken: after any round, or (``blocked`` order) only
    after a pass of ``PASS_ROUNDS``, each look moved to the end of its pass (or the budget).
    Fixed by the sweep and its engine in advance, as the union bound needs."""
    found = looks(n_min, n_max)
    if order_mode != "blocked":
        return found
    return sorted({min(n_max, -(-n // PASS_ROUNDS) * PASS_ROUNDS) for n in found})


def look_alpha(alpha: float, look_index: int, looks: Sequence[int]) -> float:
    """The alpha spent at look ``look_index`` (0-based) of ``looks``: all of it with one look;
    else ``FIRST_SHARE`` of it at the first and the rest in equal parts at the later ones.
    The alphas of all looks add up to ``alpha``."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha}: need 0 < alpha < 1")
    if not 0 <= look_index < len(looks):
        raise ValueError(f"look {look_index}: there are {len(looks)} looks")
    if len(looks) == 1:
        return alpha
    if look_index == 0:
        return alpha * FIRST_SHARE
    return alpha * (1 - FIRST_SHARE) / (len(looks) - 1)


def alpha_at(alpha: float, n: int, looks: Sequence[int]) -> float | None:
    """The alpha of the look after ``n`` rounds; None when no look falls there."""
    return look_alpha(alpha, list(looks).index(n), looks) if n in looks else None


def settle(earlier: Mapping[str, str], now: Mapping[str, str]) -> dict[str, str]:
    """Each claim's verdict after a look: one decided at an earlier look keeps it, the others
    take this look's."""
    return {k: earlier[k] if earlier.get(k) in DECIDED else v for k, v in now.items()}


def decide(
    verdict_names: Mapping[str, str],
    n: int,
    looks: Sequence[int],
    beyond: Mapping[str, int] | None = None,
) -> StopDecision:
    """Whether measuring stops after ``n`` rounds, given each claim's verdict so far (claim
    name -> a verdict of ``decisions.VERDICTS``; anything but ``decisions.DECIDED`` is
    undecided) and the sweep's ``looks``. It stops at the budget (the last look), or at a
    look when every claim is decided or ``beyond`` the budget: undecided, and needing more
    rounds than the budget at the spread observed (claim name -> rounds it would need).
    Between looks, nothing is evaluated."""
    if n < 0:
        raise ValueError(f"{n} rounds")
    budget = looks[-1]
    beyond = {k: v for k, v in (beyond or {}).items() if verdict_names.get(k) not in DECIDED}
    open_ = [k for k, v in verdict_names.items() if v not in DECIDED and k not in beyond]
    if len(looks) == 1:
        return StopDecision(n >= budget, FIXED)
    if n >= budget:  # every claim still undecided, given up or not, is named
        undecided = [k for k, v in verdict_names.items() if v not in DECIDED]
        if not undecided:
            return StopDecision(
                True,
                f"decided at round {n}"
                if verdict_names
                else f"budget of {budget} rounds reached (no claims)",
            )
        return StopDecision(
            True, f"budget of {budget} rounds reached (claims undecided: {', '.join(undecided)})"
        )
    if n not in looks:
        upcoming = min(x for x in looks if x > n)
        return StopDecision(False, f"next look at round {upcoming}")
    if not verdict_names:
        return StopDecision(True, f"no claims to decide: minimum of {looks[0]} rounds")
    if not open_ and beyond:
        needs = ", ".join(f"{k} (~{v})" for k, v in beyond.items())
        why = f"would need more rounds than the budget of {budget}: {needs}"
        return StopDecision(True, f"stopped at round {n}: every other claim decided; these {why}")
    if not open_:
        return StopDecision(True, f"decided at round {n}")
    return StopDecision(False, f"claims undecided at round {n}: {', '.join(open_)}")


def rounds_needed(sd_log_ratio: float, effect: float, alpha: float, power: float = 0.8) -> int:
    """Rounds a paired comparison needs to tell a ratio of ``1 + effect`` from 1 with a
    two-sided test at ``alpha`` and the given power, when the per-round log ratios spread
    with ``sd_log_ratio``: the normal approximation ((z(1-alpha/2) + z(power)) sd /
    log(1 + effect))², at least two. The signed-rank test needs about 5 % more."""
    if sd_log_ratio < 0 or effect <= 0:
        raise ValueError(f"sd {sd_log_ratio}, effect {effect}: need sd >= 0 and effect > 0")
    z = NormalDist().inv_cdf
    n = ((z(1 - alpha / 2) + z(power)) * sd_log_ratio / math.log1p(effect)) ** 2
    return max(2, math.ceil(n))
