"""``tunelab probe disk DIR``: the log disk's write model, as IBM's HADR simulator measures it.

IBM's procedure writes one 4 KiB page per synchronous write, then 1000 pages per write, for a
few seconds each, and reads the per-write overhead from the first (seconds per write) and the
transfer rate from the second (MB/s). Here fio does the writes (psync, O_DSYNC, direct I/O
where the filesystem allows it), alternating the two sizes over ``repetitions`` so that the
device's drift spreads over both. The same two sizes also give the exact line through both
points (write_time = overhead + size / rate), which IBM's page calls "very close".

Units: the simulator prints MB of 10^6 bytes (its sample: 9409 4-KiB writes are "38.539264
MBytes"), while the calculator reads MB of 2^20 (its LAN example reproduces only so: see
``tunelab.hadr.model``). The probe prints the rate in both and the calculator's option in
2^20, so that IBM's copy step does not carry a 4.9 % error into the calculator.
"""

from __future__ import annotations

import os
import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path

from tunelab.calibrate import fio, parse

PAGE_BYTES = 4096  # a log page, the simulator's flush-size unit
SMALL_PAGES, BIG_PAGES = 1, 1000
FILE_BYTES = 64 << 20  # room for 16 writes of 1000 pages before fio wraps around
MIB, MB = float(1 << 20), 1e6


@dataclass(frozen=True)
class DiskProbe:
    directory: str
    filesystem: str
    direct_io: bool
    small_s: list[float]  # mean seconds per 1-page write, per repetition
    big_s: list[float]  # mean seconds per 1000-page write, per repetition

    @property
    def overhead_s(self) -> float:
        """IBM's reading: the time of one 1-page write."""
        return statistics.median(self.small_s)

    @property
    def rate_bytes_s(self) -> float:
        """IBM's reading: what 1000-page writes reach."""
        return BIG_PAGES * PAGE_BYTES / statistics.median(self.big_s)

    @property
    def line(self) -> tuple[float, float | None]:
        """The exact line through the two medians: (overhead s, rate bytes/s or None when
        the big write is not slower per page than the small one's overhead allows)."""
        small, big = statistics.median(self.small_s), statistics.median(self.big_s)
        per_byte = (big - small) / ((BIG_PAGES - SMALL_PAGES) * PAGE_BYTES)
        if per_byte <= 0:
            return small, None
        return small - PAGE_BYTES * per_byte, 1 / per_byte

    def lines(self) -> list[str]:
        spread = max(self.big_s) / min(self.big_s) - 1 if self.big_s else 0.0
        out = [
            f"disk under {self.directory} ({self.filesystem}, "
            f"{'direct I/O' if self.direct_io else 'buffered I/O, pages evicted'}), "
            f"{len(self.small_s)} repetitions of each size:",
            f"  1 page per write:     {self.overhead_s:.6f} s/write "
            f"(range {min(self.small_s):.6f}-{max(self.small_s):.6f})",
            f"  1000 pages per write: {statistics.median(self.big_s):.6f} s/write, "
            f"{self.rate_bytes_s / MIB:.3f} MB/s of 2^20 ({self.rate_bytes_s / MB:.3f} of 10^6; "
            f"spread {spread:.0%})",
        ]
        overhead, rate = self.line
        if rate is None:
            out.append("  line through both: the big write shows no transfer cost")
        else:
            out.append(
                f"  line through both: overhead {overhead:.6f} s, rate "
                f"{rate / MIB:.3f} MB/s of 2^20"
            )
        out.append(f"hadr-calc option: --disk {self.rate_bytes_s / MIB:.3f} {self.overhead_s:.6f}")
        return out


def _jobs() -> list[fio.Job]:
    return [
        fio.Job(f"write-{n}", "write", n * PAGE_BYTES, sync=True) for n in (SMALL_PAGES, BIG_PAGES)
    ]


def probe(directory: Path | str, seconds: float = 2.0, repetitions: int = 3) -> DiskProbe:
    """Measure the device under ``directory``; fio's file is removed in every outcome."""
    directory = Path(directory).resolve()
    fio.fio_binary()
    if not directory.is_dir():
        raise fio.FioError(f"{directory}: not a directory")
    if not os.access(directory, os.W_OK):
        raise fio.FioError(f"{directory}: not writable")
    free = shutil.disk_usage(directory).free
    if free < FILE_BYTES + (16 << 20):
        raise fio.FioError(
            f"{directory}: {free >> 20} MiB free, the probe needs {(FILE_BYTES >> 20) + 16} MiB"
        )
    direct = fio.probe_direct_io(directory)
    path = directory / f".tunelab-probe-disk-{os.getpid()}.fio"
    args = fio.build_args(path, FILE_BYTES, _jobs(), int(seconds * 1000), direct.ok)
    small: list[float] = []
    big: list[float] = []
    try:
        for _ in range(repetitions):
            for result in parse.parse(fio.run(args, timeout_s=60 + 4 * seconds)):
                if result.ios == 0:
                    raise fio.FioError(f"fio job {result.name} made no write in {seconds} s")
                target = small if result.name == f"write-{SMALL_PAGES}" else big
                target.append(result.lat_mean_ms / 1000)
    finally:
        path.unlink(missing_ok=True)
    return DiskProbe(str(directory), direct.filesystem, direct.ok, small, big)
