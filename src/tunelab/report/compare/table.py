"""The table of `tunelab compare`, per sweep, as a CI job reads it: point | old median ±
interval | new median ± interval | change beyond its block's shift | q | could have detected
| verdict; as text (stdout), Markdown (a job summary) and JSON (a file a machine reads).

A row per point and metric that decides: its time (its throughput where it has no time: the
two are one hypothesis) and its reads from the OS; a point too short, incomparable or with
too few repetitions has one row saying so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as sst

from tunelab.analysis import change
from tunelab.report.compare.changes import (
    BETTER,
    HOLM,
    RANK,
    TIMED,
    TOO_FEW,
    TOO_SHORT,
    WORSE,
    Comparison,
    MetricChange,
    PointComparison,
    SweepComparison,
)
from tunelab.report.compare.text import (
    VERDICT_TEXT,
    change_line,
    main_shifts,
    overall_line,
    p_text,
    pct,
    quiet_blocks_line,
    shift_line,
    summary_line,
)

FORMAT = 1
HEAD = ("point", "metric", "old", "new", "change", "q", "could have detected", "verdict")
METRIC_NAMES = {
    "elapsed_s": "time",
    "throughput_rows_s": "throughput",
    "c_physical_reads": "reads from the OS",
}
INCOMPARABLE = "incomparable"


def value_text(metric: str, value: float) -> str:
    """A median in the metric's unit: "0.41 ms", "1.23 s", "12,345 rows/s", "96 reads"."""
    if not math.isfinite(value):
        return "—"
    if metric == "elapsed_s":
        if value < 1:
            ms = 1000 * value
            return f"{ms:.3g} ms" if ms < 100 else f"{ms:.0f} ms"
        return f"{value:.3g} s"
    if metric == "throughput_rows_s":
        return f"{value:,.0f} rows/s" if value >= 100 else f"{value:.3g} rows/s"
    return f"{value:,.0f}"


def half_width(side: change.Side) -> float:
    """The half-width of a run's level's 95 % interval, as a share of the level."""
    return math.expm1(float(sst.t.ppf(0.5 + change.LEVEL / 2, side.dof)) * side.se)


def signed_pct(log_change: float) -> str:
    text = pct(log_change)
    return text if text.startswith("-") or text == "n/a" else f"+{text}"


@dataclass
class Row:
    sweep: str
    point: str
    metric: str = ""
    scaled: bool = False
    old: float = math.nan
    old_pm: float = math.nan  # half-width of its interval, share of the level
    new: float = math.nan
    new_pm: float = math.nan
    ratio: float = math.nan  # NEW / OLD of the medians
    beyond: float = math.nan  # the ratio beyond its block's shift
    low: float = math.nan
    high: float = math.nan
    p: float = math.nan
    q: float = math.nan
    detectable: float = math.nan  # as a share
    verdict: str = ""
    note: str = ""  # why it has no test: too short, too few, incomparable

    def cells(self) -> list[str]:
        if self.note:
            return [self.point, "—", "—", "—", "—", "—", "—", self.note]
        metric = METRIC_NAMES.get(self.metric, self.metric) + (" (1 CPU)" if self.scaled else "")
        return [
            self.point,
            metric,
            f"{value_text(self.metric, self.old)} ± {pct(math.log1p(self.old_pm))}",
            f"{value_text(self.metric, self.new)} ± {pct(math.log1p(self.new_pm))}",
            f"{signed_pct(math.log(self.beyond))} [{signed_pct(math.log(self.low))}, "
            f"{signed_pct(math.log(self.high))}]",
            p_text(self.q),
            f"≥ {pct(math.log1p(self.detectable))}",
            VERDICT_TEXT[self.verdict] if self.verdict else "",
        ]

    def as_dict(self) -> dict:
        out = {"sweep": self.sweep, "point": self.point}
        if self.note:
            return {**out, "verdict": self.verdict, "note": self.note}
        return {
            **out,
            "metric": self.metric,
            "one_cpu_speed": self.scaled,
            "old": {"median": _num(self.old), "interval_share": _num(self.old_pm)},
            "new": {"median": _num(self.new), "interval_share": _num(self.new_pm)},
            "ratio": _num(self.ratio),
            "beyond_shift": _num(self.beyond),
            "interval": [_num(self.low), _num(self.high)],
            "p": _num(self.p),
            "q": _num(self.q),
            "could_have_detected": _num(self.detectable),
            "verdict": self.verdict,
        }


def _num(x: float) -> float | None:
    return round(float(x), 6) if math.isfinite(x) else None


def _decides(p: PointComparison) -> list[MetricChange]:
    """The point's changes that get a row: its time (its throughput without one) and every
    metric that is not a time."""
    has_time = any(c.metric == "elapsed_s" for c in p.changes)
    return [
        c for c in p.changes if c.metric not in TIMED or c.metric == "elapsed_s" or not has_time
    ]


def change_row(sweep: str, point: str, c: MetricChange) -> Row:
    j = c.judged
    low, high = j.interval()
    moved_worse = j.estimate.direction * j.residual > 0
    return Row(
        sweep,
        point,
        c.metric,
        c.scaled,
        c.old_median,
        half_width(j.estimate.old),
        c.new_median,
        half_width(j.estimate.new),
        c.ratio,
        j.beyond,
        low,
        high,
        j.p_worse if moved_worse else j.p_better,
        j.p_adjusted,
        math.expm1(j.detectable),
        c.verdict,
    )


