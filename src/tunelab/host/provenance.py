"""Provenance recorded with every result row: host (and cluster job), filesystem, code
version."""

from __future__ import annotations

import os
import platform
import subprocess
from functools import cache
from pathlib import Path

import tunelab


def host() -> dict[str, object]:
    return {**machine(), **cluster_job()}


@cache
def machine() -> dict[str, object]:
    """The host's own facts (the cluster job's come apart: a job's environment names it)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = memory_bytes() / 2**30
    return {
        "host_name": platform.node(),
        "host_cpu": cpu,
        "host_cores": os.cpu_count(),
        "host_mem_gib": round(mem, 1),
        "host_kernel": platform.release(),
    }


def memory_bytes() -> int:
    """The host's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


# Where a cluster job ran, from the scheduler's environment of the job: empty outside one.
# Every row has the columns, so the points of a sweep keep one set of columns whether they
# were measured on a cluster or on one machine.
CLUSTER_ENV = {"slurm_job_id": "SLURM_JOB_ID", "slurm_node": "SLURMD_NODENAME"}


def cluster_job() -> dict[str, str]:
    """The SLURM job and node name a measurement ran in (empty strings outside SLURM)."""
    return {col: os.environ.get(var, "") for col, var in CLUSTER_ENV.items()}


def filesystem(path: Path) -> str:
    """Filesystem type and source of the mount holding ``path`` (from /proc/self/mountinfo)."""
    path = Path(path).resolve()
    best, fs = "", "unknown"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return fs
    for line in lines:
        left, _, right = line.partition(" - ")
        mount_point = left.split()[4]
        if (
            str(path) == mount_point or str(path).startswith(mount_point.rstrip("/") + "/")
        ) and len(mount_point) >= len(best):
            best, fs = mount_point, f"{right.split()[0]} ({right.split()[1]})"
    return fs


@cache
def git_commit() -> str:
    root = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return out + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def code() -> dict[str, str]:
    return {"tunelab_version": tunelab.__version__, "git_commit": git_commit()}
