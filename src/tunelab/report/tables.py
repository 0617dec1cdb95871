"""HTML tables for the report: per-point summaries, I/O, raw rows, key/value lists.

Tables are plain ``DataFrame.to_html`` output (no random element ids), with the numbers
formatted once by ``labels.fmt`` so the page and the CSV agree to four significant digits.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

import pandas as pd

from tunelab.report import stats
from tunelab.report.data import ReportData, order_key
from tunelab.report.labels import fmt, fmt_percent, is_ratio, label

IO_COLUMNS = (
    "c_logical_reads",
    "c_physical_reads",
    "c_prefetch_reads",
    "physical_reads_per_s",
    "hit_ratio_app",
    "hit_ratio_sys",
    "c_os_read_bytes",
    "read_mb_s",
)


def html_table(frame: pd.DataFrame, table_id: str, classes: str = "tl-table") -> str:
    return frame.to_html(
        index=False, escape=True, table_id=table_id, classes=classes, border=0, na_rep="—"
    )


def key_value(rows: Iterable[tuple[str, str]], table_id: str) -> str:
    """A two-column table; values are already HTML (escape them before)."""
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="tl-table tl-kv" id="{table_id}"><tbody>{body}</tbody></table>'


def sort_points(frame: pd.DataFrame, cols: Sequence[str], orders: dict) -> pd.DataFrame:
    """Rows in the sweep's own value order (categories as listed, numbers ascending)."""
    if not cols or frame.empty:
        return frame.reset_index(drop=True)
    keys = {c: order_key(orders, c) for c in cols}
    return frame.sort_values(
        list(cols), key=lambda s: s.map(keys[s.name]), kind="stable"
    ).reset_index(drop=True)


def point_medians(data: ReportData, columns: Sequence[str]) -> pd.DataFrame:
    """Per point: n and the median of each column present."""
    by = data.point_columns
    frame = data.results
    out: pd.DataFrame | None = None
    for col in columns:
        if col not in frame or not pd.to_numeric(frame[col], errors="coerce").notna().any():
            continue
        s = stats.summarize(frame, by, col)[[*by, "n", "median"]].rename(columns={"median": col})
        if out is None:
            out = s
        else:
            out = out.merge(s.drop(columns="n"), on=by, how="outer") if by else out.join(s[[col]])
    return pd.DataFrame() if out is None else sort_points(out, by, data.orders)


def summary_frame(data: ReportData) -> pd.DataFrame:
    """Per point: n, median and interval of the response time; median throughput."""
    by = data.point_columns
    s = stats.summarize(data.results, by, "elapsed_s")
    if "throughput_rows_s" in data.results:
        t = stats.summarize(data.results, by, "throughput_rows_s")[[*by, "median", "low", "high"]]
        t = t.rename(columns={"median": "tp_median", "low": "tp_low", "high": "tp_high"})
        s = s.merge(t, on=by, how="left") if by else s.join(t)
    return sort_points(s, by, data.orders)


def summary_html(data: ReportData) -> str:
    s = summary_frame(data)
    table = pd.DataFrame({label(c, data.engine): s[c].map(fmt) for c in data.point_columns})
    table["n"] = s["n"].map(fmt)
    table["response time (s): median"] = s["median"].map(fmt)
    table["95 % interval for the median (order statistics)"] = [
        f"{fmt(lo)} – {fmt(hi)}" for lo, hi in zip(s["low"], s["high"], strict=True)
    ]
    table["coverage of that interval"] = s["coverage"].map(fmt_percent)
    if "tp_median" in s:
        table["throughput (rows/s): median"] = s["tp_median"].map(fmt)
        table["throughput interval"] = [
            f"{fmt(lo)} – {fmt(hi)}" for lo, hi in zip(s["tp_low"], s["tp_high"], strict=True)
        ]
    return html_table(table, "summary")


def io_html(data: ReportData) -> str | None:
    cols = [c for c in IO_COLUMNS if c in data.results]
    m = point_medians(data, cols)
    if m.empty:
        return None
    table = pd.DataFrame({label(c, data.engine): m[c].map(fmt) for c in data.point_columns})
    table["n"] = m["n"].map(fmt)
    for c in cols:
        if c in m:
            fmt_c = fmt_percent if is_ratio(c) else fmt
            table[f"{label(c)}: median"] = m[c].map(fmt_c)
    return html_table(table, "io")


def raw_html(frame: pd.DataFrame) -> str:
    """Every row exactly as stored (shortest round-trip text of each value)."""
    shown = frame.map(lambda v: "" if pd.isna(v) else str(v))
    return html_table(shown, "raw-rows", classes="tl-table tl-raw")


def any_table(obj: object, table_id: str) -> str:
    """HTML for what a helper returned: a frame, a mapping, or text."""
    if isinstance(obj, pd.DataFrame):
        return html_table(obj.map(fmt) if not obj.empty else obj, table_id)
    if isinstance(obj, pd.Series):
        return key_value(((str(k), html.escape(fmt(v))) for k, v in obj.items()), table_id)
    if isinstance(obj, dict):
        return key_value(((str(k), html.escape(fmt(v))) for k, v in obj.items()), table_id)
    return f"<p>{html.escape(str(obj))}</p>"


DEVICE_COLUMNS = ("achieved_mb_s", "device_mb_s", "device_fraction")


def device_html(data: ReportData) -> str:
    """Per point: median achieved MB/s, the device's limit, their ratio and the basis."""
    m = point_medians(data, DEVICE_COLUMNS)
    table = pd.DataFrame({label(c, data.engine): m[c].map(fmt) for c in data.point_columns})
    table["n"] = m["n"].map(fmt)
    for c in DEVICE_COLUMNS:
        if c in m:
            fmt_c = fmt_percent if c == "device_fraction" else fmt
            table[f"{label(c)}: median"] = m[c].map(fmt_c)
    by = data.point_columns
    if "device_basis" in data.results and by:
        basis = data.results.groupby(by, dropna=False, sort=False)["device_basis"].first()
        table["limit used"] = m[by].merge(basis.reset_index(), on=by, how="left")["device_basis"]
    return html_table(table, "device")
