"""The figures of a page across engines: one panel per setting, the engines on shared axes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator

from tunelab.analysis import figures, stats
from tunelab.report import plots, sources
from tunelab.report.across_runs import POOL_BYTES, EngineRun, Experiment, with_pool_bytes
from tunelab.report.data import order_key
from tunelab.report.labels import fmt, fmt_bytes, fmt_percent, label
from tunelab.store.results import KNOB_PREFIX, WORKLOAD_PREFIX
from tunelab.sweep import claimspec

METRIC = "elapsed_s"
MAX_PANELS = 6


def main_x(exp: Experiment) -> str | None:
    """The dimension the sweep asks about: the ``along`` of its first trend or crossover
    claim, else the first swept dimension of its first engine; a pool as bytes."""
    x = None
    for claim in exp.claims:
        if isinstance(claim, dict) and claim.get("along"):
            x = str(claim["along"])
            break
    dims = list(dict.fromkeys(d for r in exp.runs for d in r.data.dims))
    # Of the dimensions, the one the most engines have: another's own knob draws it alone.
    shared = sorted(dims, key=lambda d: -sum(d in r.data.dims for r in exp.runs))
    col = next(
        (c for c in (f"{KNOB_PREFIX}{x}", f"{WORKLOAD_PREFIX}{x}") if x and c in dims),
        shared[0] if shared else None,
    )
    return POOL_BYTES if col == f"{KNOB_PREFIX}buffer_pool" else col


def panel_columns(exp: Experiment, x: str) -> list[str]:
    """The other columns that separate points (cache, workload, index, ...), not those that
    only follow ``x`` (a pool given in bytes is another page count at each page size). An
    engine whose rows lack ``x`` is not drawn, and its columns make no panels."""
    cols: list[str] = []
    for run in exp.runs:
        frame = with_pool_bytes(run.data.results)
        if x not in frame:
            continue
        for c in run.data.point_columns:
            if c in cols or c == x or (x == POOL_BYTES and c == f"{KNOB_PREFIX}buffer_pool"):
                continue
            if frame.groupby(x, dropna=False)[c].nunique(dropna=False).max() <= 1:
                continue
            cols.append(c)
    return cols


NOT_SET = object()  # a panel's value of a column that no engine drawn in it has


def _agree(a: dict, b: dict) -> bool:
    return all(str(a[c]) == str(b[c]) for c in a.keys() & b.keys())


def _panels(exp: Experiment, cols: list[str]) -> list[tuple]:
    """The panels: each engine's combinations of ``cols``, joined on the columns the engines
    share (a column an engine's rows lack is no setting of it); a combination no other
    engine's agrees with is a panel of its own."""
    keys: list[dict] = [{}]
    for run in exp.runs:
        present = [c for c in cols if c in run.data.results]
        combos = run.data.results[present].drop_duplicates() if present else pd.DataFrame()
        own = [
            dict(zip(present, t, strict=True)) for t in combos.itertuples(index=False, name=None)
        ] or [{}]
        keys = (
            [{**k, **o} for k in keys for o in own if _agree(k, o)]
            + [k for k in keys if not any(_agree(k, o) for o in own)]
            + [o for o in own if not any(_agree(k, o) for k in keys)]
        )
    tuples = dict.fromkeys(tuple(k.get(c, NOT_SET) for c in cols) for k in keys)
    orders = {c: v for r in reversed(exp.runs) for c, v in r.data.orders.items()}
    sort = [order_key(orders, c) for c in cols]
    return sorted(
        tuples,
        key=lambda t: tuple(
            (0,) if v is NOT_SET else (1, k(v)) for k, v in zip(sort, t, strict=True)
        ),
    )


def curve(
    frame: pd.DataFrame, x: str, metric: str = METRIC, orders: dict | None = None
) -> pd.DataFrame:
    """Per value of ``x``: the median of ``metric`` and its order-statistic interval (a
    point's figure, ``analysis.figures``, for the rows ``_panel_rows`` gives) and that
    interval's level; numbers ascending, categories in the sweep's order (``orders``, as
    ``ReportData.orders``)."""
    out = []
    for value, g in frame.groupby(x, sort=False):
        values = pd.to_numeric(g[metric], errors="coerce").dropna().to_numpy()
        if values.size == 0:
            continue
        iv = stats.median_interval(values)
        out.append(
            {
                "x": value,
                "median": iv.median,
                "low": iv.low,
                "high": iv.high,
                "coverage": iv.coverage,
            }
        )
    table = pd.DataFrame(out, columns=["x", "median", "low", "high", "coverage"])
    numeric = pd.to_numeric(table["x"], errors="coerce")
    if numeric.notna().all():
        return table.assign(_n=numeric).sort_values("_n").drop(columns="_n").reset_index(drop=True)
    key = order_key(orders or {}, x)
    return table.iloc[sorted(range(len(table)), key=lambda i: key(table["x"].iloc[i]))].reset_index(
        drop=True
    )


def interval_levels(exp: Experiment) -> str:
    """The levels the figures' intervals have: "96.9 %", or each where points' repetitions
    differ ("93.8 % / 96.9 %")."""
    found = set()
    for run in exp.runs:
        frame = run.data.results
        sizes = frame.groupby("point_id").size() if "point_id" in frame else [len(frame)]
        found |= {stats.coverage(int(n), stats.order_ranks(int(n))[0]) for n in set(sizes)}
    return " / ".join(fmt_percent(c) for c in sorted(found)) or "an"


def _panel_rows(run: EngineRun, cols: list[str], key: tuple) -> pd.DataFrame:
    """The engine's rows of a panel, with the values of its points' figures (times at one CPU
    speed where its verdicts compare them so): a column its rows lack is no setting of it."""
    frame = with_pool_bytes(figures.at_one_speed(run.data.results))
    mask = pd.Series(True, index=frame.index)
    for c, v in zip(cols, key, strict=True):
        if c in frame and v is not NOT_SET:
            mask &= frame[c].astype(str) == str(v)
    return frame[mask]


def compared_column(exp: Experiment, cols: list[str]) -> str | None:
    """The column the sweep's first pair of sides differs in (``index`` for an index against
    a scan), when it is one of ``cols``: drawn as line styles in one panel, not as panels,
    so that each panel holds the comparison the claim makes."""
    for claim in exp.claims:
        a, b = (claim.get(k) if isinstance(claim, dict) else None for k in ("a", "b"))
        if isinstance(a, dict) and isinstance(b, dict):
            for key in a:
                for col in (f"{KNOB_PREFIX}{key}", f"{WORKLOAD_PREFIX}{key}"):
                    if col in cols and str(a[key]) != str(b.get(key)):
                        return col
    return None


STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "D", "^")  # with STYLES: categories drawn as points keep them apart


