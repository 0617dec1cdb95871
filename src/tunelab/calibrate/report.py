"""Tables for the report: measured figures beside the defaults, and achieved I/O beside the device.

``section(cal)`` gives the report's calibration section (a DataFrame and the DB2 statements);
``achieved_vs_device(results, cal)`` puts each result row's I/O next to what the device can
do — a scan's table bytes per second against DEVICE READ RATE, an insert's written bytes per
second against the write model at the size of one commit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tunelab.calibrate import db2sql, model
from tunelab.calibrate.calibration import Calibration
from tunelab.workloads import WRITES

SCANS = ("scan",)


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


def _write_model(cal: Calibration) -> model.WriteFit:
    rate = None if cal.write_rate_mb_s is None else cal.write_rate_mb_s * cal.mb_bytes
    return model.WriteFit(cal.write_overhead_ms / 1000, rate, cal.write_fit_r2 or math.nan, 0)


def achieved_vs_device(results: pd.DataFrame, cal: Calibration) -> pd.DataFrame:
    """Add achieved_mb_s, device_mb_s, device_fraction and device_basis to result rows.

    Scans (workload ``scan``): data_bytes (table + index) / elapsed_s against the DEVICE READ
    RATE. Writes (``insert``/``update``): written_bytes / elapsed_s against the write model's
    throughput for one commit's bytes, where a commit holds ``wl_commit_every`` of ``wl_rows``
    rows; without those columns, against the model's transfer rate. Other rows get NaN.
    MB is the calibration's (1,024,000 bytes).
    """
    out = results.copy()
    n = len(out)
    mb = float(cal.mb_bytes)
    workload = out["workload"].astype(str) if "workload" in out else pd.Series([""] * n)
    elapsed = pd.to_numeric(out["elapsed_s"], errors="coerce") if "elapsed_s" in out else np.nan

    def column(name: str) -> pd.Series:
        if name in out:
            return pd.to_numeric(out[name], errors="coerce")
        return pd.Series(np.nan, index=out.index)

    is_scan = workload.isin(SCANS).to_numpy()
    is_write = workload.isin(WRITES).to_numpy()
    achieved = np.where(
        is_scan,
        column("data_bytes") / elapsed / mb,
        np.where(is_write, column("written_bytes") / elapsed / mb, np.nan),
    )

    fit = _write_model(cal)
    commits = np.ceil(column("wl_rows") / column("wl_commit_every"))
    per_commit = (column("written_bytes") / commits).to_numpy()
    at_commit = np.array([fit.throughput_bytes_s(b) / mb if b > 0 else np.nan for b in per_commit])
    asymptote = np.nan if cal.write_rate_mb_s is None else cal.write_rate_mb_s
    write_limit = np.where(np.isnan(at_commit), asymptote, at_commit)
    device = np.where(is_scan, cal.device_read_rate_mb_s, np.where(is_write, write_limit, np.nan))

    basis = np.full(n, "", dtype=object)
    basis[is_scan] = "device read rate"
    for i in np.flatnonzero(is_write):
        if not np.isnan(at_commit[i]):
            basis[i] = f"write model at {per_commit[i] / 1024:.0f} KiB per commit"
        elif not np.isnan(asymptote):
            basis[i] = "write model transfer rate"

    out["achieved_mb_s"] = achieved
    out["device_mb_s"] = device
    out["device_fraction"] = achieved / device
    out["device_basis"] = basis
    return out
