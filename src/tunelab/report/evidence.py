"""A verdict's evidence as the pages show it: one plain sentence per verdict ("index
nonclustered 106 ms, index none 170 ms: 0.62x [0.54, 0.70] over 6 rounds", each side's
median the figure every table and figure of the page gives it, ``analysis.figures``), the
level its intervals really have, and the test's detail (p, looks, alpha, the trend test,
the CPU-speed weight) folded beneath it, as ``tunelab check`` stored it
(``Verdict.to_json``)."""

from __future__ import annotations

import html
import math
from typing import Any

from tunelab.analysis.figures import level_text
from tunelab.report.labels import context_label, fmt_selectivity_percent


def fmt_value(value: float, metric: str = "") -> str:
    """A side's median: a time in ms or s to three digits, other numbers as counted."""
    if not math.isfinite(value):
        return "n/a"
    if _is_time(metric):
        return f"{value * 1e3:.3g} ms" if value < 1 else f"{value:.3g} s"
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _is_time(metric: str) -> bool:
    return metric.endswith("_s") and not metric.endswith(("rows_s", "per_s", "mb_s"))


def _rounds(test: dict[str, Any]) -> str:
    if test.get("paired"):
        n, unit = int(test.get("n") or 0), str(test.get("unit") or "round")
        return f"{n} {'passes' if unit == 'pass' else unit + 's'}"
    return f"{test.get('n_new')} and {test.get('n_old')} repetitions"


def context_sentence(c: dict[str, Any], metric: str = "") -> str:
    """One context: "cold: a 106 ms, b 170 ms: 0.62x [0.54, 0.70] over 6 rounds", or where
    the curves cross."""
    label = context_label(str(c.get("label") or ""))
    head = f"{label}: " if label else ""
    if c.get("crossing") is not None and not c.get("ratio"):
        return f"{head}the curves cross at ≈{fmt_selectivity_percent(float(c['crossing']))}"
    if not c.get("ratio"):
        return f"{head}{c.get('word', '')}".strip()
    r, lo, hi = c["ratio"]
    sides = c.get("sides") or []
    named = ", ".join(
        f"{s['label']} {fmt_value(float(s['median']), metric)}" for s in sides if s.get("label")
    )
    test = c.get("test") or {}
    over = f" over {_rounds(test)}" if test else ""
    if r == lo == hi == 0 and sides and sides[0].get("label"):  # a count, none on one side
        return f"{head}{named + ': ' if named else ''}none at {sides[0]['label']}{over}"
    return f"{head}{named + ': ' if named else ''}{r:.3g}x [{lo:.3g}, {hi:.3g}]{over}"


def levels(v: dict[str, Any]) -> list[float]:
    """The levels a verdict's intervals really have, one per distinct level (a paired
    interval's exact coverage; a file from before they were stored: the nominal level)."""
    found = [
        float(c["test"]["level"])
        for c in v.get("contexts") or []
        if c.get("ratio") and isinstance(c.get("test"), dict) and c["test"].get("level")
    ]
    if (
        not found
        and v.get("interval_level")
        and any(c.get("ratio") for c in v.get("contexts") or [{"ratio": True}])
    ):
        found = [float(v["interval_level"])]
    return sorted({round(x, 4) for x in found})


def levels_text(v: dict[str, Any]) -> str:
    """ "96.9 % interval" (or "intervals", or each level where they differ); "" without one."""
    found = levels(v)
    if not found:
        return ""
    plural = "s" if sum(1 for c in v.get("contexts") or [] if c.get("ratio")) > 1 else ""
    return " / ".join(level_text(x) for x in found) + f" interval{plural}"


def sentence(v: dict[str, Any]) -> str:
    """The verdict's evidence in one plain sentence; "" where the stored verdict has no
    contexts to say it from (then its detail stands alone)."""
    metric = str(v.get("metric") or "")
    parts = [context_sentence(c, metric) for c in v.get("contexts") or []]
    parts = [p for p in parts if p]
    if not parts:
        return ""
    level = levels_text(v)
    return "; ".join(parts) + (f" ({level})" if level else "")


def detail(v: dict[str, Any]) -> str:
    """The test behind the sentence, as stored: p, rounds, looks, alpha, the trend test, the
    CPU-speed weight, and the likely cause where it did not reproduce."""
    text = str(v.get("evidence", ""))
    cause = "; ".join(v.get("causes") or [])
    return text + (f" — likely cause: {cause}" if cause else "")


def html_block(v: dict[str, Any], css: str = "tl-evidence") -> str:
    """The sentence, then the detail folded beneath it (HTML)."""
    said = sentence(v)
    head = f'<div class="{css}">{html.escape(said)}</div>' if said else ""
    return (
        head + f'<details><summary class="{css}">test detail</summary>'
        f'<div class="{css}">{html.escape(detail(v))}</div></details>'
    )
