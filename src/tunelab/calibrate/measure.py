"""One calibration: lay out a file, run every job several times, reduce to the DB2 figures.

Repetition r runs all jobs (random reads, sequential reads, synchronous writes) in one fio
process before repetition r+1 starts, so slow drift of the device shows up as spread across
repetitions rather than as a bias between measurements.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.calibrate import fio, model, parse
from tunelab.calibrate.calibration import Calibration, hostname
from tunelab.host import cache

PREFETCH_PAGES = 32  # DB2's default EXTENTSIZE; one prefetch request = page size x 32 pages
MAX_SEQ_BYTES = 1 << 20  # the largest sequential request, as in IBM's 1 MB measurement
WRITE_PAGE_BYTES = 4096  # DB2 log pages are 4 KiB, the unit of the HADR simulator's flushSize
JOB_START_S = 0.25  # fio's own start-up and stop time per stonewalled job, measured here


@dataclass(frozen=True)
class Plan:
    file_bytes: int
    runtime_ms: int  # per job and repetition
    repetitions: int
    random_pages: tuple[int, ...] = model.DB2_PAGE_SIZES
    seq_pages: tuple[int, ...] = model.DB2_PAGE_SIZES  # page sizes whose prefetch is read
    write_pages: tuple[int, ...] = (1, 4, 16, 64, 256, 1000)

    def jobs(self) -> list[fio.Job]:
        out = [fio.Job(f"rand-{p}", "randread", p) for p in self.random_pages]
        out += [fio.Job(f"seq-{b}", "read", b) for b in self.seq_blocks()]
        out += [
            fio.Job(f"write-{n}", "write", n * WRITE_PAGE_BYTES, sync=True)
            for n in self.write_pages
        ]
        return out

    def seq_blocks(self) -> list[int]:
        return sorted({min(p * PREFETCH_PAGES, MAX_SEQ_BYTES) for p in self.seq_pages})

    def expected_s(self) -> float:
        return len(self.jobs()) * self.repetitions * (self.runtime_ms / 1000 + JOB_START_S)

    def as_dict(self) -> dict[str, Any]:
        return {
            "file_bytes": self.file_bytes,
            "runtime_ms": self.runtime_ms,
            "repetitions": self.repetitions,
            "random_pages": list(self.random_pages),
            "seq_blocks": self.seq_blocks(),
            "write_pages": list(self.write_pages),
            "prefetch_pages": PREFETCH_PAGES,
        }


DEFAULT_PLAN = Plan(file_bytes=256 << 20, runtime_ms=2000, repetitions=3)
QUICK_PLAN = Plan(
    file_bytes=64 << 20,
    runtime_ms=300,
    repetitions=3,
    seq_pages=(4096, 32768),
    write_pages=(1, 32, 1000),
)


def _check_directory(directory: Path, plan: Plan) -> None:
    if not directory.is_dir():
        raise fio.FioError(f"{directory}: not a directory")
    if not os.access(directory, os.W_OK):
        raise fio.FioError(f"{directory}: not writable")
    usage = shutil.disk_usage(directory)
    need = plan.file_bytes + (16 << 20)
    # memory filesystems without a size limit (ramfs) report no blocks at all
    if usage.total and usage.free < need:
        raise fio.FioError(
            f"{directory}: {usage.free >> 20} MiB free, calibration needs {need >> 20} MiB"
        )


def _layout(path: Path, plan: Plan, direct: bool) -> None:
    """Let fio write the whole file once, then flush it to the device.

    A read job is used on purpose: for a write job fio only allocates the file, and reads of
    allocated but unwritten extents return zeros without touching the device.
    """
    args = fio.build_args(path, plan.file_bytes, [fio.Job("layout", "read", 1 << 20)], 1, direct)
    fio.run([*args, "--create_only=1"], timeout_s=600)
    cache.fadvise_dontneed(path)


def _evict(path: Path) -> float:
    """Drop the file's cached pages; return the fraction still resident afterwards."""
    cache.fadvise_dontneed(path)
    resident, total = cache.file_residency(path)
    return resident / total if total else 0.0


def _measurement(kind: str, block: int, results: list[parse.JobResult]) -> dict[str, Any]:
    lat = model.spread([r.lat_mean_ms for r in results])
    bw = model.spread([model.mb_per_s(r.bw_bytes_s) for r in results])
    # Sequential reads are judged by throughput, single requests by their latency.
    judged = bw if kind == "sequential_read" else lat
    pct_keys = sorted({k for r in results for k in r.percentiles_ms})
    return {
        "kind": kind,
        "block_bytes": block,
        "repetitions": len(results),
        "lat_mean_ms": [r.lat_mean_ms for r in results],
        "mb_s": [model.mb_per_s(r.bw_bytes_s) for r in results],
        "ios": [r.ios for r in results],
        "mean_lat_ms": lat.mean,
        "mean_mb_s": bw.mean,
        "cv": None if math.isnan(judged.cv) else judged.cv,
        "cv_of": "mb_s" if kind == "sequential_read" else "lat_ms",
        "percentiles_ms": {
            f"p{k:g}": sum(r.percentiles_ms.get(k, math.nan) for r in results) / len(results)
            for k in pct_keys
        },
    }


KINDS = {"randread": "random_read", "read": "sequential_read", "write": "sync_write"}


