"""Human names, with units, for result columns; and the one number format all tables use."""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

from tunelab.store.results import APPLIED_PREFIX, COUNTER_PREFIX, KNOB_PREFIX, WORKLOAD_PREFIX

# One megabyte on a page, defined there once (MB_TEXT): 10^6 bytes. A source's figure in
# another MB (a calibration's, 1,024,000 bytes) is converted to it (page_mb). Sizes of pools
# and tables are binary (KiB, MiB), each named where it is used.
MB_BYTES = 10**6
MB_TEXT = "MB = 10⁶ B"
BINARY_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))

# The engine's read counter in words that claim no more than any engine's counter is: reads
# it asked of the OS. Where its declaration earns it, a page says physical reads instead
# (report.reads).
READS_DEVICE = {
    "c_physical_reads": "physical reads (pages)",
    "physical_reads_per_s": "physical reads per second",
    "read_mb_s": "physical read rate (MB/s)",
}
READS_OS = {
    "c_physical_reads": "reads from the OS (pages; page cache or device)",
    "physical_reads_per_s": "reads from the OS per second",
    "read_mb_s": "rate of reads from the OS (MB/s)",
}

# Measured and derived columns. Hit ratios are fractions shown as percent; a system hit ratio
# can fall below 0 (prefetch reading pages the application never asks for).
METRICS: dict[str, str] = {
    "elapsed_s": "response time (s)",
    "throughput_rows_s": "throughput (rows/s)",
    "rows_touched": "rows touched",
    "c_logical_reads": "logical reads (pages)",
    **READS_OS,
    "c_prefetch_reads": "prefetch reads (pages)",
    "c_read_wait_ms": "wait for reads (ms)",
    "c_os_read_bytes": "bytes read from the device",
    "os_read_mb_s": "rate of bytes read from the device (MB/s)",
    # The device of a point's own (os_read_ahead): its requests after the block layer merged
    # them, read-ahead included.
    "c_dev_read_requests": "read requests to the device",
    "c_dev_read_bytes": "bytes the device read",
    "c_dev_read_ms": "device read time (ms)",
    "dev_read_request_kib": "KiB per read request",
    "dev_read_mb_s": "device read rate (MB/s)",
    "data_mb_s": "data rate (MB/s)",
    "hit_ratio": "hit ratio",
    "hit_ratio_app": "hit ratio, application",
    "hit_ratio_sys": "hit ratio, system",
    "resident_fraction": "resident fraction after cache preparation",
    "achieved_mb_s": "achieved (MB/s)",
    "device_mb_s": "device limit (MB/s)",
    "device_fraction": "achieved / device limit",
    "written_bytes": "bytes written",
    "data_bytes": "data size (bytes)",
    "page_size_bytes": "page size (bytes)",
    "engine_elapsed_s": "engine time (s)",
    "client_share": "client share of the response time",
    "queries": "timed statements",
    "q_first_s": "first query (s)",
    "q_rest_median_s": "later queries, median (s)",
    "q_p50_s": "p50 (s)",
    "q_p95_s": "p95 (s)",
    "q_p99_s": "p99 (s)",
    "q_max_s": "slowest (s)",
    "time_s": "time (s)",
    "time_ms": "time (ms)",
}

# Readable names of the engines' knobs (a test checks each is some engine's knob); the
# engine's own Knob.unit is added when the engine can be imported.
KNOBS: dict[str, str] = {
    "buffer_pool": "buffer pool",
    "page_size": "page size",
    "prefetch_size": "prefetch size",
    "extent_size": "extent size",
    "read_ahead_threshold": "read-ahead threshold",
    "random_read_ahead": "random read-ahead",
    "os_read_ahead": "kernel read-ahead",
    "io_concurrency": "I/O concurrency (prefetch requests)",
    "lock_granularity": "lock granularity",
    "index": "index type",
    "direct_io": "direct I/O",
    "overhead_ms": "OVERHEAD",
    "transferrate_ms": "TRANSFERRATE",
}

WORKLOAD_PARAMS: dict[str, str] = {
    "selectivity": "selectivity (fraction of rows)",
    "rows": "rows written",
    "threads": "client threads",
    "commit_every": "rows per commit",
    "queries": "queries per run",
    "lookups": "lookups per run",
    "fetch": "rows to the client (all, or only a count)",
}

OTHER: dict[str, str] = {
    "cache_requested": "cache",
    "cache_achieved": "cache achieved",
    "workload": "workload",
    "ratio": "hit ratio seen by",
    "engine": "engine",
    "access_mode": "access",
    "access_path": "access path",
    "access_expected": "access path the index knob built",
}