def short_note(seconds: float) -> str:
    return (
        f"too short to compare (timed section {1000 * seconds:.2g} ms, below "
        f"{1000 * change.MIN_SECTION_S:g} ms)"
    )


def sweep_rows(s: SweepComparison) -> list[Row]:
    rows = []
    for p in s.points:
        if p.incomparable:
            why = "; ".join(d.text() for d in p.incomparable)
            rows.append(Row(s.name, p.point, verdict=INCOMPARABLE, note=f"incomparable ({why})"))
            continue
        rows += [change_row(s.name, p.point, c) for c in _decides(p)]
        if p.short:
            rows.append(Row(s.name, p.point, verdict=TOO_SHORT, note=short_note(p.too_short)))
        elif not p.changes:
            rows.append(Row(s.name, p.point, verdict=TOO_FEW, note=VERDICT_TEXT[TOO_FEW]))
    return rows


def q_name(result: Comparison) -> str:
    return "p (Holm)" if result.procedure == HOLM else "q"


def decision_text(result: Comparison) -> str:
    """E.g. "Benjamini-Hochberg at FDR 0.05 over 160 hypotheses, flagged past 5 %"."""
    j = result.judgement
    how = (
        f"Holm at family-wise {result.level:g}"
        if result.procedure == HOLM
        else f"Benjamini-Hochberg at FDR {result.level:g}"
    )
    return (
        f"{how} over {j.hypotheses} hypotheses, a flag's change past {100 * result.min_effect:g} %"
    )


def text_table(rows: list[Row], result: Comparison) -> list[str]:
    head = list(HEAD)
    head[5] = q_name(result)
    cells = [head, *(r.cells() for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]


def text_tables(result: Comparison) -> list[str]:
    """A table per sweep, its name above it, change beyond its block's shift."""
    lines = []
    for s in result.sweeps:
        rows = sweep_rows(s)
        if rows:
            lines.append(f"{s.name} (change: NEW / OLD beyond its block's shift, 95 % interval)")
            lines += [f"  {x}" for x in text_table(rows, result)]
    return lines


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(result: Comparison, summary: str, shifts: list[str]) -> str:
    """The comparison for a job summary: the verdict, how it was decided, the flagged shifts,
    then a table per sweep."""
    worse = result.worse
    lines = [
        "## tunelab compare",
        "",
        f"**{'worse: exit 1' if worse else 'no regression: exit 0'}** · `{_md(result.old)}` → "
        f"`{_md(result.new)}` · {_md(decision_text(result))}",
        "",
        _md(summary),
        "",
    ]
    lines += [f"- {_md(x)}" for x in shifts]
    if shifts:
        lines.append("")
    head = list(HEAD)
    head[5] = q_name(result)
    for s in result.sweeps:
        rows = sweep_rows(s)
        if not rows:
            continue
        lines += [
            f"### {_md(s.name)}",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for r in rows:
            cells = [_md(c) for c in r.cells()]
            if r.verdict == "worse":
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def json_doc(result: Comparison, summary: str, shifts: list[change.Shift]) -> dict:
    """The comparison as data: the decision, the shifts, every row."""
    return {
        "format": FORMAT,
        "old": result.old,
        "new": result.new,
        "procedure": result.procedure,
        "level": result.level,
        "min_effect": result.min_effect,
        "hypotheses": result.judgement.hypotheses,
        "worse": result.worse,
        "exit": 1 if result.worse else 0,
        "summary": summary,
        "shifts": [
            {
                "engine": s.group.split(":")[0],
                "block": s.kind,
                "metric": s.metric,
                "ratio": _num(math.exp(s.shift)),
                "points": s.points,
                "p": _num(s.p_worse),
                "q": _num(s.q),
                "verdict": s.verdict,
                "host": s.host,
            }
            for s in shifts
        ],
        "sweeps": [
            {"name": s.name, "rows": [r.as_dict() for r in sweep_rows(s)]} for s in result.sweeps
        ],
    }


def text_lines(result: Comparison) -> list[str]:
    """The run-wide shifts, a table per sweep, one line per flagged change (worse first) and
    per incomparable point, then the counts."""
    engines = sorted({s.engine for s in result.sweeps})
    lines = [x for x in (overall_line(result, e) for e in engines) if x]
    lines += [
        shift_line(s) for s in main_shifts(result) if not s.kind or s.verdict == WORSE or s.host
    ]
    lines += [x for x in (quiet_blocks_line(result, e) for e in engines) if x]
    lines += text_tables(result)
    flagged = []
    for s, p, c in result.changes():
        if c.verdict in (WORSE, BETTER):
            flagged.append((RANK[c.verdict], s.name, p.point, c.metric, c))
    lines += [
        change_line(name, point, c, result)
        for *_, name, point, _, c in sorted(flagged, key=lambda t: t[:4])
    ]
    for s, p in result.points():
        if p.incomparable:
            lines.append(
                f"{s.name} {p.point}: incomparable ({'; '.join(d.text() for d in p.incomparable)})"
            )
    lines.append(summary_line(result))
    return lines


__all__ = ["json_doc", "markdown", "sweep_rows", "text_lines", "text_tables"]
