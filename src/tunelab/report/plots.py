"""Seaborn figures of a measured metric versus one swept dimension.

Every panel shows the same three things: the median per point (line, or marker for
categories), its order-statistic interval (band, or error bar), and every raw repetition as a
dot, jittered with a fixed seed so two renders draw the same pixels. Other varying dimensions
(index type, cache state, workload) are colours from one colour-blind-safe palette.

Figures are plain ``matplotlib.figure.Figure`` objects (no pyplot state), exported as PNG
without the software/version metadata, and embedded as data URIs.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.path import Path
from matplotlib.ticker import (
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
    PercentFormatter,
)

from tunelab.analysis import stats
from tunelab.report import checks, marks, sources
from tunelab.report.data import ReportData, order_key
from tunelab.report.labels import fmt, fmt_bytes, is_ratio, label, unit_text

PALETTE = "colorblind"
DPI = 144
CSS_DPI = 96  # the browser's px per inch: images are shown at 1/1.5 of their pixels (sharp)
SEED = 0
PAGE_W = 11.2  # inches: the page's content width at the browser's 96 px per inch
PANEL_W, PANEL_H = 5.6, 3.5  # inches; several panels share PAGE_W
BAND_MAX = 3  # up to this many lines per panel get shaded bands, more get error bars
MARKERS = ("o", "s", "D", "^", "v", "P", "X")
LINESTYLES = ("-", "--", ":", "-.")
LOG_SPAN = 10.0  # an axis whose positive values span more than this ratio is drawn in log scale
# Columns stored as fractions that the findings state in percent: drawn in % on every axis.
PERCENT_COLUMNS = {marks.SELECTIVITY: "selectivity (% of rows)"}
PERFORMANCE = ("elapsed_s", "throughput_rows_s")
IO_COUNTS = (
    "c_physical_reads",
    "physical_reads_per_s",
    "os_read_mb_s",
    "c_dev_read_requests",
    "dev_read_mb_s",
)
HIT_RATIOS = {"hit_ratio_app": "application", "hit_ratio_sys": "system"}
CLOCKS = {"elapsed_s": "response time (client clock)", "engine_elapsed_s": "engine time"}
FIRST_REST = {"q_first_s": "first query", "q_rest_median_s": "later queries (median)"}
PERCENTILES = {"q_p50_s": "p50", "q_p95_s": "p95", "q_p99_s": "p99"}
MISMATCH_COLOR = "#1a1a1a"
TEXT_BOX = {"boxstyle": "square,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
MISMATCH_LABEL = "plan ≠ what the index knob built"


def _crossed_ring() -> Path:
    """A hollow ring with a thin cross: it sits on a median without hiding its colour."""
    d = math.sqrt(0.5)
    cross = Path([(-d, -d), (d, d), (-d, d), (d, -d)], [Path.MOVETO, Path.LINETO] * 2)
    return Path.make_compound_path(Path.unit_circle(), cross)


MISMATCH_MARKER = _crossed_ring()


@contextmanager
def style() -> Iterator[None]:
    rc = {
        **sns.axes_style("whitegrid"),
        **sns.plotting_context("notebook", font_scale=0.85),
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.titleweight": "bold",
        "axes.titlesize": 11,
        "grid.color": "#e6e6e6",
        "font.family": "DejaVu Sans",
        "svg.hashsalt": "tunelab",
    }
    with mpl.rc_context(rc):
        yield


def palette_for(levels: Sequence[str]) -> dict[str, Any]:
    colors = sns.color_palette(PALETTE, n_colors=max(len(levels), 1))
    if len(levels) > len(sns.color_palette(PALETTE)):
        colors = sns.color_palette("husl", n_colors=len(levels))
    return dict(zip(levels, colors, strict=False))


def wants_log(values: Sequence[float] | np.ndarray) -> bool:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return v.size > 1 and bool((v > 0).all()) and v.max() / v.min() > LOG_SPAN


def x_scale(values: Sequence[float] | np.ndarray) -> str:
    """ "log" where the values span more than LOG_SPAN; "symlog" where they would but for a
    zero among them (read-ahead 0, 16, ..., 1024 KiB: linear would squeeze 16 onto 0);
    else "linear"."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if wants_log(v):
        return "log"
    positive = v[v > 0]
    if (v >= 0).all() and (v == 0).any() and positive.size > 1 and wants_log(positive):
        return "symlog"
    return "linear"


