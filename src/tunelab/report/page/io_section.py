"""I/O: the engine's reads in the words its declaration earns, their rates and the hit
ratios, beside the bytes that reached the device."""

from __future__ import annotations

import dataclasses
import html

import pandas as pd

from tunelab.report import plots, reads, tables
from tunelab.report.data import ReportData
from tunelab.report.fragments import note
from tunelab.report.labels import MB_TEXT, label
from tunelab.report.page import sweep_figures
from tunelab.report.page.figures_section import axis_notes, figure_caption, figure_order, not_drawn


def prefetch_on(data: ReportData) -> bool:
    frame = data.results
    for knob in ("knob_prefetch_size", "knob_io_concurrency"):
        if knob in frame:
            values = pd.to_numeric(frame[knob], errors="coerce")
            if (values > 0).any() or frame[knob].astype(str).str.lower().eq("automatic").any():
                return True
    if "c_prefetch_reads" in frame:
        return bool((pd.to_numeric(frame["c_prefetch_reads"], errors="coerce") > 0).any())
    return False


def io_rows(data: ReportData) -> tuple[ReportData, dict[str, str]]:
    """The rows the I/O section shows (with the rate of their device bytes) and the words of
    their read counter (``reads.words``)."""
    data = dataclasses.replace(data, results=reads.with_device_rate(data.results))
    return data, reads.words(data.results, data.engine)


def io_html(data: ReportData) -> str:
    """The engine's reads in the words its declaration earns (``reads``), their rates and
    the hit ratios, beside the bytes that reached the device; the page's MB, said once."""
    data, names = io_rows(data)
    frame = data.results
    counted = names["c_physical_reads"].split(" (")[0]
    parts = [
        note(
            "A hit ratio is the share of page requests the pool served; it says nothing about "
            "how many reads reached the device or how fast they came. It is shown here only "
            f"beside the {counted} and their rate per second. "
            + html.escape(reads.counter_text(frame, data.engine))
            + f" Rates are in MB/s of a million bytes ({MB_TEXT}), the one megabyte of this "
            "page."
        )
    ]
    if "hit_ratio_sys" in frame:
        parts.append(
            note(
                f"Application hit ratio: 1 − ({counted} − prefetch reads) / logical reads; "
                f"system hit ratio: 1 − {counted} / logical reads, counting the pages prefetch "
                "read too. "
                "The system ratio goes negative when more pages are read into the pool than "
                "the application asks for, prefetch reading pages it never uses: the axes are "
                "not clipped, and a line marks 0 %."
            )
        )
    if prefetch_on(data) and "hit_ratio_sys" not in frame:
        parts.append(
            note("Prefetch is on but the engine gave no system hit ratio for these rows.", "warn")
        )
    if "c_physical_reads" not in frame and "physical_reads_per_s" not in frame:
        parts.append(note("The engine gave no read counters for these rows.", "warn"))
    caption = html.escape(figure_caption(data))
    for x in figure_order(data):
        if (skipped := not_drawn(data, x)) is not None:
            parts.append(skipped)
            continue
        fig = sweep_figures.io_figure(data, x, names)
        if fig is not None:
            name = label(x, data.engine)
            parts.append(f"<h3>I/O versus {html.escape(name)}</h3>")
            parts.append(
                plots.figure_html(
                    fig, f"{counted} and hit ratios vs {name}", caption + axis_notes(data, x)
                )
            )
    table = tables.io_html(data, names)
    if table:
        parts.append("<h3>Medians per point</h3>" + table)
    return "".join(parts)
