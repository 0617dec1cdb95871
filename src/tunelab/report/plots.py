"""What every figure of the pages shares: the style, the colour-blind-safe palette, axis
scales and tick labels, panels laid out to the page's width, legends, and the PNG a page embeds.

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
from matplotlib.ticker import (
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    PercentFormatter,
)

from tunelab.report import marks
from tunelab.report.data import order_key
from tunelab.report.labels import fmt, is_ratio, label

PALETTE = "colorblind"
DPI = 144
CSS_DPI = 96  # the browser's px per inch: images are shown at 1/1.5 of their pixels (sharp)
PAGE_W = 11.2  # inches: the page's content width at the browser's 96 px per inch
PANEL_W, PANEL_H = 5.6, 3.5  # inches; several panels share PAGE_W
MARKERS = ("o", "s", "D", "^", "v", "P", "X")
LINESTYLES = ("-", "--", ":", "-.")
LOG_SPAN = 10.0  # an axis whose positive values span more than this ratio is drawn in log scale
# Columns stored as fractions that the findings state in percent: drawn in % on every axis.
PERCENT_COLUMNS = {marks.SELECTIVITY: "selectivity (% of rows)"}
TEXT_BOX = {"boxstyle": "square,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85}
SOURCE_COLOR = "#7a4a00"


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


def _has(frame: pd.DataFrame, column: str) -> bool:
    return column in frame and pd.to_numeric(frame[column], errors="coerce").notna().any()


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