@cache
def knob_unit(engine: str, knob: str) -> str:
    """The unit an engine declares for a knob, or "" when the engine module is unavailable."""
    try:
        from tunelab import engines

        return engines.info(engine).knobs[knob].unit or ""
    except Exception:  # engine drivers are optional; a label is not worth failing for
        return ""


def label(column: str, engine: str | None = None) -> str:
    """A readable axis/table label for a result column."""
    if column in METRICS:
        return METRICS[column]
    if column in OTHER:
        return OTHER[column]
    for prefix in (KNOB_PREFIX, APPLIED_PREFIX):
        if column.startswith(prefix):
            name = column[len(prefix) :]
            text = KNOBS.get(name, name.replace("_", " "))
            unit = knob_unit(engine, name) if engine else ""
            text = f"{text} ({unit})" if unit else text
            return text if prefix == KNOB_PREFIX else f"{text}, as applied"
    if column.startswith(WORKLOAD_PREFIX):
        name = column[len(WORKLOAD_PREFIX) :]
        return WORKLOAD_PARAMS.get(name, name.replace("_", " "))
    if column.startswith(COUNTER_PREFIX):
        return column[len(COUNTER_PREFIX) :].replace("_", " ")
    return column.replace("_", " ")


def is_ratio(column: str) -> bool:
    return column.startswith("hit_ratio") or column in ("resident_fraction", "client_share")


def fmt(value: object) -> str:
    """Four significant digits, thousands separated from 10 000 up; "—" for missing."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if value.is_integer() and abs(value) < 1e15:
            return fmt(int(value))
        if abs(value) >= 10_000:
            return f"{value:,.0f}"
        return f"{value:.4g}"
    try:  # numpy scalars
        import numpy as np

        if isinstance(value, np.integer):
            return fmt(int(value))
        if isinstance(value, np.floating):
            return fmt(float(value))
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    return str(value)


def page_mb(value: float, mb_bytes: float) -> float:
    """A figure in MB of ``mb_bytes`` bytes (a calibration's MB/s), in the page's MB."""
    return float(value) * float(mb_bytes) / MB_BYTES


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def unit_text(unit: tuple[str, int]) -> str:
    """A binary unit with its definition: "MiB = 2²⁰ B"."""
    name, size = unit
    return f"{name} = 2{str(size.bit_length() - 1).translate(_SUPERSCRIPT)} B"


def binary_unit(nbytes: float) -> tuple[str, int]:
    """The largest binary unit (GiB, MiB, KiB, else B) not above ``nbytes``."""
    for name, size in BINARY_UNITS:
        if nbytes >= size:
            return name, size
    return "B", 1


def fmt_bytes(nbytes: float, unit: tuple[str, int] | None = None) -> str:
    """Bytes in one binary unit: "16 MiB", "0.0625 MiB" when the unit is given."""
    if nbytes is None or nbytes != nbytes:
        return "—"
    name, size = unit or binary_unit(nbytes)
    return f"{fmt(float(nbytes) / size)} {name}"


def fmt_percent(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{100 * value:.1f} %"


_RATIO_RE = re.compile(r"ratio ([0-9.]+) \[([0-9.]+), ([0-9.]+)\]")


def _percent_selectivity(label: str) -> str:
    """A context's selectivity as the assignment gives it, in percent."""
    return re.sub(
        r"selectivity ([0-9.e-]+)", lambda m: f"selectivity {float(m.group(1)) * 100:.3g} %", label
    )


def figures_text(v: dict[str, Any]) -> list[str]:
    """A verdict's figures, one per context: "cold 1.03x [0.98, 1.08]" or "crossing 0.1 %"
    (selectivities as percentages, the unit the assignment uses)."""
    if "contexts" not in v:  # a verdict file from before contexts were stored
        found = _RATIO_RE.search(str(v.get("evidence", "")))
        return [f"{found.group(1)}x [{found.group(2)}, {found.group(3)}]"] if found else []
    out = []
    for c in v.get("contexts") or []:
        label = context_label(str(c.get("label") or ""))
        if c.get("ratio"):
            r, lo, hi = c["ratio"]
            text = f"{r:.3g}x [{lo:.3g}, {hi:.3g}]"
        elif c.get("crossing") is not None:
            text = f"crossing ≈{fmt_selectivity_percent(float(c['crossing']))}"
        else:
            continue
        out.append(f"{label} {text}".strip())
    return out


def context_label(label: str) -> str:
    """A verdict's context as the pages name it: "cold", "selectivity 10 %"."""
    return _percent_selectivity(label.replace("cache ", ""))


def fmt_selectivity_percent(value: float) -> str:
    """A selectivity in percent, two significant digits: an interpolation between swept
    points claims no more (every page quotes a crossing with this one function)."""
    return f"{float(f'{value * 100:.2g}'):g} %"
