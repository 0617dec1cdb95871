"""The ``os_read_ahead`` knob: the kernel's read-ahead for an engine's data files.

SQLite and PostgreSQL leave prefetching a sequential scan to the kernel, which reads ahead of
a file read in sequence, up to its device's ``queue/read_ahead_kb``; so does InnoDB when it
reads through the OS cache (``direct_io: false``; with O_DIRECT the page cache, and its
read-ahead, is bypassed). A point that asks for it keeps its data files on a device of its
own (``tunelab.host.blockdev``: a loop device with direct I/O over a file in the work directory,
ext4 on it), whose read-ahead it sets, reads back and records; the host's disks are never
touched. The device goes with the point's data: at the point's end, or a kept server's, or
by ``tunelab recover`` after a kill.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunelab.engines.base import EngineError, Knob
from tunelab.host import blockdev

NAME = "os_read_ahead"
MAX_KB = 16384
# Backing files are sparse: only what the engine writes takes room on the host's disk. A
# server's holds its whole data directory (PostgreSQL's WAL may reach max_wal_size, 4 GB).
SQLITE_BYTES = 4 << 30
SERVER_BYTES = 12 << 30


def knob(how: str) -> Knob:
    """The knob as an engine declares it; ``how``: what its data files are, there."""
    return Knob(
        NAME,
        "integer",
        f"the kernel's read-ahead, in KiB, for {how}: they live on a loop device of the "
        "point's own (direct I/O to a file in the work directory, ext4), whose "
        "queue/read_ahead_kb this sets; 0: off. The host's disks are left alone",
        minimum=0,
        maximum=MAX_KB,
        unit="KiB",
        readback="/sys/block/<loop device>/queue/read_ahead_kb",
    )


def wanted(knobs: dict[str, Any]) -> bool:
    return knobs.get(NAME) is not None


def refusals(engine: str, knobs: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) when the point sets the knob and this host cannot give it a device."""
    if not wanted(knobs) or (why := blockdev.unavailable_reason()) is None:
        return []
    return [(NAME, f"{engine} cannot set the kernel's read-ahead on this host: {why}")]


def planned(knobs: dict[str, Any], where: str) -> list[str]:
    """What ``tunelab plan --sql`` shows of the device, before the engine's own lines."""
    if not wanted(knobs):
        return []
    return [
        f"-- {where} on a loop device of its own: losetup --find --show --direct-io=on "
        "<device dir>/device.img; mkfs.ext4; mount -o noatime; "
        f"echo {knobs[NAME]} > /sys/block/<loop>/queue/read_ahead_kb"
    ]


class LabDisk:
    """The device a point's data files live on: ``root`` holds its backing file and record,
    ``mountpoint`` is the directory the engine keeps its files in."""

    def __init__(self, engine: str, root: Path, mountpoint: Path, size_bytes: int):
        self.engine, self.root, self.mountpoint = engine, Path(root), Path(mountpoint)
        self.size_bytes = size_bytes
        self.device: blockdev.Device | None = None

    def create(self) -> None:
        try:
            self.device = blockdev.create(self.root, self.mountpoint, self.size_bytes)
        except blockdev.BlockDeviceError as exc:
            raise EngineError(f"{self.engine}: {NAME}: {exc}") from None

    def reopen(self) -> bool:
        """Take over the device a kept server's home records; False when it is gone."""
        self.device = blockdev.reopen(self.root)
        return self.device is not None

    def apply(self, kb: int) -> None:
        assert self.device is not None
        got = self.device.set_read_ahead(int(kb))
        if got != int(kb):  # the kernel rounds to whole pages
            raise EngineError(
                f"{self.engine}: /dev/{self.device.loop} has read_ahead_kb {got} "
                f"after {int(kb)} was written"
            )

    def applied(self) -> dict[str, Any]:
        """The knob as the kernel has it, and how it was applied (not a knob, recorded)."""
        if self.device is None:
            return {}
        return {NAME: self.device.read_ahead(), "os_read_ahead_device": self.device.describe()}

    def counters(self) -> dict[str, float]:
        """The device's reads (cumulative): every request the engine's reads of its files
        became, read-ahead included, after the block layer merged them."""
        if self.device is None:
            return {}
        c = self.device.counters()
        return {
            "dev_read_requests": c["requests"],
            "dev_read_bytes": c["bytes"],
            "dev_read_ms": c["ms"],
        }

    def release(self) -> None:
        try:
            blockdev.release(self.root)
        except blockdev.BlockDeviceError as exc:
            raise EngineError(f"{self.engine}: removing its {NAME} device: {exc}") from None
        finally:
            self.device = None
