"""A fixed reference probe of the storage device the engines' data lives on.

A cold point's time is mostly its physical reads, and a write point's partly its commits'
syncs: when the (virtual) device answers 40 % slower in one run than in the one before, those
points take 40 % longer with nothing changed in the lab or the engine. The probe measures the
device with the same small job before every round, independent of any engine, so that rows
carry what the device gave at the time (the report's Methods give it):

- ``device_read_us``: the median latency of ``READS`` random 4 KiB reads with O_DIRECT (no
  page cache, no read-ahead) from a reference file of ``FILE_BYTES`` in the lab's working
  directory, on the same file system as the engines' data;
- ``device_sync_us``: the median latency of ``SYNCS`` 4 KiB writes each followed by
  fdatasync, in the same file (a commit's log flush).

About 15-40 ms a probe on a local SSD-backed virtual disk. Either value is NaN where the
file system refuses O_DIRECT or the file cannot be made (a full disk): the probe never stops a
run.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import random
import statistics
import time
from pathlib import Path

FILE_NAME = "device-probe.bin"
FILE_BYTES = 256 * 2**20  # larger than any cache in front of the device we have seen
BLOCK = 4096
READS = 200
SYNCS = 12
COLUMNS = ("device_read_us", "device_sync_us")


def _reference_file(directory: Path) -> Path:
    """The probe's file, written once with non-zero data (a sparse or zero file may be
    answered without touching the device), replaced atomically."""
    path = directory / FILE_NAME
    if path.is_file() and path.stat().st_size == FILE_BYTES:
        return path
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    chunk = bytes(range(256)) * (2**20 // 256)
    try:
        with open(tmp, "wb") as f:
            for _ in range(FILE_BYTES // len(chunk)):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _read_us(path: Path, rng: random.Random) -> float:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    try:
        times = []
        for _ in range(READS):
            offset = rng.randrange(FILE_BYTES // BLOCK) * BLOCK
            t0 = time.perf_counter_ns()
            os.preadv(fd, [buf], offset)
            times.append(time.perf_counter_ns() - t0)
        return statistics.median(times) / 1e3
    finally:
        buf.close()
        os.close(fd)


def _sync_us(path: Path, rng: random.Random) -> float:
    fd = os.open(path, os.O_WRONLY)
    block = bytes(BLOCK)[:-1] + b"\x01"
    try:
        times = []
        for _ in range(SYNCS):
            offset = rng.randrange(FILE_BYTES // BLOCK) * BLOCK
            t0 = time.perf_counter_ns()
            os.pwrite(fd, block, offset)
            os.fdatasync(fd)
            times.append(time.perf_counter_ns() - t0)
        return statistics.median(times) / 1e3
    finally:
        os.close(fd)


def measure(directory: Path | str) -> dict[str, float]:
    """One probe of the device holding ``directory``: ``COLUMNS`` in microseconds."""
    out = dict.fromkeys(COLUMNS, math.nan)
    rng = random.Random()
    try:
        path = _reference_file(Path(directory))
    except OSError:
        return out
    for col, probe in zip(COLUMNS, (_read_us, _sync_us), strict=True):
        with contextlib.suppress(OSError):
            out[col] = round(probe(path, rng), 2)
    return out
