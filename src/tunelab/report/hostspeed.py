"""Timed metrics taken at one CPU speed: each repetition's time scaled by the CPU reference
timed around it (``noise_cpu_probe_s``, ``tunelab.noise``).

On a virtual machine that shares its cores with other guests the CPU's speed changes by up
to 2x within minutes, with no stolen time to show for it. Measured on such a host (2 cores):
a 50 ms SQLite scan alternated with the 3 ms reference for 90 s; the two times correlated
at 0.89 (logs), and the scan's time divided by the reference's varied 1.25x (10th to 90th
percentile) where the scan's own time varied 1.76x. A claim's ratio and `tunelab compare`'s
use the scaled values, so that a point measured while the host was slow is not taken for an
effect.

Only where the engine runs in the measuring process (``cpus_engine`` is ``client``): the
reference runs on the client's CPU, which then does all of the work. A server engine works
on other CPUs, whose speed the probe does not see; its values are left as measured.

The scale is ``reference / probe``, the reference being the median probe over every row of
the comparison (both sides), so that the scaled values stay in the metric's unit and near
the measured ones (the medians printed beside a ratio), while ratios do not depend on it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

PROBE = "noise_cpu_probe_s"
# The metrics scaled, with the power of the speed they carry: a time grows with the probe's
# time, a rate shrinks.
SCALED = {"elapsed_s": 1, "throughput_rows_s": -1}
IN_CLIENT = "client"  # cpus_engine of an engine that runs in the measuring process
NOTE = "at one CPU speed (each repetition scaled by the CPU reference timed around it)"


def applies(frames: Sequence[pd.DataFrame], metric: str) -> bool:
    """Whether ``metric`` is scaled on these rows: a timed metric, every row with its probe,
    every row of an engine that ran in the measuring process."""
    if metric not in SCALED or not frames:
        return False
    for f in frames:
        if f.empty or metric not in f or PROBE not in f or "cpus_engine" not in f:
            return False
        if not (f["cpus_engine"].astype(str) == IN_CLIENT).all():
            return False
        probe = pd.to_numeric(f[PROBE], errors="coerce").to_numpy(dtype=float)
        if not (np.isfinite(probe) & (probe > 0)).all():
            return False
    return True


def values(frames: Sequence[pd.DataFrame], metric: str) -> list[np.ndarray] | None:
    """Each frame's ``metric`` at one CPU speed, row for row (NaN stays NaN); None where it
    does not apply (``applies``): the caller then uses the values as measured."""
    if not applies(frames, metric):
        return None
    probes = [pd.to_numeric(f[PROBE], errors="coerce").to_numpy(dtype=float) for f in frames]
    reference = float(np.median(np.concatenate(probes)))
    power = SCALED[metric]
    return [
        pd.to_numeric(f[metric], errors="coerce").to_numpy(dtype=float) * (reference / p) ** power
        for f, p in zip(frames, probes)
    ]


def spread(frame: pd.DataFrame) -> tuple[float, float] | None:
    """The probe's median seconds and its 90th over its 10th percentile, over the rows that
    carry it: how much the host's CPU speed moved during a run; None without probes."""
    if PROBE not in frame:
        return None
    probe = pd.to_numeric(frame[PROBE], errors="coerce").dropna()
    probe = probe[probe > 0]
    if len(probe) < 2:
        return None
    return float(probe.median()), float(probe.quantile(0.9) / probe.quantile(0.1))
