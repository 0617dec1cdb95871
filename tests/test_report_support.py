"""Real measurements for the report tests: small SQLite sweeps timed in this test run.

Nothing here is made up: every elapsed time comes from running the query, the page-cache
hits and misses from SQLite's own per-connection counters (apsw db_status), the device
bytes from /proc/self/io, and the cold state from posix_fadvise DONTNEED plus a mincore
residency check (no global drop_caches: other work on the machine keeps its cache).
The rows carry the columns described in tunelab.store.results.

The "engine" sweep is measured by tunelab.measure.runner itself, so its rows also carry the plan of
every point, the engine's own time and the per-statement times.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import time
from pathlib import Path

import apsw
import numpy as np
import pandas as pd
import yaml

import tunelab
from tunelab.host import cache
from tunelab.store.dataset import Dataset, generate
from tunelab.store.results import write_rows

ROWS = 20_000
SEED = 7
REPS = 3

SCAN_SWEEP = {
    "name": "sqlite-cache-scan",
    "description": "Full scan of the accounts table versus SQLite's page-cache size and page "
    "size, from a cold and a warm cache.",
    "engine": "sqlite",
    "dataset": {"rows": ROWS, "seed": SEED},
    "knobs": {"cache_size": [16, 128, 1024, 8192], "page_size": [1024, 4096]},
    "fixed": {"journal_mode": "delete"},
    "workloads": [{"type": "scan"}],
    "cache": "both",
    "repetitions": REPS,
}

RANGE_SWEEP = {
    "name": "sqlite-index-range",
    "description": "Range query on a physically scattered column, with and without a "
    "secondary index, at three selectivities (warm).",
    "engine": "sqlite",
    "dataset": {"rows": ROWS, "seed": SEED},
    "knobs": {"index": ["none", "secondary"]},
    "workloads": [{"type": "range", "selectivity": [0.001, 0.01, 0.1]}],
    "cache": "warm",
    "repetitions": REPS,
}


# Range queries and point lookups, the optimizer choosing the plan: at 90 % of the rows
# SQLite's planner scans instead of using the non-clustered index the knob built.
ENGINE_SWEEP = {
    "name": "sqlite-engine-bound",
    "description": "Range queries and point lookups with and without a non-clustered index, "
    "cold and warm; the optimizer picks the plan.",
    "engines": ["sqlite"],
    "dataset": {"rows": ROWS, "seed": SEED},
    "knobs": {"index": ["none", "nonclustered"]},
    "fixed": {"buffer_pool": 2000},
    "workloads": [
        {"type": "range", "selectivity": [0.01, 0.9], "queries": 3},
        {"type": "point", "lookups": 20},  # each cold one after an eviction of its own
    ],
    "cache": "both",
    "repetitions": REPS,
}


def _host() -> dict:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    except OSError:
        mem_kib = 0
    return {
        "host_cpu": cpu or "unknown",
        "host_cores": os.cpu_count(),
        "host_mem_gib": round(mem_kib / 2**20, 1),
        "host_kernel": platform.release(),
        "host_fs": _fs_type(Path.cwd()),
    }


def _fs_type(path: Path) -> str:
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            _, mount, fstype, *_ = line.split()
            if str(path.resolve()).startswith(mount) and len(mount) > len(best):
                best, kind = mount, fstype
    except OSError:
        pass
    return kind


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _device_read_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def _build(path: Path, page_size: int, index: str = "none") -> None:
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA page_size={page_size}")
    conn.execute(
        "CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT, hundreds1 INTEGER, "
        "hundreds2 INTEGER, lat INTEGER, balance INTEGER, filler TEXT)"
    )
    frame = generate(Dataset(ROWS, SEED))
    with conn:
        conn.executemany(
            "INSERT INTO accounts VALUES (?, ?, ?, ?, ?, ?, ?)",
            frame.itertuples(index=False, name=None),
        )
    if index == "secondary":
        conn.execute("CREATE INDEX accounts_lat ON accounts(lat)")
    conn.close()


def _status(conn: apsw.Connection) -> tuple[int, int]:
    hit = conn.status(apsw.SQLITE_DBSTATUS_CACHE_HIT)[0]
    miss = conn.status(apsw.SQLITE_DBSTATUS_CACHE_MISS)[0]
    return hit, miss


def _timed(conn: apsw.Connection, sql: str, args: tuple) -> tuple[int, float, int, int, int]:
    """rows, seconds, cache hits, cache misses, device bytes of one timed statement."""
    hit0, miss0 = _status(conn)
    io0 = _device_read_bytes()
    t0 = time.perf_counter_ns()
    rows = len(conn.execute(sql, args).fetchall())
    t1 = time.perf_counter_ns()
    io1 = _device_read_bytes()
    hit1, miss1 = _status(conn)
    return rows, (t1 - t0) / 1e9, hit1 - hit0, miss1 - miss0, io1 - io0


def _prepare(path: Path, cache_size: int, state: str, sql: str, args: tuple):
    """A fresh connection (empty SQLite pool) set up cold or warm; returns it and the
    achieved cache state."""
    if state == "cold":
        cache.fadvise_dontneed(path)
        method = "new connection+fadvise"
        resident, total = cache.residency([path])  # before the open reads the header page
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.execute(f"PRAGMA cache_size={cache_size}")
    if state == "warm":
        conn.execute(sql, args).fetchall()  # the same workload once, untimed
        method = "warm-up run"
        resident, total = cache.residency([path])
    fraction = resident / total if total else float("nan")
    achieved = state if state == "warm" or resident == 0 else "partial"
    return conn, achieved, method, fraction


def _row(sweep: dict, sweep_file: Path, conn, path, point: dict, rep: int, timed, prep) -> dict:
    rows, secs, hits, misses, dev_bytes = timed
    _, achieved, method, fraction = prep
    page_size = conn.execute("PRAGMA page_size").fetchall()[0][0]
    applied_cache = conn.execute("PRAGMA cache_size").fetchall()[0][0]
    logical = hits + misses
    row = {
        "sweep": sweep["name"],
        "sweep_file": str(sweep_file),
        "point_id": ",".join(f"{k}={v}" for k, v in point.items()),
        "rep": rep,
        "engine": "sqlite",
        "engine_version": apsw.sqlite_lib_version(),
        "knob_cache_size": point.get("cache_size"),
        "applied_cache_size": applied_cache if "cache_size" in point else None,
        "workload": point.get("workload", "scan"),
        "dataset_rows": ROWS,
        "seed": SEED,
        "rows_touched": rows,
        "elapsed_s": secs,
        "throughput_rows_s": rows / secs,
        "cache_requested": point["cache"],
        "cache_achieved": achieved,
        "cache_method": method,
        "resident_fraction": fraction,
        "c_logical_reads": logical,
        "c_physical_reads": misses,
        "c_os_read_bytes": dev_bytes,
        "hit_ratio_app": hits / logical if logical else float("nan"),
        "physical_reads_per_s": misses / secs,
        "read_mb_s": dev_bytes / secs / 1e6,
        "page_size_bytes": page_size,
        "data_bytes": path.stat().st_size,
        "written_bytes": 0,
        **_host(),
        "tunelab_version": tunelab.__version__,
        "git_commit": _git_commit(),
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "engine_starts": 1,
    }
    if "page_size" in point:
        row["knob_page_size"] = point["page_size"]
        row["applied_page_size"] = page_size
    if "index" in point:
        row["knob_index"] = point["index"]
        row["applied_index"] = point["index"]
        row["wl_selectivity"] = point["selectivity"]
        del row["knob_cache_size"], row["applied_cache_size"]
    return row


def measure_scan(workdir: Path) -> tuple[Path, Path]:
    """Time the scan sweep; returns (results CSV, sweep YAML)."""
    workdir.mkdir(parents=True, exist_ok=True)
    sweep_file = workdir / "sqlite-cache-scan.yaml"
    sweep_file.write_text(yaml.safe_dump(SCAN_SWEEP, sort_keys=False))
    dbs = {}
    for ps in SCAN_SWEEP["knobs"]["page_size"]:
        dbs[ps] = workdir / f"scan-ps{ps}.db"
        _build(dbs[ps], ps)
    sql, args = "SELECT * FROM accounts", ()
    rows = []
    for rep in range(REPS):  # repetitions interleaved, so slow drift spreads over all points
        for ps in SCAN_SWEEP["knobs"]["page_size"]:
            for cs in SCAN_SWEEP["knobs"]["cache_size"]:
                for state in ("cold", "warm"):
                    point = {"cache_size": cs, "page_size": ps, "cache": state}
                    prep = _prepare(dbs[ps], cs, state, sql, args)
                    conn = prep[0]
                    timed = _timed(conn, sql, args)
                    rows.append(
                        _row(SCAN_SWEEP, sweep_file, conn, dbs[ps], point, rep, timed, prep)
                    )
                    conn.close()
    out = write_rows(rows, workdir / "sqlite-cache-scan.csv")
    return out, sweep_file


def measure_range(workdir: Path) -> tuple[Path, Path]:
    """Time the index x selectivity sweep; returns (results CSV, sweep YAML)."""
    workdir.mkdir(parents=True, exist_ok=True)
    sweep_file = workdir / "sqlite-index-range.yaml"
    sweep_file.write_text(yaml.safe_dump(RANGE_SWEEP, sort_keys=False))
    dbs = {}
    for index in RANGE_SWEEP["knobs"]["index"]:
        dbs[index] = workdir / f"range-{index}.db"
        _build(dbs[index], 4096, index)
    sql = "SELECT * FROM accounts WHERE lat BETWEEN ? AND ?"
    rows = []
    for rep in range(REPS):
        for index in RANGE_SWEEP["knobs"]["index"]:
            for sel in RANGE_SWEEP["workloads"][0]["selectivity"]:
                args = (0, round(ROWS * sel) - 1)
                point = {"index": index, "selectivity": sel, "cache": "warm", "workload": "range"}
                prep = _prepare(dbs[index], 2000, "warm", sql, args)
                conn = prep[0]
                timed = _timed(conn, sql, args)
                rows.append(
                    _row(RANGE_SWEEP, sweep_file, conn, dbs[index], point, rep, timed, prep)
                )
                conn.close()
    out = write_rows(rows, workdir / "sqlite-index-range.csv")
    return out, sweep_file


def measure_engine(workdir: Path) -> tuple[Path, Path]:
    """Run the engine sweep point by point through tunelab.measure.runner (what `tunelab run-point`
    does) and merge the points' rows; returns (results CSV, sweep YAML)."""
    from tunelab.measure import runner
    from tunelab.sweep import spec

    workdir.mkdir(parents=True, exist_ok=True)
    sweep_file = workdir / "sqlite-engine-bound.yaml"
    sweep_file.write_text(yaml.safe_dump(ENGINE_SWEEP, sort_keys=False))
    points, errors = spec.expand(sweep_file, "sqlite")
    assert not errors, errors
    frames = []
    for point in points:
        out = workdir / "points" / f"{point.point_id}.csv"
        runner.run_point(point, out, workdir / "work", workdir / "data")
        frames.append(pd.read_csv(out))
    out = workdir / "sqlite-engine-bound.csv"
    pd.concat(frames, ignore_index=True).to_csv(out, index=False)
    return out, sweep_file


