"""Timed metrics taken at one CPU speed: each repetition's CPU seconds scaled by the CPU
reference timed around it (``noise_cpu_probe_s``, ``tunelab.host.noise``).

On a virtual machine that shares its cores with other guests the CPU's speed changes by up
to 2x within minutes, with no stolen time to show for it. Measured on such a host (2 cores):
a 50 ms SQLite scan alternated with the 3 ms reference for 90 s; the two times correlated
at 0.89 (logs), and the scan's time divided by the reference's varied 1.25x (10th to 90th
percentile) where the scan's own time varied 1.76x. A claim's ratio and `tunelab compare`'s
use the scaled values, so that a point measured while the host was slow is not taken for an
effect.

Only the CPU seconds of a section move with the CPU's speed; its other seconds (a synced
write, a read from the device, a round trip) do not. A repetition's time ``t`` is taken apart
into the measuring process's CPU seconds ``c`` (``noise_client_cpu_s``: with an engine in the
measuring process, the engine's too), a server engine's CPU seconds ``e``
(``noise_engine_cpu_s``) and the rest ``w = max(t - c - e, 0)``; each CPU part is scaled by
its own CPUs' speed, ``s = reference / probe`` (the engine's from
``noise_engine_cpu_probe_s``, timed on the engine's CPUs):

    t' = t * (c * s_client + e * s_engine + w) / (c + e + w)

One client and its engine take turns (c + e <= t), so this is the sum of the parts; clients
that run alongside their engine (c + e > t) get the speeds' mean weighted by CPU seconds.
Rows from before the CPU seconds were recorded count an in-process engine's whole time as
CPU. A server engine's rows without its CPU seconds or its CPUs' reference are left as
measured.

That is what the model predicts; how much of it the rows bear out depends on the host (a
quiet CPU moves less than the 2 ms reference's own noise) and on the engine (a server's CPU
seconds include background threads that a client does not wait for). So the correction is
weighted, as a regression on a covariate is in the analysis of controlled experiments: the
weight is the least-squares slope of a repetition's log time on its predicted log slowdown,
both taken from its point's mean so that the knobs' effects do not enter, over every point
compared (a sweep for the claims, both runs' points for `tunelab compare`), limited to
[0, 1]. Measured on the lab's host, SQLite's CPU-bound sweeps had weights near 1, a
MariaDB sweep of synced inserts near 0.

A claim pairs its sides' rows by round (or pass): what the host did to a whole round cancels
in its ratios, while the probe's own noise on each row does not. Its weight is therefore
taken from the variation left within a point *and* within its pairing unit (``units``: the
slope on the two-way residuals), the only variation its paired test sees. On a quiet host
the probe's 2 ms varied by ±5 % from row to row while a scan's time varied by 0.3 %: the
point-centred weight (0.23, from drift that rounds share) made SQLite's per-round ratio of a
cold scan at 32K over 4K pages spread from 0.9715-0.9776 as measured to 0.9535-0.9796,
enough to leave its finding undecided; within rounds the probe explains little there, and
the weight says so.

The reference is the median probe over every row of the comparison (both sides), so that
the scaled values stay in the metric's unit and near the measured ones (the medians printed
beside a ratio), while ratios do not depend on it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

PROBE = "noise_cpu_probe_s"
ENGINE_PROBE = "noise_engine_cpu_probe_s"
CLIENT_CPU = "noise_client_cpu_s"
ENGINE_CPU = "noise_engine_cpu_s"
TIME = "elapsed_s"
SLOWDOWN = "cpu_slowdown_log"  # added by ``annotate``: the log slowdown taken out of a row
WEIGHT = "cpu_slowdown_weight"  # added by ``annotate``: the share of the model borne out
# The metrics scaled, with the power of the speed they carry: a time grows with the probe's
# time, a rate shrinks.
SCALED = {TIME: 1, "throughput_rows_s": -1}
IN_CLIENT = "client"  # cpus_engine of an engine that runs in the measuring process
NOTE = (
    "at one CPU speed (each repetition corrected by the CPU reference timed around it, "
    "weighted by how closely the repetitions follow it)"
)


def _numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def _positive(values: np.ndarray) -> bool:
    return bool((np.isfinite(values) & (values > 0)).all())


def _in_client(frame: pd.DataFrame) -> bool:
    return bool((frame["cpus_engine"].astype(str) == IN_CLIENT).all())


def applies(frames: Sequence[pd.DataFrame], metric: str) -> bool:
    """Whether ``metric`` is scaled on these rows: a timed metric; every row with its time and
    its probe; a server engine's rows also with both CPU seconds and its CPUs' probe."""
    if metric not in SCALED or not frames:
        return False
    for f in frames:
        if f.empty or any(c not in f for c in (metric, TIME, PROBE, "cpus_engine")):
            return False
        if not _positive(_numbers(f, PROBE)):
            return False
        if _in_client(f):
            continue
        if not _positive(_numbers(f, ENGINE_PROBE)):
            return False
        for column in (CLIENT_CPU, ENGINE_CPU):
            seconds = _numbers(f, column)
            if not (np.isfinite(seconds) & (seconds >= 0)).all():
                return False
    return True


def model_factor(f: pd.DataFrame, client_ref: float, engine_ref: float) -> np.ndarray:
    """t' / t for each row (see the module's docstring)."""
    t = _numbers(f, TIME)
    client_speed = client_ref / _numbers(f, PROBE)
    c = _numbers(f, CLIENT_CPU)
    if _in_client(f):
        c = np.where(np.isfinite(c), c, t)  # rows without it: all of the time was CPU
        e, engine_speed = np.zeros(len(f)), np.ones(len(f))
    else:
        e, engine_speed = _numbers(f, ENGINE_CPU), engine_ref / _numbers(f, ENGINE_PROBE)
    c = np.clip(c, 0.0, None)
    waited = np.clip(t - c - e, 0.0, None)
    whole = c + e + waited
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = (c * client_speed + e * engine_speed + waited) / whole
    return np.where(whole > 0, factor, 1.0)


def _slowdown(f: pd.DataFrame, client_ref: float, engine_ref: float) -> np.ndarray:
    """How much slower, in log, the model says the CPUs made each row (0: reference speed)."""
    return -np.log(model_factor(f, client_ref, engine_ref))


def _centred(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    return values - pd.Series(values).groupby(groups).transform("mean").to_numpy()


def _centred_both(values: np.ndarray, points: np.ndarray, units: np.ndarray) -> np.ndarray:
    """``values`` less their point's and their unit's effects (two-way residuals, by
    alternating the two centrings: exact at once for a complete design, a few passes for one
    with points left out of later rounds)."""
    out = values
    for _ in range(50):
        before = out
        out = _centred(_centred(out, points), units)
        if np.allclose(out, before, rtol=0, atol=1e-12):
            break
    return out


def weight(
    frames: Sequence[pd.DataFrame],
    slowdowns: Sequence[np.ndarray],
    units: Sequence[np.ndarray | None] | None = None,
) -> float:
    """The share of the model's slowdown the rows bear out: the slope of a repetition's log
    time on its predicted log slowdown, both taken from its point's mean (so that what the
    knobs do does not enter) and, given each row's pairing ``units``, from its unit's mean
    too, by least squares over every point, limited to [0, 1]."""
    times, xs, groups, unit_keys, unit_ok = [], [], [], [], []
    units = list(units) if units is not None else [None] * len(frames)
    for k, (f, x, u) in enumerate(zip(frames, slowdowns, units)):
        points = f["point_id"].astype(str).to_numpy() if "point_id" in f else np.full(len(f), "")
        times.append(np.log(_numbers(f, TIME)))
        xs.append(x)
        groups.append(np.char.add(f"{k}:", points.astype(str)))
        u = np.zeros(len(f)) if u is None else np.asarray(u, dtype=float)
        unit_keys.append(np.char.add(f"{k}:", u.astype(str)))
        unit_ok.append(np.isfinite(u))
    t, x, g = np.concatenate(times), np.concatenate(xs), np.concatenate(groups)
    ok = np.isfinite(t) & np.isfinite(x) & np.concatenate(unit_ok)
    if any(u is not None for u in units):
        keys = np.concatenate(unit_keys)[ok]
        rt, rx = _centred_both(t[ok], g[ok], keys), _centred_both(x[ok], g[ok], keys)
    else:
        rt, rx = _centred(t[ok], g[ok]), _centred(x[ok], g[ok])
    spread = float((rx * rx).sum())
    if spread <= 0:
        return 0.0
    return float(np.clip((rt * rx).sum() / spread, 0.0, 1.0))


def _references(frames: Sequence[pd.DataFrame]) -> tuple[float, float]:
    """The client's and a server engine's reference probe: the medians over every row."""
    client_ref = float(np.median(np.concatenate([_numbers(f, PROBE) for f in frames])))
    servers = [_numbers(f, ENGINE_PROBE) for f in frames if not _in_client(f)]
    engine_ref = float(np.median(np.concatenate(servers))) if servers else 1.0
    return client_ref, engine_ref


def shift(old: pd.DataFrame, new: pd.DataFrame) -> float:
    """How far apart, on the log scale, the model puts the CPU speeds two runs of a point were
    measured at: the difference of their rows' median slowdowns, before any weight; 0 where
    the scaling does not apply. The correction takes out only the share the rows bear out,
    and the reference is a few milliseconds of arithmetic: a CPU-bound point can move by more
    than it says (seen: SQLite inserts whose CPU seconds grew 1.77x while the probe's grew
    1.39x), so `tunelab compare` adds this shift to the point's noise rather than trusting the
    correction to have removed it."""
    if not applies([old, new], TIME):
        return 0.0
    client_ref, engine_ref = _references([old, new])
    a, b = (_slowdown(f, client_ref, engine_ref) for f in (old, new))
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        return 0.0
    return abs(float(np.median(b) - np.median(a)))


def annotate(
    frames: Sequence[pd.DataFrame], units: Sequence[np.ndarray | None] | None = None
) -> list[pd.DataFrame]:
    """The frames with ``SLOWDOWN`` (the log slowdown the scaling takes out: the model's,
    times the ``weight`` these rows bear out, within the pairing ``units`` where given) and
    ``WEIGHT``; unchanged where the scaling does not apply (``applies``)."""
    if not applies(frames, TIME):
        return list(frames)
    client_ref, engine_ref = _references(frames)
    slowdowns = [_slowdown(f, client_ref, engine_ref) for f in frames]
    theta = weight(frames, slowdowns, units)
    # Joined in one step: a row frame has hundreds of columns, and adding them one by one
    # makes pandas warn that the frame is fragmented.
    return [
        pd.concat(
            [
                f.drop(columns=[SLOWDOWN, WEIGHT], errors="ignore"),
                pd.DataFrame({SLOWDOWN: theta * x, WEIGHT: theta}, index=f.index),
            ],
            axis=1,
        )
        for f, x in zip(frames, slowdowns)
    ]


def values(frames: Sequence[pd.DataFrame], metric: str) -> list[np.ndarray] | None:
    """Each frame's ``metric`` at one CPU speed, row for row (NaN stays NaN); None where it
    does not apply (``applies``): the caller then uses the values as measured. Frames that
    ``annotate`` marked keep their weight; others are annotated together here."""
    if not applies(frames, metric):
        return None
    if not all(SLOWDOWN in f for f in frames):
        frames = annotate(frames)
    slowdowns = [_numbers(f, SLOWDOWN) for f in frames]
    reference = float(np.median(np.concatenate(slowdowns)))
    power = SCALED[metric]
    return [_numbers(f, metric) * np.exp(reference - x) ** power for f, x in zip(frames, slowdowns)]


def weight_of(frame: pd.DataFrame) -> float | None:
    """The weight ``annotate`` gave these rows (None: not annotated)."""
    if WEIGHT not in frame or frame.empty:
        return None
    return float(pd.to_numeric(frame[WEIGHT], errors="coerce").iloc[0])


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
