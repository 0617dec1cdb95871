"""OS page-cache control for cold runs: evict a set of files, then check what is resident.

Eviction is per file (fsync, then posix_fadvise DONTNEED), which works without privileges,
followed by a global ``drop_caches`` where the process may write it (root on the host). The
residency check uses mincore(2) on a read-only mapping, so the result row records what was
achieved rather than what was asked.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable
from pathlib import Path

# How a warm repetition got warm: the workload once, untimed, on its connections; or, for a
# read's later repetitions, the repetition just before on the same connections and table.
# Both leave the same state (the same work, just before), so comparisons treat them as one.
WARM_UP = "untimed warm-up run"
WARM_BY_PREVIOUS = "the previous repetition (the same workload, just before)"


def method_family(method: str) -> str:
    """A cache method as comparisons see it: a warm-up by the previous repetition is one."""
    return WARM_UP if method == WARM_BY_PREVIOUS else method


DROP_CACHES = Path("/proc/sys/vm/drop_caches")
PAGE = os.sysconf("SC_PAGE_SIZE")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
_libc.mincore.restype = ctypes.c_int
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.mmap.restype = ctypes.c_void_p
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def expand(paths: Iterable[Path | str]) -> list[Path]:
    """Regular files named, or found below named directories."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.is_file() and not f.is_symlink()))
        elif p.is_file():
            out.append(p)
    return out


def fadvise_dontneed(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages cannot be dropped; write them first
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def can_drop_caches() -> bool:
    return os.access(DROP_CACHES, os.W_OK)


# The steps evict names in its method, in the words of a report's methods section.
EVICT_STEPS = {
    "fadvise": "the data files were evicted from the OS page cache (fsync, then "
    "posix_fadvise DONTNEED per file)",
    "drop_caches": "the kernel's page cache was dropped (drop_caches)",
}


def evict(paths: Iterable[Path | str]) -> str:
    """Evict the files' pages from the OS page cache; return the method used."""
    files = expand(paths)
    for f in files:
        fadvise_dontneed(f)
    method = "fadvise"
    if can_drop_caches():
        os.sync()
        try:
            DROP_CACHES.write_text("1\n")
            method = "fadvise+drop_caches"
        except OSError:
            pass
    return method


# mincore's byte per page: its low bit says resident; the other bits are undefined.
_LOW_BIT = bytes(b & 1 for b in range(256))


def file_residency(path: Path) -> tuple[int, int]:
    """(resident pages, total pages) of one file in the OS page cache."""
    size = path.stat().st_size
    if size == 0:
        return 0, 0
    total = (size + PAGE - 1) // PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap failed for {path}")
        try:
            vec = (ctypes.c_ubyte * total)()
            if _libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore failed for {path}: {os.strerror(err)}")
            resident = bytes(vec).translate(_LOW_BIT).count(1)
        finally:
            _libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)
    return resident, total


def residency(paths: Iterable[Path | str]) -> tuple[int, int]:
    """(resident pages, total pages) over all files named or below named directories."""
    resident = total = 0
    for f in expand(paths):
        r, t = file_residency(f)
        resident += r
        total += t
    return resident, total
