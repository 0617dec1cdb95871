"""Reading fio's JSON output (``--output-format=json``) into one small record per job."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class FioOutputError(ValueError):
    """The text is not fio JSON output, or a job in it failed."""


@dataclass(frozen=True)
class JobResult:
    name: str
    direction: str  # "read" | "write": the side of fio's job record that carries the I/O
    rw: str
    block_bytes: int
    ios: int
    io_bytes: int
    runtime_s: float
    bw_bytes_s: float
    lat_mean_ms: float  # total latency (submission + completion) per request
    lat_stddev_ms: float
    percentiles_ms: dict[float, float] = field(default_factory=dict)


def _loads(text: str) -> dict[str, Any]:
    # Some fio builds print notices on stdout before the JSON document: start at the brace.
    start = text.find("{")
    if start < 0:
        raise FioOutputError("fio output holds no JSON document")
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError as exc:
        raise FioOutputError(
            f"fio output is not valid JSON: {exc.msg} at line {exc.lineno}"
        ) from None


def _bs_bytes(options: dict[str, str], fallback: int) -> int:
    text = options.get("bs")
    if text is None:
        return fallback
    if text.isdigit():
        return int(text)
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].lower()])


def parse(doc: str | dict[str, Any]) -> list[JobResult]:
    """One JobResult per job, in fio's order; a job with a non-zero error raises."""
    data = _loads(doc) if isinstance(doc, str) else doc
    if "jobs" not in data:
        raise FioOutputError("fio output has no 'jobs' list")
    glob = data.get("global options", {})
    results = []
    for job in data["jobs"]:
        name = job.get("jobname", "?")
        if job.get("error", 0):
            raise FioOutputError(f"fio job {name} failed with error {job['error']}")
        options = {**glob, **job.get("job options", {})}
        direction = "write" if job["write"]["io_bytes"] > job["read"]["io_bytes"] else "read"
        side = job[direction]
        ios = int(side["total_ios"])
        lat = side["lat_ns"]
        pct = {float(k): v / 1e6 for k, v in lat.get("percentile", {}).items()}
        results.append(
            JobResult(
                name=name,
                direction=direction,
                rw=options.get("rw", direction),
                block_bytes=_bs_bytes(options, int(side["io_bytes"] // max(ios, 1))),
                ios=ios,
                io_bytes=int(side["io_bytes"]),
                runtime_s=side["runtime"] / 1e3,
                bw_bytes_s=float(side["bw_bytes"]),
                lat_mean_ms=lat["mean"] / 1e6,
                lat_stddev_ms=lat["stddev"] / 1e6,
                percentiles_ms=pct,
            )
        )
    return results


def fio_version(doc: str | dict[str, Any]) -> str:
    data = _loads(doc) if isinstance(doc, str) else doc
    return str(data.get("fio version", ""))


def device_names(doc: str | dict[str, Any]) -> list[str]:
    """Block devices fio saw busy during the run (empty on memory filesystems)."""
    data = _loads(doc) if isinstance(doc, str) else doc
    return [d["name"] for d in data.get("disk_util", []) if "name" in d]
