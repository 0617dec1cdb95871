"""Tidy result rows: one row per repetition, written atomically, never silently overwritten.

Column groups (a row is a flat dict):
- identity: sweep, sweep_file, point_id, rep, engine, engine_version
- knobs: ``knob_<name>`` as asked, ``applied_<name>`` as read back from the engine
- workload: workload, ``wl_<param>`` (e.g. wl_selectivity, wl_rows, wl_threads), dataset_rows, seed
- measurement: rows_touched, elapsed_s, throughput_rows_s
- cache: cache_requested, cache_achieved, cache_method, resident_fraction; for reads
  cold_queries, q_first_read_bytes, q_rest_median_read_bytes
- counters (deltas over the timed section): ``c_<counter>`` (c_logical_reads, c_physical_reads,
  c_prefetch_reads, c_os_read_bytes, ...), and derived: hit_ratio_app, hit_ratio_sys,
  physical_reads_per_s, read_mb_s
- sizes: page_size_bytes, data_bytes (table + index bytes), written_bytes
- provenance: host_name, host_cpu, host_cores, host_mem_gib, host_kernel, host_fs,
  slurm_job_id and slurm_node (empty outside a SLURM job), tunelab_version, git_commit,
  started_at, engine_starts
- order (a sweep measured in rounds, ``tunelab.measure.sweeprun``): round, order_in_round,
  order_mode, pass, block

A point's file has a check file beside it (``<point>.check.json``: sha256, bytes, rows,
columns, the repetitions got and those asked), written after it; ``verify_points`` checks
point files against their check files and each other before a merge.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tunelab.host import atomic, devprobe, noise

KNOB_PREFIX = "knob_"
APPLIED_PREFIX = "applied_"
WORKLOAD_PREFIX = "wl_"
COUNTER_PREFIX = "c_"
CHECK_SUFFIX = ".check.json"
REJECTED_SUFFIX = ".rejected"
RETIRED_SUFFIX = ".retired"  # a point its sweep file no longer has (retire_points_not_in)
CHECK_FORMAT = 1
# A sweep's rows as measured in rounds, beside its point files until each point has its own.
ROUNDS_FILE = "rounds.csv.gz"
# A standby's lags after a timed section, and the round trip of its link measured when the
# point was set up, where the point has one (Engine.gauges).
REPLICATION_GAUGES = ("repl_write_lag_ms", "repl_flush_lag_ms", "repl_replay_lag_ms", "link_rtt_ms")
# The replication knobs of the engines with a standby (by default: none), which that engine's
# points measured before it had them lack.
REPLICATION_KNOB_COLUMNS = tuple(
    f"{prefix}{knob}"
    for prefix in (KNOB_PREFIX, APPLIED_PREFIX)
    for knob in ("sync_mode", "network_rtt_ms")
)
# Columns every point's rows have, whatever the engine and workload.
REQUIRED_COLUMNS = ("sweep", "point_id", "rep", "engine", "workload", "elapsed_s")
# A read's statements under a cold cache, each after an eviction of its own: how many met a
# cold cache, and the bytes the first and (median) the later ones read (empty when warm).
COLD_COLUMNS = ("cold_queries", "q_first_read_bytes", "q_rest_median_read_bytes")
# Columns a newer lab records that points measured by an older one lack: a sweep whose old
# points are kept and whose missing ones are measured anew merges (the old rows get blanks),
# instead of refusing the new points for want of a majority, again at every run.
ADDED_COLUMNS = frozenset(
    {
        "table_build",
        "pass",
        "block",
        "slurm_job_id",
        "slurm_node",
        *noise.PLACEMENT_COLUMNS,
        *COLD_COLUMNS,
        *noise.NOISE_COLUMNS,
        *devprobe.COLUMNS,
        *REPLICATION_GAUGES,
        *REPLICATION_KNOB_COLUMNS,
    }
)


class ResultExistsError(FileExistsError):
    pass


def write_rows(rows: Iterable[dict], path: Path, overwrite: bool = False) -> Path:
    """Write rows as CSV at ``path`` atomically (temp file + rename in the same directory)."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise ResultExistsError(f"{path}: results exist already; remove the file to measure again")
    return atomic.write_csv(pd.DataFrame(list(rows)), path)