def set_x_scale(ax: Axes, values: Sequence[float] | np.ndarray) -> str:
    """Set ``ax``'s x scale by ``x_scale``; symlog is linear below its smallest positive
    value, so a zero sits one decade left of it."""
    scale = x_scale(values)
    if scale == "log":
        ax.set_xscale("log")
    elif scale == "symlog":
        v = np.asarray(values, dtype=float)
        ax.set_xscale("symlog", linthresh=float(v[v > 0].min()), linscale=0.5)
    return scale


def value_text(column: str, value: Any) -> str:
    """A value as an axis or a legend shows it: a selectivity in % (as the findings say it)."""
    if (
        column in PERCENT_COLUMNS
        and isinstance(value, int | float | np.number)
        and not (isinstance(value, bool))
    ):
        return f"{float(value) * 100:.4g} %"
    return fmt(value)


def axis_label(column: str, engine: str | None = None) -> str:
    return PERCENT_COLUMNS.get(column) or label(column, engine)


def is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def hue_levels(
    frame: pd.DataFrame, cols: Sequence[str], orders: dict[str, list[Any]] | None = None
) -> tuple[pd.Series, list[str]]:
    """A label per row for the combination of ``cols`` and the labels in display order."""
    cols = [c for c in cols if c in frame]
    if not cols:
        return pd.Series("", index=frame.index), [""]
    combos = frame[cols].drop_duplicates()
    keys = [order_key(orders or {}, c) for c in cols]
    tuples = sorted(
        (tuple(row) for row in combos.itertuples(index=False)),
        key=lambda t: tuple(k(v) for k, v in zip(keys, t, strict=True)),
    )

    def text(t: tuple) -> str:
        return " · ".join(value_text(c, v) for c, v in zip(cols, t, strict=True))

    labels = frame[cols].apply(lambda r: text(tuple(r)), axis=1)
    return labels, list(dict.fromkeys(text(t) for t in tuples))


def hue_title(cols: Sequence[str], engine: str | None = None) -> str:
    return " · ".join(axis_label(c, engine) for c in cols)