MEASURE = {"scan": measure_scan, "range": measure_range, "engine": measure_engine}
_MEASURED: dict[str, tuple[Path, Path]] = {}


def measured(kind: str, tmp_path_factory) -> tuple[Path, Path]:
    """Measure once per test session and share between the report test modules."""
    if kind not in _MEASURED:
        workdir = tmp_path_factory.mktemp(f"report-{kind}")
        _MEASURED[kind] = MEASURE[kind](workdir)
    return _MEASURED[kind]


# -- checks of the measurements themselves --------------------------------------------------
def test_scan_rows_are_real_measurements(tmp_path_factory):
    csv, _ = measured("scan", tmp_path_factory)
    frame = pd.read_csv(csv)
    assert len(frame) == 2 * 4 * 2 * REPS
    assert (frame["rows_touched"] == ROWS).all()
    assert (frame["elapsed_s"] > 0).all()
    # Timings are measured, so repetitions of a point are not all identical.
    assert frame.groupby("point_id")["elapsed_s"].nunique().max() > 1
    # The engine applied the knobs asked.
    assert (frame["knob_cache_size"] == frame["applied_cache_size"]).all()
    assert (frame["knob_page_size"] == frame["applied_page_size"]).all()
    # A fresh connection starts with an empty SQLite pool: cold runs miss on every page read.
    cold = frame[frame["cache_requested"] == "cold"]
    assert (cold["c_physical_reads"] > 0).all()
    # Warm with a pool bigger than the table: the timed scan is served from the pool.
    big = frame[(frame["cache_requested"] == "warm") & (frame["knob_cache_size"] == 8192)]
    assert np.allclose(big["hit_ratio_app"], 1.0)


