"""Human names, with units, for result columns; and the one number format all tables use."""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

from tunelab.results import APPLIED_PREFIX, COUNTER_PREFIX, KNOB_PREFIX, WORKLOAD_PREFIX

# One megabyte per context, always named: the rows' rates use 10^6 bytes; the device
# calibration uses IBM's 1,024,000 bytes (MB_IBM_ORIGIN); sizes of pools and tables are
# binary (KiB, MiB).
MB_DECIMAL = "MB = 10⁶ B"
MB_IBM = "IBM MB = 1,024,000 B"
MB_IBM_BYTES = 1_024_000
MB_IBM_ORIGIN = "the MB of DB2's TRANSFERRATE formula"
BINARY_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))

# Measured and derived columns. Hit ratios are fractions shown as percent; a system hit ratio
# can fall below 0 (prefetch reading pages the application never asks for).
METRICS: dict[str, str] = {
    "elapsed_s": "response time (s)",
    "throughput_rows_s": "throughput (rows/s)",
    "rows_touched": "rows touched",
    "c_logical_reads": "logical reads (pages)",
    "c_physical_reads": "physical reads (pages)",
    "c_prefetch_reads": "prefetch reads (pages)",
    "c_read_wait_ms": "wait for reads (ms)",
    "c_os_read_bytes": "bytes read from the device",
    "physical_reads_per_s": "physical reads per second",
    "read_mb_s": f"read rate (MB/s, {MB_DECIMAL})",
    # The device of a point's own (os_read_ahead): its requests after the block layer merged
    # them, read-ahead included.
    "c_dev_read_requests": "read requests to the device",
    "c_dev_read_bytes": "bytes the device read",
    "c_dev_read_ms": "device read time (ms)",
    "dev_read_request_kib": "KiB per read request",
    "dev_read_mb_s": f"device read rate (MB/s, {MB_DECIMAL})",
    "data_mb_s": f"data rate (MB/s, {MB_DECIMAL})",
    "hit_ratio": "hit ratio",
    "hit_ratio_app": "hit ratio, application",
    "hit_ratio_sys": "hit ratio, system",
    "resident_fraction": "resident fraction after cache preparation",
    "achieved_mb_s": f"achieved (MB/s, {MB_IBM})",
    "device_mb_s": f"device limit (MB/s, {MB_IBM})",
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
def _engine_unit(engine: str, knob: str) -> str:
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
            unit = _engine_unit(engine, name) if engine else ""
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


def ibm_mb_label(mb_bytes: float | None) -> str:
    """The MB of a calibration, named: IBM's unless the file says otherwise."""
    if mb_bytes is None or mb_bytes == MB_IBM_BYTES:
        return MB_IBM
    return f"MB = {fmt(int(mb_bytes))} B"


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
    return re.sub(r"selectivity ([0-9.e-]+)",
                  lambda m: f"selectivity {float(m.group(1)) * 100:.3g} %", label)  # fmt: skip


def figures_text(v: dict[str, Any]) -> list[str]:
    """A verdict's figures, one per context: "cold 1.03x [0.98, 1.08]" or "crossing 0.1 %"
    (selectivities as percentages, the unit the assignment uses)."""
    if "contexts" not in v:  # a verdict file from before contexts were stored
        found = _RATIO_RE.search(str(v.get("evidence", "")))
        return [f"{found.group(1)}x [{found.group(2)}, {found.group(3)}]"] if found else []
    out = []
    for c in v.get("contexts") or []:
        label = _percent_selectivity(str(c.get("label") or "").replace("cache ", ""))
        if c.get("ratio"):
            r, lo, hi = c["ratio"]
            text = f"{r:.3g}x [{lo:.3g}, {hi:.3g}]"
        elif c.get("crossing") is not None:
            text = f"crossing ≈{fmt_selectivity_percent(float(c['crossing']))}"
        else:
            continue
        out.append(f"{label} {text}".strip())
    return out


def fmt_selectivity_percent(value: float) -> str:
    """A selectivity in percent, two significant digits: an interpolation between swept
    points claims no more (every page quotes a crossing with this one function)."""
    return f"{float(f'{value * 100:.2g}'):g} %"