# Provenance that is text but may read as a number: a hex digest such as 2443e27572355759
# parses as a float (here inf) and would be written back so. Every reader of rows names them.
TEXT_COLUMNS = ("findings_digest", "git_commit", "tunelab_version", "engine_version", "image")


def read_csv(path: Path | str | Any, **kwargs: Any) -> pd.DataFrame:
    """A file of rows (a point's, a sweep's, a round's), its text provenance kept as text."""
    return pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS}, **kwargs)


def read_results(paths: Iterable[Path | str]) -> pd.DataFrame:
    return concat(read_csv(p) for p in paths)


def concat(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True, sort=False)


# A point's checksum lives in a sidecar file, not in a trailer line of the CSV: every reader
# of the CSV (pandas, the report, a spreadsheet) would have to skip a trailer, and a cut file
# loses its trailer with its rows. The sidecar is written after the CSV, so a kill between
# the two leaves a CSV without a check file: never verified, so not counted as measured.


def check_path(csv: Path | str) -> Path:
    """The check file of a point's results file."""
    return Path(csv).with_suffix(CHECK_SUFFIX)


def write_point(
    rows: Sequence[dict], path: Path | str, repetitions: int, repetitions_min: int | None = None
) -> Path:
    """Write a finished point's rows at ``path``, then its check file, both atomically.
    A point has one row per round, ``repetitions`` of them, or between ``repetitions_min``
    and ``repetitions`` where measuring stops once the claims are decided (ValueError
    otherwise). Verified results are never overwritten; a file that fails verification
    (e.g. left without its check file) is set aside first, kept for inspection."""
    path = Path(path)
    low = repetitions if repetitions_min is None else repetitions_min
    if not low <= len(rows) <= repetitions:
        asked = f"{low} to {repetitions}" if low != repetitions else str(repetitions)
        raise ValueError(f"{path}: {len(rows)} rows, expected {asked} (one per repetition)")
    if path.exists():
        problem = verify_point(path).problem
        if problem is None:
            raise ResultExistsError(
                f"{path}: results exist already; remove the file to measure again"
            )
        set_aside(path)
    check = check_path(path)
    check.unlink(missing_ok=True)  # a stale check file must never vouch for the new CSV
    frame = pd.DataFrame(list(rows))
    data = atomic.csv_bytes(frame)
    atomic.write_bytes(path, data)
    record = {
        "format": CHECK_FORMAT,
        "file": path.name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "rows": len(frame),
        "repetitions": len(frame),  # what the point got; verification counts rows against it
        "repetitions_asked": [low, repetitions],
        "columns": [str(c) for c in frame.columns],
        "point_id": _single(frame, "point_id"),
    }
    atomic.write_bytes(check, (json.dumps(record, indent=1) + "\n").encode())
    return path


def _single(frame: pd.DataFrame, column: str) -> str | None:
    values = frame[column].dropna().unique() if column in frame.columns else []
    return str(values[0]) if len(values) == 1 else None


@dataclass
class PointCheck:
    """One point file's verification: its rows when they can be read, and what is wrong
    (None when nothing is)."""

    path: Path
    frame: pd.DataFrame | None = None
    problem: str | None = None


def verify_point(path: Path | str) -> PointCheck:
    """Check one point file against its check file: bytes and checksum, then that it parses,
    has the recorded columns and the required ones, one row per repetition, repetitions
    numbered 0..N-1 in order and one point id. Stops at the first problem."""
    path = Path(path)
    result = PointCheck(path)
    result.problem = _verify(path, result)
    return result