def test_range_rows_are_real_measurements(tmp_path_factory):
    csv, _ = measured("range", tmp_path_factory)
    frame = pd.read_csv(csv)
    assert len(frame) == 2 * 3 * REPS
    expected = (frame["wl_selectivity"] * ROWS).round().astype(int)
    assert (frame["rows_touched"] == expected).all()


def test_engine_rows_come_from_the_runner_with_plans_and_engine_time(tmp_path_factory):
    csv, _ = measured("engine", tmp_path_factory)
    frame = pd.read_csv(csv)
    assert len(frame) == 2 * 3 * 2 * REPS
    assert frame["access_mode"].eq("optimizer").all()
    # The planner's own choice: a scan for 90 % of the rows, the index for 1 %.
    wide = (frame["knob_index"] == "nonclustered") & (frame["wl_selectivity"] == 0.9)
    assert frame.loc[wide, "access_path"].eq("scan").all()
    assert not frame.loc[wide, "access_matches"].any()
    assert frame.loc[~wide, "access_matches"].all()
    assert (frame["engine_elapsed_s"] > 0).all()
    assert (frame["engine_elapsed_s"] <= frame["elapsed_s"]).all()
    assert frame.loc[frame["workload"] == "point", "queries"].eq(20).all()
    assert frame.loc[frame["workload"] == "range", "queries"].eq(3).all()


_RENDERED: dict[str, tuple[Path, float]] = {}
TEMPLATE = Path(__file__).resolve().parents[1] / "reports" / "sweep_report.py"


def report_params(csv: Path, sweep_file: Path, **extra) -> dict:
    params = {
        "results_csv": str(csv),
        "sweep_name": "",
        "sweep_file": str(sweep_file),
        "calibration_json": "",
        "bpsim_csv": "",
        "title": "",
    }
    params.update(extra)
    return params


def rendered(kind: str, tmp_path_factory) -> tuple[Path, float]:
    """Render the report of a measured sweep once per session: (HTML path, seconds)."""
    from tunelab.report.render import timed_render

    if kind not in _RENDERED:
        csv, sweep_file = measured(kind, tmp_path_factory)
        out = csv.parent / "reports" / f"{csv.stem}.html"
        _RENDERED[kind] = timed_render(TEMPLATE, report_params(csv, sweep_file), out)
    return _RENDERED[kind]
