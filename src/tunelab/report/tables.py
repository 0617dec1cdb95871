"""HTML tables for the report: per-point summaries, I/O, raw rows, key/value lists.

Tables are plain ``DataFrame.to_html`` output (no random element ids), with the numbers
formatted once by ``labels.fmt`` so the page and the CSV agree to four significant digits.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

import pandas as pd

from tunelab.analysis import figures
from tunelab.report import checks, marks
from tunelab.report.data import ReportData, order_key
from tunelab.report.labels import binary_unit, fmt, fmt_percent, is_ratio, label, unit_text

# The engine's reads and their rates, then what reached the device beside them.
IO_COLUMNS = (
    "c_logical_reads",
    "c_physical_reads",
    "c_prefetch_reads",
    "c_read_wait_ms",
    "physical_reads_per_s",
    "read_mb_s",
    "hit_ratio_app",
    "hit_ratio_sys",
    "c_os_read_bytes",
    "os_read_mb_s",
    "c_dev_read_requests",
    "dev_read_request_kib",
    "dev_read_mb_s",
)


def html_table(
    frame: pd.DataFrame, table_id: str, classes: str = "tl-table", wrap: Sequence[str] = ()
) -> str:
    """``wrap``: text columns that may break over lines (plans), so a wide table still fits."""
    if not wrap:
        return frame.to_html(
            index=False, escape=True, table_id=table_id, classes=classes, border=0, na_rep="—"
        )
    cells = frame.map(lambda v: "—" if v is None or v != v else html.escape(str(v)))
    for col in wrap:
        cells[col] = cells[col].map(
            lambda t: (
                f'<span class="tl-wrap">{t.replace(";", ";<wbr>").replace(":", ":<wbr>")}</span>'
            )
        )
    cells.columns = [html.escape(str(c)) for c in cells.columns]
    return cells.to_html(index=False, escape=False, table_id=table_id, classes=classes, border=0)


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


def point_cells(data: ReportData, t: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """The point columns of per-point rows as text; a buffer pool in pages gets its size in
    bytes beside it (one binary unit per column, from the rows' page size)."""
    table = pd.DataFrame(index=t.index)
    for c in by:
        table[label(c, data.engine)] = t[c].map(fmt)
        nbytes = marks.pool_bytes(data, t, c) if marks.is_pool(c) else None
        if nbytes is not None and nbytes.notna().any():
            unit = binary_unit(float(nbytes.max()))
            name = label(c, data.engine).split(" (")[0]
            table[f"{name} size ({unit_text(unit)})"] = (nbytes / unit[1]).map(fmt)
    return table


def point_medians(data: ReportData, columns: Sequence[str]) -> pd.DataFrame:
    """Per point: n and the median of each column present."""
    by = data.point_columns
    frame = data.results
    out: pd.DataFrame | None = None
    for col in columns:
        if col not in frame or not pd.to_numeric(frame[col], errors="coerce").notna().any():
            continue
        s = figures.summarize(frame, by, col)[[*by, "n", "median"]]
        s = s.rename(columns={"median": col})
        if out is None:
            out = s
        else:
            out = out.merge(s.drop(columns="n"), on=by, how="outer") if by else out.join(s[[col]])
    return pd.DataFrame() if out is None else sort_points(out, by, data.orders)


def summary_frame(data: ReportData) -> pd.DataFrame:
    """Per point: n, median and interval of the response time; median throughput (the
    points' figures, ``analysis.figures``)."""
    by = data.point_columns
    s = figures.summarize(data.results, by, "elapsed_s")
    if "throughput_rows_s" in data.results:
        t = figures.summarize(data.results, by, "throughput_rows_s")
        t = t[[*by, "median", "low", "high", "coverage"]].rename(columns={"coverage": "tp_cov"})
        t = t.rename(columns={"median": "tp_median", "low": "tp_low", "high": "tp_high"})
        s = s.merge(t, on=by, how="left") if by else s.join(t)
    return sort_points(s, by, data.orders)


def _attach(s: pd.DataFrame, extra: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per-point columns of ``extra`` beside the sorted per-point rows of ``s``."""
    if extra.empty:
        return s
    extra = extra.drop(columns=[c for c in extra if c in s and c not in by])
    if by:
        return s.merge(extra, on=list(by), how="left")
    return s.assign(**{c: extra[c].iloc[0] for c in extra})


def access_cell(path: object, expected: object, matches: object) -> str:
    if path is None or (isinstance(path, float) and pd.isna(path)):
        return "not recorded"
    if checks.is_false(matches):
        return f"{checks.MISMATCH_MARK} {path} (the knob built {expected})"
    return str(path)


def share_cell(share: float, bound: bool) -> str:
    return fmt_percent(share) + (" client-bound" if bound else "")


def summary_html(data: ReportData) -> str:
    s = summary_frame(data)
    by = data.point_columns
    frame = data.results
    if checks.plans_recorded(frame):
        s = _attach(s, checks.point_access(data), by)
    if checks.engine_time_recorded(frame):
        s = _attach(s, checks.point_times(data)[[*by, "client_share", "client_bound"]], by)
    table = point_cells(data, s, data.point_columns)
    # What ran, and whose time it was, stand beside the point's name: they say what the
    # numbers that follow measure.
    wrap = []
    if "access_path" in s:
        wrap.append("access path")
        table["access path"] = [
            access_cell(p, e, m)
            for p, e, m in zip(s["access_path"], s["access_expected"], s["matches"], strict=True)
        ]
    if "client_share" in s:
        table["client share: median"] = [
            share_cell(v, b) for v, b in zip(s["client_share"], s["client_bound"], strict=True)
        ]
    table["n"] = s["n"].map(fmt)
    table["response time (s): median"] = s["median"].map(fmt)
    table[interval_header(s["coverage"])] = [
        f"{fmt(lo)} – {fmt(hi)}" for lo, hi in zip(s["low"], s["high"], strict=True)
    ]
    if s["coverage"].nunique() > 1:  # each row's own level where they differ
        table["level of that interval"] = s["coverage"].map(fmt_percent)
    if "tp_median" in s:
        table["throughput (rows/s): median"] = s["tp_median"].map(fmt)
        table[interval_header(s["tp_cov"], "throughput")] = [
            f"{fmt(lo)} – {fmt(hi)}" for lo, hi in zip(s["tp_low"], s["tp_high"], strict=True)
        ]
    # Many swept dimensions can still make it wider than the page: it scrolls, not clips.
    return f'<div class="tl-wide">{html_table(table, "summary", wrap=wrap)}</div>'


def interval_header(coverage: pd.Series, of: str = "") -> str:
    """The header of a column of order-statistic intervals, with the level they really
    have: "96.9 % interval for the median", or "interval ... (level beside it)" where the
    points' repetitions, and so their levels, differ."""
    of = f"{of}: " if of else ""
    levels = pd.to_numeric(coverage, errors="coerce").dropna().unique()
    if len(levels) == 1:
        return f"{of}{fmt_percent(float(levels[0]))} interval for the median (order statistics)"
    return f"{of}interval for the median (order statistics; its level beside it)"


def engine_time_html(data: ReportData) -> str | None:
    """Per point: medians of the response time, the engine's time and the client share."""
    t = checks.point_times(data)
    if t.empty:
        return None
    by = data.point_columns
    t = sort_points(t, by, data.orders)
    table = point_cells(data, t, by)
    table["n"] = t["n"].map(fmt)
    table["response time (s): median"] = t["elapsed_s"].map(fmt)
    table["engine time (s): median"] = t["engine_elapsed_s"].map(fmt)
    table["client share: median"] = [
        share_cell(v, b) for v, b in zip(t["client_share"], t["client_bound"], strict=True)
    ]
    if "wl_fetch" not in by and t["fetch"].notna().any():
        table["rows to the client"] = t["fetch"].map(lambda v: "—" if v is None else v)
    return html_table(table, "engine-time")


def _query_table(data: ReportData, t: pd.DataFrame, columns: dict[str, str], table_id: str):
    # Only the point columns that vary here: all cold, or all lookups, goes without saying.
    by = [c for c in data.point_columns if t[c].nunique(dropna=False) > 1]
    t = sort_points(t, by, data.orders)
    table = point_cells(data, t, by)
    table["n"] = t["n"].map(fmt)
    table["timed statements"] = t["queries"].map(fmt)
    for col, name in columns.items():
        table[name] = (t[col] * 1e3).map(fmt) if col.startswith("q_") else t[col].map(fmt)
    return html_table(table, table_id)


def first_query_html(data: ReportData) -> str | None:
    t = checks.first_vs_rest(data)
    if t.empty:
        return None
    columns = {
        "q_first_s": "first query (ms): median",
        "q_rest_median_s": "later queries (ms): median",
        "first_over_rest": "first / later",
        "q_p50_s": "per query (ms): median",
    }
    for col, name in zip(checks.FIRST_REST_BYTES, ("first query", "later queries")):
        if t[col].notna().any():  # recorded since each query is cold
            key = f"{name.split()[0]}_mb"
            t[key] = t[col] / 1e6
            columns[key] = f"{name}, read from the device (MB): median"
    return _query_table(data, t, columns, "first-query")


def lookups_html(data: ReportData) -> str | None:
    t = checks.lookup_percentiles(data)
    if t.empty:
        return None
    columns = {
        "q_p50_s": "p50 (ms)",
        "q_p95_s": "p95 (ms)",
        "q_p99_s": "p99 (ms)",
        "q_max_s": "slowest (ms)",
    }
    return _query_table(data, t, columns, "lookups")


def io_html(data: ReportData, names: dict[str, str] | None = None) -> str | None:
    """Per point, the medians of the I/O columns; ``names``: labels of columns whose words
    depend on the rows (``reads.words``)."""
    names = names or {}
    cols = [c for c in IO_COLUMNS if c in data.results]
    if any(c.startswith(("c_dev_", "dev_")) for c in cols):
        cols.insert(0, "elapsed_s")  # read requests and their size beside the time they took
    m = point_medians(data, cols)
    if m.empty:
        return None
    table = point_cells(data, m, data.point_columns)
    table["n"] = m["n"].map(fmt)
    for c in cols:
        if c in m:
            fmt_c = fmt_percent if is_ratio(c) else fmt
            table[f"{names.get(c) or label(c)}: median"] = m[c].map(fmt_c)
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
    table = point_cells(data, m, data.point_columns)
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
