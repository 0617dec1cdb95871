"""Files dated in the future: what a step of the wall clock back (NTP, a VM resumed) leaves.

Snakemake touches a job's outputs when the job ends and refuses them when they are older
than the job's newest input ("older modification time ... clock skew"); the next run would
also measure again every point whose input looks newer than its output. After the clock
stepped back, every file written before the step is dated after "now". Dating each such
file "now" when a job ends (and when a run starts) keeps every output at least as new as
its inputs: files written before the step all get one time, those written after keep
theirs, which are earlier. Timings never read the wall clock (they use CLOCK_MONOTONIC).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

ROOTS_ENV = "TUNELAB_MTIME_ROOTS"  # os.pathsep-separated: the run's directories


def roots_from_env() -> list[str]:
    return [p for p in os.environ.get(ROOTS_ENV, "").split(os.pathsep) if p]


def date_future_files_now(paths: Iterable[str | os.PathLike], now: float | None = None) -> int:
    """Set the mtime of every file under ``paths`` (files or directories, walked whole)
    that is later than ``now`` (default: the wall clock) to ``now``; the count changed.
    Missing paths and files that vanish meanwhile are skipped."""
    now = time.time() if now is None else now
    changed = 0
    for path in paths:
        for file in _files(os.fspath(path)):
            try:
                if os.lstat(file).st_mtime > now:
                    os.utime(file, (now, now), follow_symlinks=False)
                    changed += 1
            except OSError:  # gone, or not ours to change: Snakemake will say so if it matters
                continue
    return changed


def _files(path: str):
    if os.path.isdir(path) and not os.path.islink(path):
        for top, _dirs, names in os.walk(path):
            for name in names:
                yield os.path.join(top, name)
    elif os.path.lexists(path):
        yield path
