"""The figures of a sweep's page: response time and throughput per swept dimension (and all
of them at a glance), I/O and hit ratios, achieved rates against the device, engine time
against the client's clock, and per query."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from tunelab.report import checks
from tunelab.report.data import ReportData
from tunelab.report.labels import label
from tunelab.report.page.axis_marks import mark_crossovers, mark_sources
from tunelab.report.page.metric_panel import draw_metric
from tunelab.report.plots import PANEL_H, PANEL_W, _figure, _has, _legend, _title, hue_title, style

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
