"""Running fio: job arguments, the direct-I/O probe, the filesystem's name, the run itself.

Every job uses a synchronous engine (psync: one request in flight, like a DB2 agent's own
read or a log flush) on one file in the directory that holds the engine's data. Jobs of one
repetition run in a single fio process, one after another (``--stonewall``), so the file is
laid out once and the start-up cost of fio is paid once per repetition.
"""

from __future__ import annotations

import errno
import mmap
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = (
    "install it with `apt-get install fio` (Debian/Ubuntu) or `conda install -c conda-forge fio`"
)
# Latency percentiles fio is asked to report (on total latency, lat_percentiles=1).
PERCENTILES = (50.0, 95.0, 99.0, 99.9)


class FioError(RuntimeError):
    """fio is missing or failed; the message is one line meant for the user."""


@dataclass(frozen=True)
class Job:
    """One fio job: a name that encodes what it measures, the access pattern, request size."""

    name: str
    rw: str  # "randread" | "read" | "write"
    block_bytes: int
    sync: bool = False  # O_DSYNC writes: each write is on the device before the next starts

    def args(self) -> list[str]:
        out = [f"--name={self.name}", f"--rw={self.rw}", f"--bs={self.block_bytes}"]
        if self.sync:
            out.append("--sync=dsync")
        return out


@dataclass(frozen=True)
class DirectIOProbe:
    ok: bool
    filesystem: str
    reason: str = ""  # why it was refused, e.g. "Invalid argument"


def fio_binary() -> str:
    path = shutil.which("fio")
    if path is None:
        raise FioError(f"fio is not installed (needed by `tunelab calibrate`): {INSTALL_HINT}")
    return path


def fio_version(binary: str | None = None) -> str:
    out = subprocess.run(
        [binary or fio_binary(), "--version"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip()


def _unescape_mount(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash in paths as octal escapes
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def filesystem_of(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> str:
    """The type of the filesystem holding ``path`` (e.g. ext4, tmpfs, overlay, ramfs).

    The mount whose point is the longest prefix of the resolved path wins; among mounts on
    the same point the last one listed is the visible one. Falls back to ``stat -f``.
    """
    target = str(Path(path).resolve())
    best, best_len = "", -1
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5:
            continue
        point = _unescape_mount(fields[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best_len:
            best, best_len = right.split()[0], len(point)
    if best:
        return best
    out = subprocess.run(
        ["stat", "-f", "-c", "%T", target], capture_output=True, text=True, check=False
    )
    return out.stdout.strip() or "unknown"


def probe_direct_io(directory: Path) -> DirectIOProbe:
    """Open a test file with O_DIRECT and write one aligned block, as fio would.

    Some filesystems refuse at open (ramfs, older tmpfs), others only at the first I/O, so
    both steps are tried. The test file is removed in every outcome.
    """
    directory = Path(directory)
    fs = filesystem_of(directory)
    probe = directory / f".tunelab-odirect-probe-{os.getpid()}"
    buf = mmap.mmap(-1, 4096)  # anonymous mappings are page aligned, as O_DIRECT needs
    try:
        fd = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o600)
        try:
            os.pwritev(fd, [buf], 0)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            return DirectIOProbe(False, fs, os.strerror(exc.errno))
        raise FioError(f"{directory}: cannot create a test file: {exc.strerror}") from None
    finally:
        buf.close()
        probe.unlink(missing_ok=True)
    return DirectIOProbe(True, fs)


def fio_filename(path: Path) -> str:
    """``path`` as fio's ``filename=`` reads it: fio splits it at each colon (a list of files,
    each one written) unless the colon is escaped with a backslash (fio's documentation of
    ``filename``), so that a file under ``…/run:10`` does not have fio write ``…/run``."""
    return str(path).replace(":", "\\:")


def build_args(
    filename: Path,
    size_bytes: int,
    jobs: list[Job],
    runtime_ms: int,
    direct: bool,
) -> list[str]:
    """fio command-line arguments (without the binary) for one repetition of ``jobs``.

    Options before the first ``--name`` are global. Every job after the first carries
    ``--stonewall`` so the jobs run one at a time, never overlapping.
    """
    args = [
        "--output-format=json",
        f"--filename={fio_filename(filename)}",
        f"--size={size_bytes}",
        "--ioengine=psync",
        f"--direct={int(direct)}",
        "--invalidate=1",  # fio drops the file's cached pages before each job
        "--time_based",
        f"--runtime={runtime_ms}ms",
        "--lat_percentiles=1",
        "--percentile_list=" + ":".join(f"{p:g}" for p in PERCENTILES),
    ]
    for i, job in enumerate(jobs):
        args += job.args()
        if i:
            args.append("--stonewall")
    return args


def run(args: list[str], timeout_s: float) -> str:
    """Run fio, return its JSON text; raise FioError with fio's own first error line."""
    binary = fio_binary()
    try:
        out = subprocess.run(
            [binary, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise FioError(f"fio did not finish within {timeout_s:.0f} s") from None
    if out.returncode != 0:
        lines = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.startswith("fio:")]
        detail = "; ".join(lines[:2]) if lines else f"exit status {out.returncode}"
        raise FioError(f"fio failed: {detail}")
    return out.stdout