def _verify(path: Path, result: PointCheck) -> str | None:
    check = check_path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not check.exists():
        return f"no check file {check.name}: it was never verified (an interrupted or older run)"
    try:
        record = json.loads(check.read_text())
        sha, size = str(record["sha256"]), int(record["bytes"])
        reps, rows = int(record["repetitions"]), int(record["rows"])
        low, high = map(int, record.get("repetitions_asked", (reps, reps)))
        recorded = [str(c) for c in record["columns"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"check file {check.name} cannot be read ({type(exc).__name__}: {exc})"
    if len(data) < size:
        return f"truncated: {len(data)} of {size} bytes"
    if len(data) != size:
        return f"{len(data)} bytes, {size} were written"
    if hashlib.sha256(data).hexdigest() != sha:
        return "changed after it was written: its sha256 differs from its check file's"
    try:
        frame = read_csv(io.BytesIO(data))
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' parser errors are ValueErrors
        return f"cannot be parsed ({(str(exc).splitlines() or [type(exc).__name__])[0]})"
    result.frame = frame
    columns = [str(c) for c in frame.columns]
    if columns != recorded:
        return "columns differ from its check file's: " + _difference(columns, recorded)
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        return f"required column(s) missing: {', '.join(missing)}"
    if len(frame) != rows or rows != reps:
        return f"{len(frame)} rows, expected {reps} (one per repetition; check file: {rows})"
    if not low <= reps <= high:
        return f"{reps} repetitions, its check file asked {low} to {high}"
    got = frame["rep"].tolist()
    if got != list(range(reps)):
        shown = ", ".join(str(r) for r in got[:12]) + (", ..." if len(got) > 12 else "")
        return f"repetitions (rep) are {shown}; expected 0..{reps - 1} in order"
    ids = frame["point_id"].dropna().unique()
    if len(ids) != 1 or frame["point_id"].isna().any():
        return f"rows of {len(ids)} point ids, expected one"
    if record.get("point_id") not in (None, str(ids[0])):
        return f"rows are of point {ids[0]}, its check file says {record['point_id']}"
    return None


def _difference(got: Iterable[str], usual: Iterable[str]) -> str:
    got, usual = list(got), list(usual)
    missing = [c for c in usual if c not in got]
    extra = [c for c in got if c not in usual]
    parts = [
        f"missing {', '.join(missing)}" if missing else "",
        f"extra {', '.join(extra)}" if extra else "",
    ]
    return "; ".join(p for p in parts if p) or "same columns in another order"


def verify_points(paths: Iterable[Path | str]) -> list[PointCheck]:
    """Verify each point file (``verify_point``), then against the other points of the
    sweep: one file per point id, and points of one workload type share their columns (a
    file whose column set is not that of most of them is wrong; with no majority, all are)."""
    checks = [verify_point(p) for p in paths]
    seen: dict[str, Path] = {}
    groups: dict[str, list[PointCheck]] = {}
    for c in checks:
        if c.problem is not None:
            continue
        point_id, workload = str(c.frame["point_id"].iloc[0]), str(c.frame["workload"].iloc[0])
        if point_id in seen:
            c.problem = f"point {point_id} is in {seen[point_id]} too"
            continue
        seen[point_id] = c.path
        groups.setdefault(workload, []).append(c)
    for workload, members in groups.items():
        sets = Counter(frozenset(c.frame.columns) - ADDED_COLUMNS for c in members)
        if len(sets) == 1:
            continue
        (usual, n), (_, runner_up) = sets.most_common(2)
        for c in members:
            if n == runner_up:
                c.problem = f"columns differ between the {workload} points of the sweep " + (
                    "(no column set is shared by most of them)"
                )
            elif frozenset(c.frame.columns) - ADDED_COLUMNS != usual:
                c.problem = f"columns differ from the sweep's other {workload} points: " + (
                    _difference(
                        [x for x in c.frame.columns if x not in ADDED_COLUMNS], sorted(usual)
                    )
                )
    return checks


def point_files(folder: Path | str) -> list[Path]:
    """A sweep's point files in its results folder: ``<point>.csv``, not a sibling
    (``<point>.bpsim.csv``, ``<point>.partial.csv``) nor one set aside."""
    return sorted(p for p in Path(folder).glob("*.csv") if "." not in p.name[: -len(".csv")])


def merged_bytes(frames: Iterable[pd.DataFrame]) -> bytes:
    """The bytes `tunelab merge` writes for these point files' rows, in this order."""
    return atomic.csv_bytes(pd.DataFrame(concat(frames).to_dict("records")))


def verify_merged(merged: Path | str) -> str | None:
    """What is wrong with a sweep's merged rows as stored (``<sweep>.csv``), on one line
    naming the file, or None: every point file in ``<sweep>/`` verifies (``verify_points``)
    and the merged file is exactly what merging them wrote, in its order of points."""
    merged = Path(merged)
    folder = merged.with_suffix("")
    points = point_files(folder) if folder.is_dir() else []
    if not merged.is_file():
        unmerged = f" ({len(points)} point file(s) in {folder}/ not merged)" if points else ""
        return f"{merged}: missing{unmerged}"
    if not points:
        return f"{folder}/: no point files: nothing verifies {merged}"
    checks = verify_points(points)
    for c in checks:
        if c.problem is not None:
            return f"{c.path}: {c.problem}"
    by_id = {str(c.frame["point_id"].iloc[0]): c for c in checks}
    data = merged.read_bytes()
    try:
        order = list(dict.fromkeys(read_csv(io.BytesIO(data))["point_id"].astype(str)))
    except (ValueError, KeyError, UnicodeDecodeError) as exc:
        return f"{merged}: cannot be parsed ({type(exc).__name__}: {exc})"
    if extra := [p for p in order if p not in by_id]:
        return f"{merged}: rows of point {extra[0]}, which has no file in {folder}/"
    if lacking := [p for p in by_id if p not in order]:
        return f"{merged}: lacks the rows of {by_id[lacking[0]].path} (merged before it?)"
    if data != merged_bytes(by_id[p].frame for p in order):
        return f"{merged}: changed after the merge: its rows differ from its point files'"
    return None


def set_aside(
    csv: Path | str, why: str = REJECTED_SUFFIX, siblings: Sequence[Path] = ()
) -> list[Path]:
    """Move a point file and its check file (and ``siblings``) aside (``<name>.rejected``,
    then ``.rejected.2`` ...): kept for inspection, and the point counts as not measured.
    The CSV goes first: once it is gone the point is not measured, whatever is left beside
    it."""
    csv = Path(csv)
    group = (csv, check_path(csv), *siblings)
    n = 1
    while True:
        suffix = why if n == 1 else f"{why}.{n}"
        targets = [p.with_name(p.name + suffix) for p in group]
        if not any(t.exists() for t in targets):
            break
        n += 1
    moved = []
    for src, dst in zip(group, targets):
        if src.exists():
            os.replace(src, dst)
            moved.append(dst)
    return moved


def retire_points_not_in(folder: Path | str, keep: Iterable[str]) -> list[str]:
    """Set aside (``<file>.retired``) the files of every point in a sweep's results folder
    that is not in ``keep`` (its sweep file's points now): a value removed from the sweep,
    or a point renamed by an edit. They are kept, but no longer merged, counted or reported.
    Returns the point ids set aside."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    keep = set(keep)
    gone = []
    for csv in sorted(folder.glob("*.csv")):
        pid = csv.name[: -len(".csv")]
        if pid in keep or "." in pid:  # "." : a sibling (x.bpsim.csv) or a partial file
            continue
        siblings = [
            p
            for p in folder.glob(f"{pid}.*")
            if p not in (csv, check_path(csv))
            and REJECTED_SUFFIX not in p.name
            and RETIRED_SUFFIX not in p.name
        ]
        set_aside(csv, RETIRED_SUFFIX, siblings)
        gone.append(pid)
    return gone


def merge_inputs(point_csvs: Sequence[str], after: Sequence[str] = ()) -> dict[str, list[str]]:
    """The merge rule's inputs: every point file and its check file; the points' directory,
    whose mtime changes when a file in it is deleted or set aside (Snakemake does not rerun
    a job for a deleted input while its output is newer than every input left); and what
    must be written into that directory before the merge (``after``), so its mtime then
    says nothing new."""
    directory = os.path.dirname(point_csvs[0]) if point_csvs else ""
    return {
        "points": list(point_csvs),
        "checks": [str(check_path(p)) for p in point_csvs],
        "point_dir": [directory] if directory and os.path.isdir(directory) else [],
        "after": list(after),
    }


def knob_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith(KNOB_PREFIX)]


def swept_columns(frame: pd.DataFrame) -> list[str]:
    """Knob and workload-parameter columns that take more than one value in the frame."""
    cols = [c for c in frame.columns if c.startswith((KNOB_PREFIX, WORKLOAD_PREFIX))]
    return [c for c in cols if frame[c].nunique(dropna=False) > 1]
