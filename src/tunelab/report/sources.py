"""The source's figures a panel draws beside this run's (``workflows/findings.yaml``): where a
crossover was reported (a vertical line at the finding's ``at``, on the selectivity axis it
speaks of), and where the compared point would sit at the source's ratio (a reference mark
at a, at b's median times the source's a/b: the source measured another engine on another
machine, so its seconds are no point of this axis, but its ratio is).

Only a finding's own figures are drawn: ``at``, ``reported_value`` (its a and b in a unit
the axis shows) or ``source_ratio``; ``explains:`` statements carry none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tunelab.analysis.claim_rows import column
from tunelab.report.data import ReportData
from tunelab.report.labels import fmt, fmt_selectivity_percent
from tunelab.sweep import claimspec, findings


@dataclass(frozen=True)
class SourceLine:
    """A value of x the source reported (a crossover's selectivity), in the rows ``where``
    selects."""

    x: float
    text: str
    where: dict[str, Any] = field(default_factory=dict)
    source: str = ""


@dataclass(frozen=True)
class SourceRatio:
    """At ``a_x``: where a would sit at the source's ratio to b (at ``b_x``) in the rows
    ``where`` selects."""

    a_x: float
    b_x: float
    ratio: float
    metric: str
    text: str
    where: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    said: str = ""  # the source's own figures, "14 s vs 8 s"


def select(frame: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    """The rows a selector names; a key the rows lack is no setting of theirs."""
    mask = pd.Series(True, index=frame.index)
    for key, value in where.items():
        col = column(frame, key)
        if col is not None:
            mask &= frame[col].map(lambda cell, v=value: claimspec.same(cell, v))
    return frame[mask]


def _findings(data: ReportData) -> list[dict[str, Any]]:
    claims, _ = claimspec.sweep_claims(data.sweep, data.sweep_file, data.engine)
    return [c for c in claims if c.get("role") == findings.FINDING]


def lines(data: ReportData, x: str) -> list[SourceLine]:
    """Each crossover finding along ``x``: the selectivity its source reported."""
    out = []
    for c in _findings(data):
        if c.get("kind") != "crossover" or c.get("source_at") is None:
            continue
        if column(data.results, str(c.get("along"))) != x:
            continue
        where = dict(c.get("where") or {})
        context = ", ".join(str(v) for v in where.values())
        at = float(c["source_at"])
        text = f"source{', ' + context if context else ''}: {fmt_selectivity_percent(at)}"
        out.append(SourceLine(at, text, where, str(c.get("source") or "")))
    return out


def _sides(c: dict[str, Any], frame: pd.DataFrame, x: str) -> tuple[float, float] | None:
    """The x values of a and b when they differ in ``x`` alone; for a trend, its last and
    first value (a trend's ratio is last over first)."""
    if c.get("kind") in claimspec.PAIR_KINDS:
        a, b = dict(c.get("a") or {}), dict(c.get("b") or {})
        differ = {k for k in a.keys() | b.keys() if not claimspec.same(a.get(k), b.get(k))}
        if len(differ) != 1 or column(frame, next(iter(differ))) != x:
            return None
        key = next(iter(differ))
        av, bv = claimspec.as_number(a[key]), claimspec.as_number(b[key])
        return None if av is None or bv is None else (av, bv)
    if c.get("kind") in ("falls", "rises") and column(frame, str(c.get("along"))) == x:
        values = pd.to_numeric(select(frame, c.get("where") or {})[x], errors="coerce").dropna()
        return (float(values.max()), float(values.min())) if values.nunique() > 1 else None
    return None


def ratios(data: ReportData, x: str, metric: str) -> list[SourceRatio]:
    """Each finding on ``metric`` with a figure of the source's a against its b, where a and b
    differ only in ``x``."""
    out = []
    for c in _findings(data):
        if c.get("metric", "elapsed_s") != metric:
            continue
        value = c.get("reported_value")
        if isinstance(value, dict):
            ratio = float(value["a"]) / float(value["b"])
            unit = str(value["unit"])
            said = f"{fmt(value['a'])} {unit} vs {fmt(value['b'])} {unit}"
        elif c.get("source_ratio") is not None:
            ratio, said = float(c["source_ratio"]), ""
        else:
            continue
        sides = _sides(c, data.results, x)
        if sides is None or not math.isfinite(ratio) or ratio <= 0:
            continue
        where = {**dict(c.get("where") or {}), **_shared(c)}
        figures = f" ({said})" if said else ""
        text = f"at the source's ratio{figures}: {ratio:.3g}× the {fmt(sides[1])} point"
        out.append(
            SourceRatio(sides[0], sides[1], ratio, metric, text, where, str(c.get("source")), said)
        )
    return out


def _shared(c: dict[str, Any]) -> dict[str, Any]:
    """The keys a and b give alike (the context both sides are in)."""
    a, b = dict(c.get("a") or {}), dict(c.get("b") or {})
    return {k: v for k, v in a.items() if k in b and claimspec.same(v, b[k])}


def expected(frame: pd.DataFrame, x: str, metric: str, mark: SourceRatio) -> float | None:
    """b's median in ``frame`` times the source's ratio; None where b has no rows."""
    rows = select(frame, mark.where)
    at_b = rows[pd.to_numeric(rows[x], errors="coerce") == mark.b_x]
    values = pd.to_numeric(at_b[metric], errors="coerce").dropna()
    if values.empty:
        return None
    return float(np.median(values)) * mark.ratio


def caption(data: ReportData, x: str, metrics: tuple[str, ...]) -> str:
    """Caption sentences for the source's figures drawn against ``x`` ("" for none)."""
    out = []
    found = lines(data, x)
    if found:
        said = "; ".join(
            f"{s.text.removeprefix('source, ').removeprefix('source: ')} ({s.source})"
            for s in found
        )
        out.append(f"Dotted lines: where the source reported the curves to cross: {said}.")
    for metric in metrics:
        for m in ratios(data, x, metric):
            figures = f" ({m.said})" if m.said else ""
            out.append(
                f"Hollow diamond: where the {fmt(m.a_x)} point would be at the source's ratio "
                f"to the {fmt(m.b_x)} point, {m.ratio:.3g}×{figures}, {m.source}; the "
                "source measured another engine on another machine, so its ratio is drawn, "
                "not its times."
            )
    return " ".join(out)
