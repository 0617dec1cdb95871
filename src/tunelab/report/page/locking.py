"""Row locks against a table lock: the throughput ratio per write workload and thread count,
its interval and test, and its figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from tunelab.analysis import stats
from tunelab.report.data import ReportData, order_key
from tunelab.report.labels import fmt, label
from tunelab.report.plots import (
    MARKERS,
    PANEL_H,
    PANEL_W,
    TEXT_BOX,
    _figure,
    _has,
    _legend,
    hue_levels,
    hue_title,
    palette_for,
    style,
)

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
