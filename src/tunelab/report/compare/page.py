"""The page of `tunelab compare`: the run-wide shifts, a table per sweep (flagged changes
first, each change beside its interval and the smallest change the point could have shown),
how the noise was modelled, and the provenance differences."""

from __future__ import annotations

import html
import math
import platform
from collections import Counter

import numpy as np
import pandas as pd

from tunelab.analysis import change, hostspeed
from tunelab.report.compare.changes import (
    BETTER,
    NOISY,
    WORSE,
    Comparison,
    PointComparison,
    SweepComparison,
)
from tunelab.report.compare.files import HTML_MARK
from tunelab.report.compare.table import decision_text, q_name, short_note
from tunelab.report.compare.text import (
    SCALED_MARK,
    VERDICT_TEXT,
    change_line,
    main_shifts,
    p_text,
    pct,
    ratio_text,
    shift_line,
    summary_line,
    times_text,
)
from tunelab.report.labels import fmt, label

PAGE_CSS = """
.tl-worse { color: #b42318; font-weight: 600; }
.tl-better { color: #1a7f37; font-weight: 600; }
.tl-muted { color: #57606a; }
.jp-RenderedHTMLCommon table.tl-table td.tl-point { white-space: normal; max-width: 22rem;
  vertical-align: top; }
.jp-RenderedHTMLCommon table.tl-table td.tl-why { white-space: normal; max-width: 26rem;
  vertical-align: top; font-size: 12px; }
"""
VERDICT_CLASS = {WORSE: "tl-worse", BETTER: "tl-better", NOISY: "tl-muted"}


def _e(value: object) -> str:
    return html.escape(value if isinstance(value, str) else fmt(value))


def _note(text: str, kind: str = "note") -> str:
    return f'<div class="tl-{kind}">{text}</div>'


def _kv(rows: list[tuple[str, str]], table_id: str) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="tl-table tl-kv" id="{table_id}"><tbody>{body}</tbody></table>'


def _point_notes(p: PointComparison) -> str:
    bits = [
        f"<b>incomparable</b> ({html.escape(d.what)}): {html.escape(d.text('→'))}"
        for d in p.incomparable
    ]
    bits += [
        f"{html.escape(c)}: {html.escape(a)} → {html.escape(b)}"
        for c, (a, b) in p.differences.items()
    ]
    if p.too_few:
        bits.append(f"too few repetitions to test: {html.escape(', '.join(p.too_few))}")
    return "<br>".join(bits)