def draw_metric(
    ax: Axes,
    frame: pd.DataFrame,
    x: str,
    metric: str,
    hue: Sequence[str] = (),
    *,
    style_col: str | None = None,
    engine: str | None = None,
    orders: dict[str, list[Any]] | None = None,
    seed: int = SEED,
) -> pd.DataFrame:
    """Draw medians, intervals and raw repetitions of ``metric`` versus ``x`` on ``ax``.

    Returns the plotted summary (one row per x value, hue and style label). Each median line
    carries the gid ``median|<hue>|<style>`` so tests and tools can read back what was drawn.
    """
    orders = orders or {}
    d = frame[frame[x].notna() & pd.to_numeric(frame[metric], errors="coerce").notna()].copy()
    d[metric] = pd.to_numeric(d[metric])
    if d.empty:
        ax.text(0.5, 0.5, "no measurements", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel(axis_label(x, engine))
        return stats.summarize(d, [x], metric)
    d["_hue"], levels = hue_levels(d, hue, orders)
    d["_style"] = d[style_col].astype(str) if style_col else ""
    styles = list(dict.fromkeys(d["_style"]))
    summary = stats.summarize(d, [x, "_hue", "_style"], metric)
    colors = palette_for(levels)
    line_of = {s: LINESTYLES[i % len(LINESTYLES)] for i, s in enumerate(styles)}
    marker_of = {s: MARKERS[i % len(MARKERS)] for i, s in enumerate(styles)}
    combos = [
        (h, s) for h in levels for s in styles if ((d["_hue"] == h) & (d["_style"] == s)).any()
    ]
    # Points whose plan differs from what the index knob built get a ringed cross on their
    # median, so a curve labelled "index" is never read as index access when it was not.
    bad = d.loc[checks.row_mismatch(d), [x, "_hue", "_style"]]
    flagged = set(bad.itertuples(index=False, name=None))
    ringed: list[tuple[float, float]] = []

    def mark(xvalues: Sequence[Any], px: np.ndarray, med: np.ndarray, h: str, s: str) -> None:
        for value, at, m in zip(xvalues, px, med, strict=True):
            if (value, h, s) in flagged and np.isfinite(m):
                ringed.append((float(at), float(m)))

    rng = np.random.default_rng(seed)
    numeric = is_numeric(d[x])
    xs = sorted(pd.unique(d[x]), key=order_key(orders, x))

    def legend_text(h: str, s: str) -> str:
        # Colours name the hue levels; line styles get their own entries (added below).
        return h if len(levels) > 1 and s == styles[0] else "_nolegend_"

    if numeric:
        set_x_scale(ax, [float(v) for v in xs])
        # Offsets (dodge, jitter) are taken on the drawn scale, so log and symlog alike.
        forward = ax.xaxis.get_transform()
        backward = forward.inverted()
        drawn_at = forward.transform(np.asarray(xs, float))
        span = float(drawn_at.max() - drawn_at.min()) or 1.0
        # Few lines: shaded bands. Many: error bars dodged sideways so they stay apart.
        banded = len(combos) <= BAND_MAX
        slot = 0.0 if banded else 0.05 * span / len(combos)
        offset = {c: (i - (len(combos) - 1) / 2) * slot for i, c in enumerate(combos)}

        def shifted(values: np.ndarray, by: np.ndarray | float) -> np.ndarray:
            return backward.transform(forward.transform(values) + by)

        for h, s in combos:
            g = summary[(summary["_hue"] == h) & (summary["_style"] == s)].sort_values(x)
            gx = shifted(g[x].to_numpy(float), offset[(h, s)])
            med, low, high = (g[c].to_numpy(float) for c in ("median", "low", "high"))
            if banded:
                ax.fill_between(gx, low, high, color=colors[h], alpha=0.16, lw=0)
            else:
                ax.errorbar(
                    gx,
                    med,
                    yerr=[med - low, high - med],
                    color=colors[h],
                    ls="none",
                    capsize=2.5,
                    lw=1.1,
                    alpha=0.8,
                    zorder=4,
                )
            ax.plot(
                gx,
                med,
                color=colors[h],
                ls=line_of[s],
                marker=marker_of[s],
                ms=5,
                lw=1.8,
                label=legend_text(h, s),
                gid=f"median|{h}|{s}",
                zorder=5,
            )
            mark(list(g[x]), gx, med, h, s)
        shift = np.array([offset[(h, s)] for h, s in zip(d["_hue"], d["_style"], strict=True)])
        spread = 0.3 * slot if slot else 0.012 * span
        raw_x = shifted(d[x].to_numpy(float), shift + rng.uniform(-1.0, 1.0, len(d)) * spread)
        if len(xs) <= 12:
            ticks = _thin_labels(list(drawn_at), [value_text(x, v) for v in xs])
            ax.set_xticks([float(v) for v in xs], ticks)
            ax.xaxis.set_minor_locator(NullLocator())
            if len(xs) > 6 or (len(xs) > 3 and max(map(len, ticks)) > 4):
                _slant(ax)
    else:
        position = {v: i for i, v in enumerate(xs)}
        width = 0.72
        slot = width / max(len(combos), 1)
        offset = {c: (i - (len(combos) - 1) / 2) * slot for i, c in enumerate(combos)}
        for h, s in combos:
            g = summary[(summary["_hue"] == h) & (summary["_style"] == s)]
            px = g[x].map(position).to_numpy(float) + offset[(h, s)]
            med = g["median"].to_numpy(float)
            err = [med - g["low"].to_numpy(float), g["high"].to_numpy(float) - med]
            bars = ax.errorbar(
                px,
                med,
                yerr=err,
                color=colors[h],
                marker=marker_of[s],
                ms=6,
                ls="none",
                capsize=4,
                lw=1.6,
                label=legend_text(h, s),
                zorder=4,
            )
            bars.lines[0].set_gid(f"median|{h}|{s}")
            mark(list(g[x]), px, med, h, s)
        base = d[x].map(position).to_numpy(float)
        shift = np.array([offset[(h, s)] for h, s in zip(d["_hue"], d["_style"], strict=True)])
        raw_x = base + shift + rng.uniform(-1.0, 1.0, len(d)) * 0.28 * slot
        ticks = [value_text(x, v) for v in xs]
        ax.set_xticks(range(len(xs)), ticks)
        if sum(map(len, ticks)) > 28:  # long category names would run into each other
            _slant(ax)
        ax.set_xlim(-0.6, len(xs) - 0.4)
        ax.grid(False, axis="x")

    if len(styles) > 1:  # legend-only entries for the line styles (no data, no autoscale)
        for st in styles:
            ax.plot([], [], color="#555555", ls=line_of[st], marker=marker_of[st], label=st)
    if ringed:
        mx, my = zip(*sorted(ringed))
        ax.plot(
            mx,
            my,
            ls="none",
            marker=MISMATCH_MARKER,
            ms=15,
            mfc="none",
            mec=MISMATCH_COLOR,
            mew=1.3,
            label=MISMATCH_LABEL,
            gid="mismatch",
            zorder=7,
        )
    sns.scatterplot(
        x=np.asarray(raw_x, float),
        y=d[metric].to_numpy(float),
        hue=d["_hue"].to_numpy(),
        hue_order=levels,
        palette=colors,
        ax=ax,
        legend=False,
        s=16,
        alpha=0.55,
        lw=0,
        zorder=3,
    )
    _finish_y(ax, d[metric].to_numpy(float), metric)
    ax.set_xlabel(axis_label(x, engine))
    ax.set_ylabel(label(metric, engine) + (" (%)" if is_ratio(metric) else ""))
    if numeric and marks.is_pool(x):
        _pool_axis(ax, d, [float(v) for v in xs])
    return summary


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


SOURCE_COLOR = "#7a4a00"


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


def _slant(ax: Axes, degrees: float = 30) -> None:
    """Tilt x tick labels, anchored at their right end so each still points at its tick."""
    for text in ax.get_xticklabels():
        text.set_rotation(degrees)
        text.set_horizontalalignment("right")
        text.set_rotation_mode("anchor")


def _thin_labels(drawn_at: list[float], texts: list[str], gap: float = 0.09) -> list[str]:
    """Blank the labels of ticks closer than ``gap`` (axis fraction) to a labelled one, so
    0.2, 0.35, 0.5 on a log axis do not print over each other; the last value keeps its.
    ``drawn_at``: the ticks on the axis's drawn scale (log10 of them on a log axis)."""
    pos = np.asarray(drawn_at, float)
    span = (pos.max() - pos.min()) or 1.0
    frac = (pos - pos.min()) / span
    keep = [False] * len(pos)
    last = -1.0
    for i in range(len(pos)):
        if frac[i] - last >= gap:
            keep[i], last = True, frac[i]
    if len(pos) > 1 and not keep[-1]:  # label the last value instead of its neighbour
        keep[max(i for i in range(len(pos) - 1) if keep[i])] = len(pos) == 2
        keep[-1] = True
    return [t if k else "" for t, k in zip(texts, keep, strict=True)]


def short_number(value: float, _pos: object = None) -> str:
    """Tick labels: 250k, 1.5M; small numbers as they are."""
    a = abs(value)
    if a >= 1e6:
        return f"{value / 1e6:g}M"
    if a >= 1e4:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def _finish_y(ax: Axes, values: np.ndarray, metric: str) -> None:
    if is_ratio(metric):
        # 0 to 100 % at least, never clipped: a system hit ratio goes negative when prefetch
        # reads pages the application never asks for, and that is worth seeing.
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
        finite = values[np.isfinite(values)]
        low = min(0.0, float(finite.min())) if finite.size else 0.0
        high = max(1.0, float(finite.max())) if finite.size else 1.0
        pad = 0.03 * (high - low)
        ax.set_ylim(low - pad, high + pad)
        ax.axhline(0.0, color="#555555", lw=0.9, zorder=2, gid="zero")
        return
    if wants_log(values):
        ax.set_yscale("log")
        if values.max() / values.min() < 1000:  # few decades: 1-2-5 ticks, not one or two
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(short_number))
        ax.yaxis.set_minor_formatter(NullFormatter())
        return
    if values.size and values.min() >= 0:
        top = ax.get_ylim()[1] if values.max() > 0 else 1.0
        ax.set_ylim(0, top)
    if metric.startswith("c_"):  # counters count whole pages or bytes
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(FuncFormatter(short_number))


