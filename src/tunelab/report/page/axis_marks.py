"""What a figure marks on its x axis: a buffer pool's size in bytes on top and the table's
size, where index and scan cross on a selectivity axis, and the source's own figures."""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import NullLocator

from tunelab.report import marks, sources
from tunelab.report.data import ReportData
from tunelab.report.labels import fmt, fmt_bytes, unit_text
from tunelab.report.plots import SOURCE_COLOR, TEXT_BOX, hue_levels, palette_for


def _pool_axis(ax: Axes, frame: pd.DataFrame, xs: list[float]) -> None:
    """Pages below, the same pools in bytes on top (one binary unit), and the table's size."""
    sizes = marks.page_sizes(frame)
    if len(sizes) == 1:
        page = sizes[0]
        name, unit = marks.pool_unit(xs, page)
        top = ax.secondary_xaxis(
            "top", functions=(lambda p: p * page / unit, lambda b: b * unit / page)
        )
        if len(xs) <= 12:  # the same ticks as below, blank where those are
            shown = {
                round(t, 9): bool(x.get_text())
                for t, x in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)
            }
            texts = [fmt(v * page / unit) if shown.get(round(v, 9), True) else "" for v in xs]
            top.set_xticks([v * page / unit for v in xs], texts)
            top.xaxis.set_minor_locator(NullLocator())
        top.set_xlabel(f"size ({unit_text((name, unit))}), at {fmt_bytes(page)} pages")
        top.tick_params(length=3)
        top.set_gid("pool-bytes")
    _table_line(ax, frame, xs)


def _table_line(ax: Axes, frame: pd.DataFrame, xs: list[float]) -> None:
    """A dashed line at the table's size in pages (one per page size), labelled in pages and
    bytes; outside the swept range it stays at the edge, pointing where it would be."""
    sizes = marks.table_sizes(frame)
    if not sizes or not xs:
        return
    lo, hi = min(xs), max(xs)
    logx = ax.get_xscale() == "log"
    unit = marks.pool_unit(xs, max(s.page_size for s in sizes))
    for t in sizes:
        text = t.text(unit) + (f" ({fmt_bytes(t.page_size)} pages)" if len(sizes) > 1 else "")
        near = (
            (lo / 8 <= t.pages <= hi * 8)
            if logx
            else (lo - 0.5 * (hi - lo) <= t.pages <= hi + 0.5 * (hi - lo))
        )
        if near:
            ax.axvline(
                t.pages,
                color="#444444",
                ls=(0, (5, 3)),
                lw=1.1,
                zorder=2,
                gid=f"table|{t.page_size}|{t.pages}",
            )
            _line_label(ax, text, t.pages, 1.0, "#444444", dy=-4)
        else:
            right = t.pages > hi
            ax.annotate(
                f"{text} →" if right else f"← {text}",
                (1.0 if right else 0.0, 0.98),
                xycoords="axes fraction",
                ha="right" if right else "left",
                va="top",
                fontsize="x-small",
                color="#444444",
                gid=f"table|{t.page_size}|{t.pages}",
                bbox=TEXT_BOX,
            )


def _line_label(
    ax: Axes, text: str, x: float, y: float, color: str, below: bool = False, dy: float = 0
) -> None:
    """A vertical line's words, upright beside it: hanging from ``y`` (axes fraction) on its
    left, or with ``below`` standing on ``y`` on its right."""
    ax.annotate(
        text,
        (x, y),
        xycoords=("data", "axes fraction"),
        xytext=(3 if below else -3, dy),
        textcoords="offset points",
        rotation=90,
        ha="left" if below else "right",
        va="bottom" if below else "top",
        fontsize="x-small",
        color=color,
        bbox=TEXT_BOX,
        zorder=6,
    )


def mark_crossovers(ax: Axes, data: ReportData, x: str) -> list[marks.Crossover]:
    """A vertical line where each index curve crosses the scan curve (selectivity axes)."""
    if not marks.crossover_applies(data, x):
        return []
    found = marks.crossovers(data, x, log=ax.get_xscale() == "log")
    for c in found:
        who = " · ".join(t for t in (c.index, c.group) if t)
        for at in c.at:
            ax.axvline(
                at, color="#1a1a1a", ls="-.", lw=1.0, zorder=2, gid=f"crossover|{who}|{at:.6g}"
            )
            text = f"{who + ': ' if who else ''}index = scan at {marks.fmt_selectivity(at)}"
            _line_label(ax, text, at, 0.02, "#1a1a1a", below=True)
    return found


def mark_sources(ax: Axes, data: ReportData, x: str, metric: str) -> None:
    """The source's figures on the axis (``sources``): a dotted line at each crossover it
    reported, and at a point a finding compares, a hollow diamond where that point would sit
    at the source's ratio to the other (drawn in the colour of its curve)."""
    for s in sources.lines(data, x):
        ax.axvline(s.x, color=SOURCE_COLOR, ls=":", lw=1.6, zorder=2, gid=f"source|{s.x:.6g}")
        _line_label(ax, s.text, s.x, 0.98, SOURCE_COLOR)
    marks_ = sources.ratios(data, x, metric)
    if not marks_:
        return
    frame = data.results
    groups, levels = hue_levels(frame, data.hue_for(x), data.orders)
    colors = palette_for(levels)
    for m in marks_:  # its words in the legend: a text in the panel would cross the curves'
        named = False
        for level in levels:
            y = sources.expected(frame[groups == level], x, metric, m)
            if y is None:
                continue
            ax.plot(
                [m.a_x],
                [y],
                ls="none",
                marker="D",
                ms=8,
                mfc="white",
                mec=colors[level],
                mew=1.8,
                zorder=6,
                gid=f"source-ratio|{level}|{m.a_x:.6g}",
                label="_nolegend_" if named else m.text,
            )
            named = True
