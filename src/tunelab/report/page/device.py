"""Achieved I/O beside the device (a sweep page's section): each result row's I/O next to
what the device can do by its calibration — a scan's table bytes per second against DEVICE
READ RATE, an insert's written bytes per second against the write model at the size of one
commit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tunelab.calibrate import model
from tunelab.calibrate.calibration import Calibration
from tunelab.sweep.workloads import WRITES

SCANS = ("scan",)


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