def _title(metric: str, name: str | None = None) -> str:
    text = (name or label(metric)).split(" (")[0]
    return text[:1].upper() + text[1:]


def _figure(panels: int, ncols: int | None = None) -> tuple[Figure, list[Axes]]:
    ncols = ncols or min(panels, 3)
    nrows = math.ceil(panels / ncols)
    width = min(PANEL_W * ncols, PAGE_W)
    fig = Figure(figsize=(width, PANEL_H * nrows + 0.5), layout="constrained")
    axes = list(np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel())
    for extra in axes[panels:]:
        extra.set_visible(False)
    return fig, axes[:panels]


def _legend(fig: Figure, axes: Sequence[Axes], title: str) -> None:
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            if not text.startswith("_"):
                seen.setdefault(text, handle)
    if seen:
        fig.legend(
            list(seen.values()),
            list(seen),
            title=title or None,
            loc="outside lower center",
            ncol=_legend_columns(fig, list(seen)),
            frameon=False,
        )


def _legend_columns(fig: Figure, texts: Sequence[str]) -> int:
    """As many columns as fit the figure's width with its longest entry (about 0.07 inch a
    character at the legend's font size, 0.5 inch for the handle and the gap)."""
    fits = int(fig.get_figwidth() // (0.5 + 0.07 * max(map(len, texts))))
    return max(1, min(len(texts), 4 if len(texts) <= 8 else 6, fits))


def knob_figure(data: ReportData, x: str) -> Figure:
    """Response time and throughput versus one swept dimension."""
    metrics = [m for m in PERFORMANCE if _has(data.results, m)]
    hue = data.hue_for(x)
    with style():
        fig, axes = _figure(len(metrics), ncols=len(metrics))
        for ax, metric in zip(axes, metrics, strict=True):
            draw_metric(ax, data.results, x, metric, hue, engine=data.engine, orders=data.orders)
            mark_crossovers(ax, data, x)
            mark_sources(ax, data, x, metric)
            ax.set_title(_title(metric))
        _legend(fig, axes, hue_title(hue, data.engine))
    return fig


def io_figure(data: ReportData, x: str, names: dict[str, str] | None = None) -> Figure | None:
    """The engine's reads, their rate per second, the rates of what reached the device and
    the hit ratios side by side, so that a hit ratio is never read alone; None when the
    engine gave none of these counters. ``names``: labels of columns whose words depend on
    the rows (``reads.words``)."""
    names = names or {}
    frame = data.results
    metrics = [m for m in IO_COUNTS if _has(frame, m)]
    ratios = [c for c in HIT_RATIOS if _has(frame, c)]
    if not metrics and not ratios:
        return None
    hue = data.hue_for(x)
    with style():
        fig, axes = _figure(len(metrics) + bool(ratios))
        for ax, metric in zip(axes, metrics, strict=False):
            draw_metric(ax, frame, x, metric, hue, engine=data.engine, orders=data.orders)
            ax.set_title(_title(metric, names.get(metric)))
            if metric in names:
                ax.set_ylabel(names[metric])
        if ratios:
            ax = axes[len(metrics)]
            long = frame.melt(
                id_vars=[c for c in frame.columns if c not in ratios],
                value_vars=ratios,
                var_name="ratio",
                value_name="hit_ratio",
            )
            long["ratio"] = long["ratio"].map(HIT_RATIOS)
            style_col = "ratio" if len(ratios) > 1 else None
            draw_metric(
                ax,
                long,
                x,
                "hit_ratio",
                hue,
                style_col=style_col,
                engine=data.engine,
                orders=data.orders,
            )
            ax.set_title("Hit ratio" + (": application vs system" if style_col else ""))
        _legend(fig, axes, hue_title(hue, data.engine))
    return fig


def overview_figure(data: ReportData, metric: str = "elapsed_s") -> Figure:
    """One Axes per swept dimension, all for the same metric."""
    with style():
        fig, axes = _figure(len(data.dims))
        for ax, x in zip(axes, data.dims, strict=True):
            draw_metric(
                ax,
                data.results,
                x,
                metric,
                data.hue_for(x),
                engine=data.engine,
                orders=data.orders,
            )
            if metric in PERFORMANCE:
                mark_crossovers(ax, data, x)
                mark_sources(ax, data, x, metric)
            ax.set_title(f"{_title(metric)} vs {label(x, data.engine).split(' (')[0]}")
            if ax.get_legend_handles_labels()[1]:  # beside the panel: inside, it would
                # cover a crossover's words or a curve, wherever the data put them
                ax.legend(
                    title=hue_title(data.hue_for(x), data.engine),
                    fontsize="small",
                    loc="upper left",
                    bbox_to_anchor=(1.01, 1.0),
                    borderaxespad=0.0,
                )
    return fig


def device_figure(data: ReportData) -> Figure:
    """Achieved MB/s as a fraction of the device's limit, one Axes per swept dimension."""
    dims = data.dims or data.point_columns[:1]
    with style():
        fig, axes = _figure(max(len(dims), 1))
        for ax, x in zip(axes, dims, strict=False):
            hue = data.hue_for(x)
            draw_metric(
                ax, data.results, x, "device_fraction", hue, engine=data.engine, orders=data.orders
            )
            ax.axhline(1.0, color="#555555", ls="--", lw=1.0, zorder=2)
            ax.annotate(
                "device limit",
                (1.0, 1.0),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="bottom",
                fontsize="small",
                color="#555555",
            )
            ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
            ax.set_ylim(0, max(ax.get_ylim()[1], 1.1))
            ax.set_title(f"Achieved vs device, by {label(x, data.engine).split(' (')[0]}")
            if len(dims) > 1 and ax.get_legend_handles_labels()[1]:
                ax.legend(title=hue_title(hue, data.engine), fontsize="small")
        if len(dims) == 1:
            _legend(fig, axes, hue_title(data.hue_for(dims[0]), data.engine))
    return fig


def _long(frame: pd.DataFrame, columns: dict[str, str], value: str, var: str) -> pd.DataFrame:
    """Several measured columns as one (``value``), named in ``var`` by ``columns``."""
    present = [c for c in columns if _has(frame, c)]
    long = frame.melt(
        id_vars=[c for c in frame.columns if c not in present],
        value_vars=present,
        var_name=var,
        value_name=value,
    )
    long[var] = long[var].map(columns)
    return long


def engine_time_figure(data: ReportData, x: str) -> Figure | None:
    """The client's clock beside the engine's own time, and the share between them, versus
    one swept dimension; None when the rows carry no engine time."""
    frame = data.results.copy()
    if not checks.engine_time_recorded(frame):
        return None
    frame["client_share"] = checks.row_client_share(frame)
    hue = data.hue_for(x)
    with style():
        fig, axes = _figure(2)
        long = _long(frame, CLOCKS, "time_s", "clock")
        draw_metric(
            axes[0],
            long,
            x,
            "time_s",
            hue,
            style_col="clock",
            engine=data.engine,
            orders=data.orders,
        )
        axes[0].set_title("Response time and the engine's time")
        draw_metric(axes[1], frame, x, "client_share", hue, engine=data.engine, orders=data.orders)
        axes[1].axhline(checks.CLIENT_BOUND, color="#555555", ls="--", lw=1.0, zorder=2)
        axes[1].annotate(
            "client-bound above",
            (1.0, checks.CLIENT_BOUND),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize="small",
            color="#555555",
        )
        axes[1].set_title("Client share of the response time")
        axes[1].set_ylabel("client share (%)")  # the title says of what: the long label was cut
        _legend(fig, axes, hue_title(hue, data.engine))
    return fig


def _query_x(data: ReportData, frame: pd.DataFrame) -> tuple[str, list[str]] | None:
    """x and hue for a figure of a subset of the points (cold ones, lookups): the point
    columns that still vary there; the workload when none does."""
    varying = [c for c in data.point_columns if c in frame and frame[c].nunique(dropna=False) > 1]
    if varying:
        return varying[0], varying[1:]
    return ("workload", []) if "workload" in frame else None


def _query_figure(
    data: ReportData, rows: pd.DataFrame, columns: dict[str, str], var: str, title: str
) -> Figure | None:
    axes_of = _query_x(data, rows)
    if rows.empty or axes_of is None:
        return None
    x, hue = axes_of
    ms = rows.copy()
    for c in columns:  # per-statement times read better in milliseconds
        ms[c] = pd.to_numeric(ms[c], errors="coerce") * 1e3
    long = _long(ms, columns, "time_ms", var)
    with style():
        fig, (ax,) = _figure(1)
        fig.set_size_inches(PANEL_W * 1.25, PANEL_H + 0.5)
        draw_metric(
            ax, long, x, "time_ms", hue, style_col=var, engine=data.engine, orders=data.orders
        )
        ax.set_title(title)
        _legend(fig, [ax], hue_title(hue, data.engine))
    return fig


def first_query_figure(data: ReportData) -> Figure | None:
    """Cold repetitions of several statements: the first statement apart from the others."""
    rows = checks.first_query_rows(data.results)
    return _query_figure(data, rows, FIRST_REST, "query", "Cold: first query vs the later ones")


def lookup_figure(data: ReportData) -> Figure | None:
    """Point lookups: each repetition's p50, p95 and p99 of the single lookups."""
    rows = checks.lookup_rows(data.results)
    return _query_figure(data, rows, PERCENTILES, "percentile", "Lookup time percentiles")


LOCK = "knob_lock_granularity"
LOCK_METRIC = "throughput_rows_s"
WRITES = ("insert", "update")


def lock_ratios(data: ReportData) -> pd.DataFrame | None:
    """Per write workload and thread count (and any other point column that varies), the
    ratio of median throughput with row locks to that with a table lock (the median ratio
    per round where the rows carry rounds), with its bootstrap interval and p
    (``lock_test``); None unless the rows have both lock kinds.
    Columns: the keys, then table_median, row_median, ratio, low, high, p, n_table, n_row,
    method, level (the interval's real level)."""
    frame = data.results
    if LOCK not in frame or not _has(frame, LOCK_METRIC):
        return None
    if "workload" in frame:
        frame = frame[frame["workload"].astype(str).isin(WRITES)]
    lock = frame[LOCK].astype(str).str.lower()
    if not {"row", "table"} <= set(lock):
        return None
    wanted = ["workload", "wl_threads", *data.point_columns]
    keys = [c for c in dict.fromkeys(wanted) if c in frame and c != LOCK]
    groups = frame.groupby(keys, dropna=False, sort=False) if keys else [((), frame)]
    rows = []
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        table = group[lock[group.index] == "table"]
        row = group[lock[group.index] == "row"]
        if not (_has(table, LOCK_METRIC) and _has(row, LOCK_METRIC)):
            continue
        test = lock_test(table, row)
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "table_median": test.old_median,
                "row_median": test.new_median,
                "ratio": test.ratio,
                "low": test.low,
                "high": test.high,
                "p": test.p,
                "n_table": test.n_old,
                "n_row": test.n_new,
                "method": test.method,
                "level": test.real_level,
            }
        )
    if not rows:
        return None
    out = pd.DataFrame(rows)
    if keys:
        order = {c: order_key(data.orders, c) for c in keys}
        out = out.sort_values(keys, key=lambda s: s.map(order[s.name]), kind="stable")
    return out.reset_index(drop=True)