def reduce(
    runs: list[list[parse.JobResult]], plan: Plan
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """Figures, measurement records and warnings from the parsed runs of every repetition."""
    by_job: dict[str, list[parse.JobResult]] = defaultdict(list)
    for run in runs:
        for r in run:
            by_job[r.name].append(r)
    meas = {
        job.name: _measurement(KINDS[job.rw], job.block_bytes, by_job[job.name])
        for job in plan.jobs()
        if by_job.get(job.name)
    }
    warnings = [
        f"{name}: run-to-run variation {m['cv']:.0%} of the mean ({m['cv_of']}) over "
        f"{m['repetitions']} repetitions; the figure is uncertain"
        for name, m in meas.items()
        if m["cv"] is not None and m["cv"] > model.CV_WARN
    ]

    largest_seq = max(plan.seq_blocks())
    drr = meas[f"seq-{largest_seq}"]["mean_mb_s"]
    transfer = {p: model.transferrate_ms(drr, p) for p in model.DB2_PAGE_SIZES}
    by_page = {
        p: model.overhead_ms(meas[f"rand-{p}"]["mean_lat_ms"], drr, p) for p in plan.random_pages
    }
    overhead = sum(by_page.values()) / len(by_page)
    if overhead <= 0:
        warnings.append(
            f"random reads were no slower than sequential transfer (OVERHEAD {overhead:.4f} ms);"
            " OVERHEAD is set to 0"
        )
        overhead = 0.0

    writes = [r for name in meas if name.startswith("write-") for r in by_job[name]]
    fit = model.fit_write_model(
        [r.block_bytes for r in writes], [r.lat_mean_ms / 1000 for r in writes]
    )
    if fit.rate_bytes_s is None:
        warnings.append("write time did not grow with write size: no write rate can be fitted")
    smallest, biggest = min(plan.write_pages), max(plan.write_pages)
    two_point = {  # the HADR simulator's reading: overhead of 1 page, rate of 1000 pages
        "overhead_ms": meas[f"write-{smallest}"]["mean_lat_ms"],
        "rate_mb_s": meas[f"write-{biggest}"]["mean_mb_s"],
    }

    # PostgreSQL's page is 8K; without an 8K random read, model it as OVERHEAD + TRANSFERRATE.
    rand_8k = meas.get(f"rand-{model.PG_PAGE_BYTES}")
    rand_8k_ms = rand_8k["mean_lat_ms"] if rand_8k else overhead + transfer[model.PG_PAGE_BYTES]
    ratio = model.pg_random_seq_ratio(rand_8k_ms, drr)
    figures = {
        "overhead_ms": overhead,
        "overhead_ms_by_page": by_page,
        "device_read_rate_mb_s": drr,
        "transferrate_ms": transfer,
        "write_overhead_ms": fit.overhead_s * 1000,
        "write_rate_mb_s": None if fit.rate_bytes_s is None else model.mb_per_s(fit.rate_bytes_s),
        "write_fit_r2": fit.r2,
        "write_two_point": two_point,
        "pg_random_seq_ratio": ratio,
        "pg_random_page_cost": model.pg_random_page_cost(ratio),
    }
    records = [{"name": name, **m} for name, m in meas.items()]
    return figures, records, warnings


def calibrate(
    directory: Path | str,
    plan: Plan = DEFAULT_PLAN,
    quick: bool = False,
    note: Callable[[str], None] = lambda _msg: None,
) -> Calibration:
    """Measure the device under ``directory``; the fio file is removed in every outcome."""
    started = time.monotonic()
    directory = Path(directory).resolve()
    fio.fio_binary()
    _check_directory(directory, plan)
    probe = fio.probe_direct_io(directory)
    warnings: list[str] = []
    direct_note = ""
    if not probe.ok:
        direct_note = (
            f"the {probe.filesystem} filesystem at {directory} refuses direct I/O (O_DIRECT: "
            f"{probe.reason}); measured with buffered I/O, the file's pages evicted before "
            "each repetition"
        )
        note(direct_note)
        warnings.append(direct_note)

    path = directory / f".tunelab-calibrate-{os.getpid()}.fio"
    jobs = plan.jobs()
    args = fio.build_args(path, plan.file_bytes, jobs, plan.runtime_ms, probe.ok)
    timeout = 60 + 3 * len(jobs) * plan.runtime_ms / 1000
    runs: list[list[parse.JobResult]] = []
    resident: list[float] = []
    devices: set[str] = set()
    version = ""
    try:
        _layout(path, plan, probe.ok)
        for rep in range(plan.repetitions):
            resident.append(_evict(path))
            note(f"repetition {rep + 1}/{plan.repetitions}: {len(jobs)} fio jobs")
            text = fio.run(args, timeout_s=timeout)
            runs.append(parse.parse(text))
            devices.update(parse.device_names(text))
            version = parse.fio_version(text)
    finally:
        path.unlink(missing_ok=True)

    figures, records, more = reduce(runs, plan)
    warnings += more
    worst_resident = max(resident) if resident else 0.0
    if worst_resident > 0.5:
        warnings.append(
            f"{worst_resident:.0%} of the test file stayed in memory after eviction "
            f"({probe.filesystem}): reads measured memory, not a device"
        )
    return Calibration(
        host=hostname(),
        data_dir=str(directory),
        filesystem=probe.filesystem,
        direct_io=probe.ok,
        direct_io_note=direct_note,
        device=",".join(sorted(devices)),
        fio_version=version,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        quick=quick,
        elapsed_s=round(time.monotonic() - started, 2),
        plan=plan.as_dict(),
        write_page_bytes=WRITE_PAGE_BYTES,
        resident_fraction=worst_resident,
        warnings=warnings,
        measurements=records,
        **figures,
    )
