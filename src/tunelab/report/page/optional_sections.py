"""The sections shown when their file is given: achieved rates against the device's own
limits (a fio calibration), and the buffer-pool simulator's curve beside the measured reads."""

from __future__ import annotations

import dataclasses
import html
from pathlib import Path
from typing import Any

import pandas as pd

from tunelab.report import plots, tables
from tunelab.report.data import ReportData, sha256
from tunelab.report.fragments import note
from tunelab.report.labels import fmt, page_mb
from tunelab.report.page import sweep_figures
from tunelab.report.page.figures_section import figure_caption


def _helper_output(obj: Any, table_id: str, alt: str) -> str:
    from matplotlib.figure import Figure

    if isinstance(obj, Figure):
        return plots.figure_html(obj, alt)
    if isinstance(obj, tuple):
        return "".join(_helper_output(o, f"{table_id}-{i}", alt) for i, o in enumerate(obj))
    return tables.any_table(obj, table_id)


def device_html(data: ReportData, calibration_json: str) -> str | None:
    """Achieved MB/s as a fraction of the device's measured limits (fio calibration)."""
    if not calibration_json:
        return None
    head = "<h2>Against the device's own limits</h2>"
    try:
        from tunelab.calibrate import load as load_calibration
        from tunelab.report.page.device import achieved_vs_device
    except ImportError:
        return head + note("The calibration helpers are not installed; section left out.")
    if not Path(calibration_json).is_file():
        return head + note(f"{html.escape(calibration_json)}: calibration file not found.", "warn")
    try:
        cal = load_calibration(calibration_json)
        rows = achieved_vs_device(data.results, cal)
    except Exception as exc:  # a broken helper must not hide the rest of the report
        return head + note(html.escape(f"{calibration_json}: {type(exc).__name__}: {exc}"), "warn")
    parts = [head, note(_calibration_source(cal, calibration_json))]
    if not isinstance(rows, pd.DataFrame) or "device_fraction" not in rows:
        return "".join(parts) + _helper_output(rows, "device", "achieved vs device limits")
    # The calibration's MB/s, in its own MB, in the page's (the Methods say so once).
    for col in ("achieved_mb_s", "device_mb_s"):
        rows[col] = page_mb(1.0, cal.mb_bytes) * pd.to_numeric(rows[col], errors="coerce")
    with_device = dataclasses.replace(data, results=rows)
    if not pd.to_numeric(rows["device_fraction"], errors="coerce").notna().any():
        parts.append(note("No workload of this sweep has a device limit to compare with."))
        return "".join(parts)
    parts.append(
        note(
            "Achieved MB/s is the data the workload had to read (or wrote) per second of "
            "response time. Above 100 % of the device's rate, the pages came from memory "
            "(the engine's pool or the OS cache), not from the device."
        )
    )
    caption = html.escape(figure_caption(data))
    fig = sweep_figures.device_figure(with_device)
    parts.append(plots.figure_html(fig, "achieved MB/s as a fraction of the device", caption))
    parts.append(tables.device_html(with_device))
    return "".join(parts)


def _calibration_source(cal: Any, path: str) -> str:
    where = getattr(cal, "device", "") or getattr(cal, "filesystem", "")
    mode = "direct I/O" if getattr(cal, "direct_io", False) else "buffered I/O"
    text = f"Calibration <code>{html.escape(path)}</code>"
    if getattr(cal, "host", ""):
        text += f" of {html.escape(str(where))} on {html.escape(str(cal.host))} ({mode})"
    bits = [text]
    rate = getattr(cal, "device_read_rate_mb_s", None)
    if rate is not None:
        bits.append(f"device read rate {html.escape(fmt(page_mb(rate, cal.mb_bytes)))} MB/s")
    if getattr(cal, "created_at", ""):
        quick = ", quick plan" if getattr(cal, "quick", False) else ""
        bits.append(f"measured {html.escape(str(cal.created_at))}{quick}")
    bits.append(f"sha256 <code>{sha256(path)[:16]}</code>")
    return "; ".join(bits) + "."


def _measured_reads(rows: pd.DataFrame) -> pd.DataFrame:
    """Reads into the pool per pool size of the cold runs: the simulator starts from an empty
    pool."""
    pool = "applied_buffer_pool" if "applied_buffer_pool" in rows else "knob_buffer_pool"
    if "cache_requested" in rows:
        rows = rows[rows["cache_requested"] == "cold"]
    return pd.DataFrame({"pool_pages": rows[pool], "physical_reads": rows["c_physical_reads"]})


def simulator_html(data: ReportData, bpsim_csv: str) -> str | None:
    """The buffer-pool simulator's predicted curve beside the measured points."""
    if not bpsim_csv:
        return None
    head = "<h2>Simulated versus measured</h2>"
    try:
        from tunelab.bpsim.compare import plot_predicted_vs_measured, predicted_vs_measured
    except ImportError:
        return head + note("The simulator helpers are not installed; section left out.")
    if not Path(bpsim_csv).is_file():
        return head + note(f"{html.escape(bpsim_csv)}: simulator curve not found.", "warn")
    try:
        frame = predicted_vs_measured(pd.read_csv(bpsim_csv), _measured_reads(data.results))
        with plots.style():
            fig, (ax,) = plots._figure(1)
            fig.set_size_inches(plots.PANEL_W * 1.6, plots.PANEL_H * 1.2)
            plot_predicted_vs_measured(frame, ax)
    except Exception as exc:  # a broken helper must not hide the rest of the report
        return head + note(html.escape(f"{bpsim_csv}: {type(exc).__name__}: {exc}"), "warn")
    source = f"Simulated curve: <code>{html.escape(bpsim_csv)}</code>."
    return (
        head
        + note(source)
        + plots.figure_html(fig, "simulated vs measured")
        + tables.any_table(frame, "bpsim")
    )
