"""A calibration's tables: measured figures beside the product's defaults, and the text of
``tunelab calibrate``.

``section(cal)`` gives the report's calibration section (a DataFrame and the DB2 statements).
"""

from __future__ import annotations

import pandas as pd

from tunelab.calibrate import db2sql, model
from tunelab.calibrate.calibration import Calibration


def measured_vs_default(cal: Calibration) -> pd.DataFrame:
    """One row per figure: measured value, the product's default, and their ratio."""
    d_oh, d_drr = model.DB2_DEFAULT_OVERHEAD_MS, model.DB2_DEFAULT_DEVICE_READ_RATE_MB_S
    rows: list[tuple[str, str, float | None, float | None, str]] = [
        ("OVERHEAD", "ms", cal.overhead_ms, d_oh, "DB2"),
        ("DEVICE READ RATE", "MB/s", cal.device_read_rate_mb_s, d_drr, "DB2"),
    ]
    for pb, tr in sorted(cal.transferrate_ms.items()):
        rows.append(
            (f"TRANSFERRATE {pb // 1024}K", "ms/page", tr, model.transferrate_ms(d_drr, pb), "DB2")
        )
    for m in cal.measurements:
        if m["kind"] == "random_read":
            pb = m["block_bytes"]
            rows.append(
                (
                    f"random {pb // 1024}K read (OVERHEAD + TRANSFERRATE)",
                    "ms",
                    m["mean_lat_ms"],
                    d_oh + model.transferrate_ms(d_drr, pb),
                    "DB2",
                )
            )
    rows += [
        ("write overhead (per synchronous write)", "ms", cal.write_overhead_ms, None, ""),
        ("write transfer rate", "MB/s", cal.write_rate_mb_s, None, ""),
        ("write model fit r²", "", cal.write_fit_r2, None, ""),
        (
            "random / sequential 8K page time (uncached)",
            "ratio",
            cal.pg_random_seq_ratio,
            model.PG_DEFAULT_RANDOM_PAGE_COST / (1 - model.PG_ASSUMED_CACHED),
            "PostgreSQL",
        ),
        (
            "random_page_cost (seq_page_cost = 1, 90% cached)",
            "cost",
            cal.pg_random_page_cost,
            model.PG_DEFAULT_RANDOM_PAGE_COST,
            "PostgreSQL",
        ),
    ]
    frame = pd.DataFrame(rows, columns=["figure", "unit", "measured", "default", "default_of"])
    frame["measured"] = pd.to_numeric(frame["measured"])
    frame["default"] = pd.to_numeric(frame["default"])
    frame["measured_over_default"] = frame["measured"] / frame["default"]
    return frame


def measurements_table(cal: Calibration) -> pd.DataFrame:
    """Every fio measurement with its mean, spread across repetitions and percentiles."""
    rows = []
    for m in cal.measurements:
        rows.append(
            {
                "measurement": m["name"],
                "kind": m["kind"],
                "block_kib": m["block_bytes"] / 1024,
                "repetitions": m["repetitions"],
                "mean_lat_ms": m["mean_lat_ms"],
                "mean_mb_s": m["mean_mb_s"],
                "cv": m["cv"],
                "cv_of": m["cv_of"],
                **{f"{k}_ms": v for k, v in m["percentiles_ms"].items()},
            }
        )
    return pd.DataFrame(rows)


def section(cal: Calibration, **statement_args) -> tuple[pd.DataFrame, str]:
    """The report's calibration section: the comparison table and ready-to-run statements."""
    return measured_vs_default(cal), db2sql.statements(cal, **statement_args)


def text(cal: Calibration) -> str:
    """The section as plain text, for the command line."""
    frame, sql = section(cal)
    mode = "direct I/O" if cal.direct_io else "BUFFERED I/O (direct I/O refused)"
    head = (
        f"calibration of {cal.data_dir} on {cal.host}: {cal.filesystem}"
        f"{', device ' + cal.device if cal.device else ''}, {mode}, "
        f"{cal.elapsed_s:.1f} s{' (quick)' if cal.quick else ''}\n"
        f"MB = {cal.mb_bytes:,} bytes (the unit of DB2's TRANSFERRATE formula)\n"
    )
    shown = frame.drop(columns="default_of").to_string(
        index=False, float_format=lambda v: f"{v:.4g}", na_rep="-"
    )
    warn = "".join(f"warning: {w}\n" for w in cal.warnings)
    return f"{head}\n{shown}\n\n{sql}{warn}"
