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
  median at every value and its shape, each step in words (``claim_trends``: "level, then
  falls");
- ``flat_then_falls`` (along ``buffer_pool``): no gain while the pool is smaller than the
  data (the table with its indexes, from the rows' ``data_bytes``), a gain once it holds
  them (``claim_trends.flat_then_falls``).

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

Here a claim is judged on a sweep's rows, context by context, look by look. The other parts
live beside it: a verdict and its words (``claim_verdict``), how a claim reads the rows
(``claim_rows``), one comparison's test, evidence and causes (``claim_evidence``), ``falls``,
``rises`` and ``flat_then_falls`` (``claim_trends``), ``crossover`` (``claim_crossover``).

What a claim may say, and its check against the sweep's points, is ``tunelab.sweep.claimspec``;
the ``tunelab check`` command is ``tunelab.run.check``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tunelab.analysis import decisions, figures, hostspeed, sequential, stats
from tunelab.analysis.claim_crossover import crossover
from tunelab.analysis.claim_evidence import (
    Outcome,
    compare_text,
    figure_text,
    n_text,
    outcome,
    ratio_test,
    side_figure,
)
from tunelab.analysis.claim_rows import column, metric_column, metric_values, select, sorted_along
from tunelab.analysis.claim_trends import falls_or_rises, flat_then_falls
from tunelab.analysis.claim_verdict import VERDICTS, Verdict, word
from tunelab.analysis.decisions import HOLDS, INCONCLUSIVE
from tunelab.store import results
from tunelab.sweep.claimspec import FLAT_THEN_FALLS, PAIR_KINDS, Claim, kv, parse, same


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
        select(rows, claim.a),
        select(rows, claim.b),
        select(other, claim.a),
        select(other, claim.b),
    ]
    values = hostspeed.values(sides, metric_column(metric)) or [
        metric_values(s, metric) for s in sides
    ]
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
            f"{n_text(t)}"
        )
    out = outcome(verdict, text, t, claim, pd.concat(sides), metric="")
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
        a, b = select(rows, claim.a), select(rows, claim.b)
        t = ratio_test(a, b, metric, alpha)
        if claim.kind == "similar":
            claimed, verdict = 0, decisions.similarity(t, alpha, m)
        else:
            claimed = decisions.LOWER if claim.kind == "lower" else decisions.HIGHER
            verdict = decisions.directional(t, claimed, alpha, m)
        sides = [
            side_figure(shown, kv(claim.a), a, metric),
            side_figure(shown, kv(claim.b), b, metric),
        ]
        text = compare_text(t, metric, kv(claim.a), kv(claim.b), sides)
        return dataclasses.replace(outcome(verdict, text, t, claim, pd.concat([a, b])), sides=sides)
    col = column(rows, claim.along or "")
    if col is None:
        return Outcome(INCONCLUSIVE, f"no column for {claim.along}")
    along = sorted_along(rows, col)
    if len(along) < 2:
        return Outcome(INCONCLUSIVE, f"fewer than two values of {claim.along}")
    if claim.kind in ("falls", "rises"):
        return falls_or_rises(claim, rows, col, along, shown)
    if claim.kind == FLAT_THEN_FALLS:
        return flat_then_falls(claim, rows, col, along, shown)
    return crossover(claim, rows, col, along, shown)


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
    rows = select(frame, claim.where)
    if rows.empty:
        return Verdict(claim, INCONCLUSIVE, "no rows match", ["no rows match"])
    context = _context_columns(rows, claim)
    groups = [((), rows)] if not context else list(rows.groupby(context, dropna=False, sort=True))
    other = select(frame, {**claim.where, **claim.than}) if claim.than else None
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
        rows = select(frame, claim.where)
        if claim.than:
            rows = pd.concat([rows, select(frame, {**claim.where, **claim.than})])
        if claim.kind in PAIR_KINDS:
            rows = pd.concat([select(rows, claim.a), select(rows, claim.b)])
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
    rows = select(figures.at_one_speed(frame), c.where)  # the figures every page quotes
    context = _context_columns(rows, c)
    label = ""
    if context:  # the first context only (e.g. cold before warm), named
        key, rows = next(iter(rows.groupby(context, dropna=False, sort=True)))
        label = _context_text(key if isinstance(key, tuple) else (key,), context)
    where = ", ".join(x for x in (kv(c.where), label) if x)
    where = f", {where}" if where else ""
    col = metric_column(c.metric)
    if c.metric == "uses_index" and col not in rows:
        rows = rows.assign(uses_index=metric_values(rows, "uses_index"))
    if c.kind == "crossover":
        est = held[0].evidence.split("crossing ", 1)[-1].split(" (", 1)[0]
        return f"{kv(c.b)} overtakes {kv(c.a)} at {c.along} {est}{where}"
    if c.kind in ("falls", "rises", FLAT_THEN_FALLS):
        along = column(rows, c.along or "")
        medians = rows.groupby(along)[col].median()
        order = sorted_along(rows, along)
        first, last = medians[order[0]], medians[order[-1]]
        return (
            f"{c.metric} {figure_text(first, c.metric)} → {figure_text(last, c.metric)} "
            f"as {c.along} goes {order[0]} → {order[-1]}{where}"
        )
    keys = set(c.a) | set(c.b)
    key_col = column(rows, next(iter(keys))) if len(keys) == 1 else None
    if key_col and rows["point_id"].nunique() == rows[key_col].nunique():
        medians = rows.groupby(key_col)[col].median().sort_values()
        name = next(iter(keys))
        order = " < ".join(f"{k} {figure_text(m, c.metric)}" for k, m in medians.items())
        return f"{name}: {order}{where}"
    a, b = select(rows, c.a)[col].median(), select(rows, c.b)[col].median()
    rel = {"lower": "<", "higher": ">", "similar": "≈"}[c.kind]
    return f"{kv(c.a)} {figure_text(a, c.metric)} {rel} {kv(c.b)} {figure_text(b, c.metric)}{where}"


def summarize(verdicts: Iterable[Verdict]) -> dict[str, int]:
    counts = dict.fromkeys(VERDICTS, 0)
    for v in verdicts:
        counts[v.verdict] += 1
    return counts