def _source_lines(ax: Any, exp: Experiment, x: str, panel: dict[str, Any]) -> None:
    """The source's crossovers on ``x`` (``sources.lines``) in the panels their context
    names (a cold crossover in the cold panel)."""
    if not exp.runs:
        return
    data = exp.runs[0].data
    for s in sources.lines(data, x):
        context = {sources.column(data.results, k): v for k, v in s.where.items()}
        if any(
            c in context and v is not NOT_SET and not claimspec.same(v, context[c])
            for c, v in panel.items()
        ):
            continue
        ax.axvline(s.x, color=plots.SOURCE_COLOR, ls=":", lw=1.6, zorder=2, gid=f"source|{s.x:.6g}")
        ax.annotate(
            s.text,
            (s.x, 0.98),
            xycoords=("data", "axes fraction"),
            xytext=(-3, 0),
            textcoords="offset points",
            rotation=90,
            ha="right",
            va="top",
            fontsize="x-small",
            color=plots.SOURCE_COLOR,
            bbox=plots.TEXT_BOX,
            zorder=6,
        )


def engines_figure(exp: Experiment, x: str, normalised: bool) -> Figure | None:
    """One panel per combination of the other point columns (the claim's compared column as
    line styles inside a panel), one colour per engine: medians with their intervals, or
    (``normalised``) each divided by its own median at its first value of ``x`` so that
    shapes compare where absolute times do not."""
    cols = panel_columns(exp, x)
    styled = compared_column(exp, cols)
    styles = (
        list(
            dict.fromkeys(
                str(v)
                for r in exp.runs
                if styled in r.data.results
                for v in sorted(r.data.results[styled].dropna().unique(), key=str)
            )
        )[: len(STYLES)]
        if styled
        else [None]
    )
    cols = [c for c in cols if c != styled]
    keys = _panels(exp, cols)[:MAX_PANELS] or [()]
    colours = plots.palette_for([r.engine for r in exp.runs])
    with plots.style():
        fig, axes = plots._figure(len(keys))
        drawn = False
        curves = _curves(exp.runs, styled, styles)
        categories = _categories(exp, x)
        for ax, key in zip(axes, keys, strict=True):
            xs_all: list[float] = []
            ys_all: list[float] = []
            for i, (run, (ls, value)) in enumerate(curves):
                rows = (
                    _panel_rows(run, cols, key)
                    if cols
                    else with_pool_bytes(figures.at_one_speed(run.data.results))
                )
                if value is not None:
                    rows = rows[rows[styled].astype(str) == value]
                if x not in rows or rows.empty:
                    continue
                c = curve(rows, x, orders=exp.runs[0].data.orders)
                if c.empty:
                    continue
                y, lo, hi = c["median"], c["low"], c["high"]
                if normalised:
                    base = float(c["median"].iloc[0])
                    y, lo, hi = y / base, lo / base, hi / base
                xv = pd.to_numeric(c["x"], errors="coerce")
                numeric = bool(xv.notna().all())
                # Categories: each curve beside the others at a category, never on them.
                dodge = (i - (len(curves) - 1) / 2) * min(0.5 / len(curves), 0.15)
                xs = xv if numeric else c["x"].astype(str).map(categories.index) + dodge
                name = run.engine if value is None else f"{run.engine} · {value}"
                # Categories (index types) are points: a line between them would read as a
                # trend from one to the next. Numbers are joined.
                ax.errorbar(
                    xs,
                    y,
                    yerr=[y - lo, hi - y],
                    color=colours[run.engine],
                    ls=STYLES[ls] if numeric else "none",
                    marker=MARKERS[ls],
                    capsize=3,
                    lw=1.6,
                    label=name,
                )
                drawn = True
                ys_all += [float(v) for v in hi] + [float(v) for v in lo]
                if xv.notna().all():
                    xs_all += list(xv)
            if xs_all:
                plots.set_x_scale(ax, xs_all)
            values = sorted(set(xs_all))
            if x != POOL_BYTES and 0 < len(values) <= 12:  # ticks at the values swept, in %
                at = ax.xaxis.get_transform().transform(np.asarray(values, float))
                texts = plots._thin_labels(list(at), [plots.value_text(x, v) for v in values])
                ax.set_xticks(values, texts)
                ax.xaxis.set_minor_locator(NullLocator())
            if xs_all:
                _source_lines(ax, exp, x, dict(zip(cols, key, strict=True)))
            if x == POOL_BYTES and xs_all:  # binary sizes: ticks at 64 KiB, 1 MiB, 16 MiB...
                lo, hi = math.log2(min(xs_all)), math.log2(max(xs_all))
                ax.set_xticks(
                    [2.0**k for k in range(math.floor(lo), math.ceil(hi) + 1) if k % 4 == 0]
                )
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: fmt_bytes(v)))
                ax.xaxis.set_minor_formatter(NullFormatter())
            if not xs_all:
                ax.set_xticks(range(len(categories)), [fmt(v) for v in categories])
                ax.set_xlim(-0.6, len(categories) - 0.4)
                plots._slant(ax, 20)  # categories: long names
            if not normalised and ys_all:
                plots._finish_y(ax, np.asarray(ys_all, dtype=float), METRIC)  # log past 100x
            ax.set_title(
                " · ".join(
                    f"{plots.axis_label(c).split(' (')[0]} {plots.value_text(c, v)}"
                    for c, v in zip(cols, key, strict=True)
                    if v is not NOT_SET
                )
            )
            ax.set_xlabel(x_label(x))
            ax.grid(bool(xs_all), axis="x")  # no grid line through a category's points
            ax.set_ylabel("time ÷ own first point" if normalised else label(METRIC))
            if normalised:
                ax.axhline(1, color="#999", lw=0.8, ls=":")
        if not drawn:
            return None
        plots._legend(fig, axes, f"engine · {label(styled)}" if styled else "engine")
    return fig


def _categories(exp: Experiment, x: str) -> list[str]:
    """The values of a categorical ``x`` over every engine, in the sweep's order."""
    seen = [
        str(v) for r in exp.runs if x in r.data.results for v in r.data.results[x].dropna().unique()
    ]
    key = order_key(exp.runs[0].data.orders if exp.runs else {}, x)
    return sorted(dict.fromkeys(seen), key=key)


def _curves(runs: list[EngineRun], styled: str | None, styles: list) -> list[tuple]:
    """(engine, (line style, value of ``styled``)) per curve: one curve of an engine whose
    rows lack ``styled`` (no setting of it)."""
    return [
        (run, item)
        for run in runs
        for item in (enumerate(styles) if styled in run.data.results else [(0, None)])
    ]


def x_label(x: str) -> str:
    return "buffer pool (bytes, as applied)" if x == POOL_BYTES else plots.axis_label(x)