def lock_test(table: pd.DataFrame, row: pd.DataFrame) -> stats.RatioTest:
    """Row-lock rows against table-lock rows, as a claim on the same points compares them:
    paired by round where the rows carry one, seeded by the compared points (so the
    interval depends on no other point, and a claim on these points prints the same)."""
    ids = [r.get("point_id", []) for r in (table, row)]
    rounds = [r.get("round", None) for r in (table, row)]
    return stats.compare_samples(
        old=table[LOCK_METRIC],
        new=row[LOCK_METRIC],
        key=stats.comparison_key(LOCK_METRIC, *ids),
        old_rounds=rounds[0],
        new_rounds=rounds[1],
    )


def ratio_keys(ratios: pd.DataFrame) -> list[str]:
    """The columns of ``lock_ratios`` that name a point (those before the figures)."""
    return list(ratios.columns[: ratios.columns.get_loc("table_median")])


def lock_figure(data: ReportData, ratios: pd.DataFrame | None = None) -> Figure | None:
    """Row-lock over table-lock throughput per thread count (x) and workload (colour), with
    the ratio's bootstrap interval and a line at 1; None where ``lock_ratios`` is None.
    Each ratio's marker line carries the gid ``ratio|<hue>``, its bars ``interval|<hue>``."""
    ratios = lock_ratios(data) if ratios is None else ratios
    if ratios is None or ratios.empty:
        return None
    keys = ratio_keys(ratios)
    x = next((c for c in ("wl_threads", "workload") if c in keys), None)
    hue = [c for c in keys if c != x]
    d = ratios.copy()
    d["_hue"], levels = hue_levels(d, hue, data.orders)
    xs = sorted(pd.unique(d[x]), key=order_key(data.orders, x)) if x else [""]
    position = {v: i for i, v in enumerate(xs)}
    colors = palette_for(levels)
    slot = 0.6 / max(len(levels), 1)
    with style():
        fig, (ax,) = _figure(1)
        fig.set_size_inches(PANEL_W * 1.25, PANEL_H + 0.5)
        ax.axhline(1.0, color="#555555", ls="--", lw=1.0, zorder=2, gid="parity")
        ax.annotate(
            "row = table",
            (0.0, 1.0),
            xycoords=("axes fraction", "data"),
            ha="left",
            va="bottom",
            fontsize="small",
            color="#555555",
        )
        for i, h in enumerate(levels):
            g = d[d["_hue"] == h]
            px = (g[x].map(position) if x else pd.Series(0, g.index)).to_numpy(float)
            px = px + (i - (len(levels) - 1) / 2) * slot
            ratio = g["ratio"].to_numpy(float)
            # an infinite bound (a resample whose table median was 0) draws no bar that way
            low = np.where(np.isfinite(g["low"]), g["low"], ratio)
            high = np.where(np.isfinite(g["high"]), g["high"], ratio)
            bars = ax.errorbar(
                px,
                ratio,
                yerr=[ratio - low, high - ratio],
                color=colors[h],
                marker=MARKERS[0],
                ms=6,
                ls="none",
                capsize=4,
                lw=1.6,
                label=h if len(levels) > 1 else "_nolegend_",
                zorder=4,
            )
            bars.lines[0].set_gid(f"ratio|{h}")
            bars.lines[2][0].set_gid(f"interval|{h}")
            for at, r in zip(px, ratio, strict=True):
                ax.annotate(
                    f"{r:.2f}×",
                    (at, r),
                    xytext=(6, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize="x-small",
                    bbox=TEXT_BOX,
                    zorder=6,
                )
        ax.set_xticks(range(len(xs)), [fmt(v) for v in xs])
        ax.set_xlim(-0.6, len(xs) - 0.4)
        ax.grid(False, axis="x")
        ax.set_xlabel(label(x, data.engine) if x else "")
        top = max(1.2, float(np.nanmax(np.where(np.isfinite(d["high"]), d["high"], d["ratio"]))))
        ax.set_ylim(0, top * 1.08)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}×"))
        ax.set_ylabel("throughput, row locks / table lock")
        ax.set_title("Row locks versus a table lock: throughput ratio")
        _legend(fig, [ax], hue_title(hue, data.engine))
    return fig


