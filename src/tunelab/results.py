"""Tidy result rows: one row per repetition, written atomically, never silently overwritten.

Column groups (a row is a flat dict):
- identity: sweep, sweep_file, point_id, rep, engine, engine_version
- knobs: ``knob_<name>`` as asked, ``applied_<name>`` as read back from the engine
- workload: workload, ``wl_<param>`` (e.g. wl_selectivity, wl_rows, wl_threads), dataset_rows, seed
- measurement: rows_touched, elapsed_s, throughput_rows_s
- cache: cache_requested, cache_achieved, cache_method, resident_fraction
- counters (deltas over the timed section): ``c_<counter>`` (c_logical_reads, c_physical_reads,
  c_prefetch_reads, c_os_read_bytes, ...), and derived: hit_ratio_app, hit_ratio_sys,
  physical_reads_per_s, read_mb_s
- sizes: page_size_bytes, data_bytes (table + index bytes), written_bytes
- provenance: host_cpu, host_cores, host_mem_gib, host_kernel, host_fs, tunelab_version,
  git_commit, started_at, engine_starts
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from tunelab import atomic

KNOB_PREFIX = "knob_"
APPLIED_PREFIX = "applied_"
WORKLOAD_PREFIX = "wl_"
COUNTER_PREFIX = "c_"


class ResultExistsError(FileExistsError):
    pass


def write_rows(rows: Iterable[dict], path: Path, overwrite: bool = False) -> Path:
    """Write rows as CSV at ``path`` atomically (temp file + rename in the same directory)."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise ResultExistsError(f"{path}: results exist already; remove the file to measure again")
    return atomic.write_csv(pd.DataFrame(list(rows)), path)


def read_results(paths: Iterable[Path | str]) -> pd.DataFrame:
    frames = [pd.read_csv(p) for p in paths]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True, sort=False)


def knob_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith(KNOB_PREFIX)]


def swept_columns(frame: pd.DataFrame) -> list[str]:
    """Knob and workload-parameter columns that take more than one value in the frame."""
    cols = [c for c in frame.columns if c.startswith((KNOB_PREFIX, WORKLOAD_PREFIX))]
    return [c for c in cols if frame[c].nunique(dropna=False) > 1]