def sweep_table(s: SweepComparison, result: Comparison, table_id: str) -> str:
    head = [
        "point",
        "metric",
        "n OLD / NEW",
        "median OLD",
        "median NEW",
        "NEW / OLD",
        "beyond its block's shift",
        f"{change.LEVEL:.0%} interval",
        "could have detected",
        f"p ({q_name(result)})",
        "verdict",
        "provenance",
    ]
    rows = []
    for p in s.points:
        notes = _point_notes(p)
        if p.incomparable or not p.changes:
            verdict_cell = (
                "incomparable"
                if p.incomparable
                else short_note(p.too_short)
                if p.short
                else "too few repetitions to tell"
            )
            cells = [
                f'<td class="tl-point">{_e(p.point)}</td>',
                *["<td>—</td>"] * 9,
                f"<td>{verdict_cell}</td>",
                f'<td class="tl-why">{notes}</td>',
            ]
            rows.append("<tr>" + "".join(cells) + "</tr>")
            continue
        span = len(p.changes)
        for i, c in enumerate(p.changes):
            j = c.judged
            low, high = j.interval()
            cls = VERDICT_CLASS.get(c.verdict, "")
            p_cell = f"{p_text(min(j.p_worse, j.p_better))} ({p_text(j.p_adjusted)})"
            cells = []
            if i == 0:
                cells.append(f'<td class="tl-point" rowspan="{span}">{_e(p.point)}</td>')
            cells += [
                f"<td>{_e(label(c.metric) + (SCALED_MARK if c.scaled else ''))}</td>",
                f"<td>{c.n_old} / {c.n_new}</td>",
                f"<td>{_e(c.old_median)}</td>",
                f"<td>{_e(c.new_median)}</td>",
                f"<td><b>{times_text(c.ratio).replace('x', '×')}</b></td>",
                f"<td>{times_text(j.beyond).replace('x', '×')}</td>",
                f"<td>[{ratio_text(low)}, {ratio_text(high)}]</td>",
                f"<td>≥ {pct(j.detectable)} ({c.source})</td>",
                f"<td>{p_cell}</td>",
                f'<td class="{cls}">{_e(VERDICT_TEXT[c.verdict])}</td>',
            ]
            if i == 0:
                cells.append(f'<td class="tl-why" rowspan="{span}">{notes}</td>')
            rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return (
        f'<div class="tl-wide"><table class="tl-table" id="{table_id}"><thead><tr>{header}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _aggregate(s: SweepComparison) -> list[tuple[str, str]]:
    seen: Counter[tuple[str, str, str, bool]] = Counter()
    for p in s.points:
        seen.update((d.column, d.old, d.new, True) for d in p.incomparable)
        seen.update((col, a, b, False) for col, (a, b) in p.differences.items())
    rows = []
    for (col, a, b, stops), n in sorted(seen.items(), key=lambda kv: (not kv[0][3], kv[0][0])):
        tag = " <b>(incomparable)</b>" if stops else ""
        rows.append(
            (
                col,
                f"{_e(a)} → {_e(b)} <span class='tl-muted'>({n} of "
                f"{len(s.points)} points)</span>{tag}",
            )
        )
    if s.one_sided:
        rows.append(("left out of matching", _e("; ".join(s.one_sided))))
    if s.only_old:
        rows.append(("points only in OLD", _e(", ".join(s.only_old))))
    if s.only_new:
        rows.append(("points only in NEW", _e(", ".join(s.only_new))))
    return rows


def method_text(result: Comparison) -> str:
    j = result.judgement
    if result.procedure == change.HOLM:
        decision = (
            f"Holm's procedure over all {j.hypotheses} hypotheses of the points (a point's "
            f"time and its throughput are one: rows over time) at {change.SHIFT_SHARE * j.level:g}"
            " keeps the chance that two runs of one commit flag any point at most that; the "
            "blocks' shifts and each engine's over all its points are tested at the other "
            f"{(1 - change.SHIFT_SHARE) * j.level:g} against how far a block moves from run to "
            f"run, so exit 1 has a family-wise false-alarm rate of {j.level:g}"
        )
    else:
        decision = (
            f"the Benjamini-Hochberg procedure at {change.SHIFT_SHARE * j.level:g} over all "
            f"{j.hypotheses} hypotheses of the points (a point's time and its throughput are "
            "one: rows over time), and over the blocks' shifts and each engine's over all its "
            f"points at the other {(1 - change.SHIFT_SHARE) * j.level:g} (each tested against "
            "how far a block moves from run to run): two runs of one commit flag anything in "
            f"at most {j.level:g} of comparisons, and when several points changed each is "
            "tested at a level that grows with how many others stand out"
        )
    decision += (
        f"; a flagged change is also past {100 * j.min_effect:g} % (the ratio beyond "
        "the shift, or the shift itself)"
    )
    return (
        "Per point and metric: the log change of the median NEW / OLD. Its uncertainty is "
        "each run's median's (from the point's values at the unit they vary at: the round, or "
        "the pass of three rounds where a server engine's rounds go in passes; never below "
        "what they give as independent repetitions), plus a between-run variance common to "
        "the engine's points (below), plus the uncertainty of its block's shift. A block is "
        "the points measured together, a sweep's points of one workload and cache state; its "
        "shift is the median change over them, which a slower host that stretch of the run "
        "gives them alike (a block of fewer than "
        f"{change.MIN_SHIFT_POINTS} points: the median change over all of the engine's "
        "points, with a block's drift from run to run as part of the noise). Each point is "
        "tested beyond the median change of its block's other points (its own value would "
        "pull the shift toward it), one-sided for worse and for better, and "
        f"{decision}. A point whose timed section is shorter than "
        f"{1000 * change.MIN_SECTION_S:g} ms is not compared for its times (too short: such "
        "sections move between two runs by far more than their rounds vary); above it the "
        "between-run SD is at least "
        f"{pct(change.SECTION_FLOOR_SD)} × √(1 ms / section). 'Could have detected' is the "
        f"change that point's test flags with probability {change.POWER:.0%} as the only "
        "change (the family's strictest level) and past the minimum effect; a point that "
        f"could not have detected {pct(math.log1p(change.NOISY))} is reported as too noisy. "
        "Points "
        "match on engine, sweep, every knob as asked, workload and its parameters, cache "
        "state asked, access mode and data set; one measured with another engine version, on "
        "another host, or whose cache state was achieved another way is incomparable. Times "
        f"and rates marked {SCALED_MARK.strip()} are compared {hostspeed.NOTE}."
    )


def between_text(result: Comparison) -> str:
    parts = []
    for group, b in sorted(result.judgement.between.items()):
        parts.append(f"{group}: SD {pct(b.sd)} ({b.source}; this comparison alone {pct(b.own_sd)})")
    text = "Between-run SD per engine and metric: " + "; ".join(parts) + "."
    if result.history_path:
        text += f" A/A history: {result.history_path} ({result.history_entries} comparison(s)"
        if result.aa:
            text += (
                f"; OLD and NEW measured commit {result.aa_commit} on one host: "
                f"{result.recorded} recorded after judging"
            )
        text += ")."
    return text


def html_page(result: Comparison) -> str:
    from tunelab.report.render import CSS

    facts = (
        f"<b>OLD</b> <code>{_e(result.old)}</code> → <b>NEW</b> <code>{_e(result.new)}</code>"
        f" · {_e(decision_text(result))}"
    )
    parts = [
        '<header class="tl-header"><h1>What changed between two runs</h1>'
        f'<p class="tl-facts">{facts}</p></header>',
        _note(_e(summary_line(result))),
    ]
    for s in main_shifts(result):
        parts.append(_note(_e(shift_line(s)), "warn" if s.verdict == WORSE else "note"))
    worse = [(s, p, c) for s, p, c in result.changes() if c.verdict == WORSE]
    if worse:
        items = "".join(
            f"<li>{_e(change_line(s.name, p.point, c, result))}</li>" for s, p, c in worse
        )
        parts.append(_note(f"<b>Worse:</b><ul>{items}</ul>", "warn"))
    incomparable = [(s, p) for s, p in result.points() if p.incomparable]
    if incomparable:
        parts.append(
            _note(
                f"<b>{len(incomparable)} point(s) not compared</b>: their "
                "provenance differs in a way that changes the times by itself.",
                "warn",
            )
        )
    parts.append(_note(_e(method_text(result))))
    parts.append(_note(_e(between_text(result))))
    parts.append("<h2>Changes per sweep</h2>")
    for i, s in enumerate(result.sweeps):
        parts.append(f"<h3>{_e(s.name)}</h3>")
        parts.append(sweep_table(s, result, f"compare-{i}"))
    parts.append("<h2>Provenance differences</h2>")
    rows = []
    if result.sweeps_only_old:
        rows.append(("sweeps only in OLD", _e(", ".join(result.sweeps_only_old))))
    if result.sweeps_only_new:
        rows.append(("sweeps only in NEW", _e(", ".join(result.sweeps_only_new))))
    if rows:
        parts.append(_kv(rows, "provenance-sweeps"))
    listed = False
    for i, s in enumerate(result.sweeps):
        rows = _aggregate(s)
        if rows:
            listed = True
            parts.append(f"<h3>{_e(s.name)}</h3>" + _kv(rows, f"provenance-{i}"))
    if not listed and not result.sweeps_only_old and not result.sweeps_only_new:
        parts.append(_note("OLD and NEW have the same provenance at every common point."))
    parts.append(
        f'<p class="tl-muted">Compared with Python {platform.python_version()}, '
        f"pandas {pd.__version__}, numpy {np.__version__}.</p>"
    )
    body = "".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"{HTML_MARK}\n<title>tunelab compare</title>\n<style>{CSS}{PAGE_CSS}</style>\n</head>\n"
        f'<body class="jp-Notebook">\n<main><div class="jp-RenderedHTMLCommon">\n{body}\n'
        "</div></main>\n</body>\n</html>\n"
    )


__all__ = ["html_page"]