def plotted_ratios(ax: Axes) -> dict[str, tuple[np.ndarray, np.ndarray, list[np.ndarray]]]:
    """hue -> (x, ratio, interval segments) as ``lock_figure`` drew them."""
    points = {
        str(ln.get_gid())[6:]: ln for ln in ax.get_lines() if str(ln.get_gid()).startswith("ratio|")
    }
    bars = {
        str(c.get_gid())[9:]: c for c in ax.collections if str(c.get_gid()).startswith("interval|")
    }
    return {
        h: (
            np.asarray(ln.get_xdata(), float),
            np.asarray(ln.get_ydata(), float),
            [np.asarray(s, float) for s in bars[h].get_segments()],
        )
        for h, ln in points.items()
    }


def _has(frame: pd.DataFrame, column: str) -> bool:
    return column in frame and pd.to_numeric(frame[column], errors="coerce").notna().any()


def plotted_medians(ax: Axes) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """gid -> (x, y) of each median line drawn by ``draw_metric``."""
    out = {}
    for line in ax.get_lines():
        gid = line.get_gid()
        if gid and gid.startswith("median|"):
            out[gid] = (np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float))
    return out


def to_png(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure as a PNG of at most 256 colours: a chart has few, and its full-colour PNG
    is three to four times the size (a report's five figures were 1 MB of its page)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    # Drawn once on an Agg canvas and quantized from its pixels: `savefig` draws a figure
    # with a layout engine twice and encodes a full-colour PNG only to be decoded here (a
    # fifth of a report's three figures); the pixels are the same.
    fig.set_dpi(dpi)
    fig.set_facecolor("white")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgba = canvas.buffer_rgba()
    image = Image.frombuffer("RGBA", canvas.get_width_height(), rgba, "raw", "RGBA", 0, 1)
    image = image.convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, "PNG", optimize=True)
    return out.getvalue()


def figure_html(fig: Figure, alt: str, caption: str = "") -> str:
    """A self-contained <figure>: the PNG as a data URI, shown at its size in inches."""
    png = base64.b64encode(to_png(fig)).decode("ascii")
    width = round(fig.get_figwidth() * CSS_DPI)
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return (
        f'<figure class="tl-figure"><img src="data:image/png;base64,{png}" '
        f'alt="{html.escape(alt)}" style="width:{width}px">{cap}</figure>'
    )
