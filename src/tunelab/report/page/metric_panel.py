"""One measured metric versus one swept dimension on one panel.

Every panel shows the same three things: the median per point (line, or marker for
categories), its order-statistic interval (band, or error bar), and every raw repetition as a
dot, jittered with a fixed seed so two renders draw the same pixels. Other varying dimensions
(index type, cache state, workload) are colours from one colour-blind-safe palette.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.path import Path
from matplotlib.ticker import NullLocator

from tunelab.analysis import stats
from tunelab.report import checks, marks
from tunelab.report.data import order_key
from tunelab.report.labels import is_ratio, label
from tunelab.report.page.axis_marks import _pool_axis
from tunelab.report.plots import (
    LINESTYLES,
    MARKERS,
    _finish_y,
    _slant,
    _thin_labels,
    axis_label,
    hue_levels,
    is_numeric,
    palette_for,
    set_x_scale,
    value_text,
)

SEED = 0
BAND_MAX = 3  # up to this many lines per panel get shaded bands, more get error bars
MISMATCH_COLOR = "#1a1a1a"
MISMATCH_LABEL = "plan ≠ what the index knob built"


def _crossed_ring() -> Path:
    """A hollow ring with a thin cross: it sits on a median without hiding its colour."""
    d = math.sqrt(0.5)
    cross = Path([(-d, -d), (d, d), (-d, d), (d, -d)], [Path.MOVETO, Path.LINETO] * 2)
    return Path.make_compound_path(Path.unit_circle(), cross)


MISMATCH_MARKER = _crossed_ring()


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


def plotted_medians(ax: Axes) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """gid -> (x, y) of each median line drawn by ``draw_metric``."""
    out = {}
    for line in ax.get_lines():
        gid = line.get_gid()
        if gid and gid.startswith("median|"):
            out[gid] = (np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float))
    return out
