"""Workload input of the HADR calculator: the log scanner's text output (IBM's db2logscan,
format as its wiki page db2logscan prints it) or a CSV of counters per interval.

Scanner text: every logging-rate line, e.g.
``2013-02-26 15:32:09  7.307 MB/s, 60 sec,  17.6 pg/f, 0.009435 sec/f,  15.9 pg/tr,
0.186589 sec/tr, 0.008580 sec/cmt, nOpenTrans  22.7`` (one line), is an interval; the line
after "Distribution of log write rate" gives the average rate (its last field). Other lines
are skipped.

CSV (a file ending in ``.csv``), one row per interval, columns by header name: ``seconds``
(interval length), ``bytes`` (log written) or ``mb_per_s`` (MB of 2^20 bytes per second),
``flushes`` (log writes), ``transactions`` (commits), ``open_transactions`` (average open
at a time); optional ``label``. Flush size is bytes / flushes, flush time seconds / flushes
(the writer taken as never idle), transaction size bytes / transactions.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from tunelab.hadr.model import MB_BYTES, PAGE_BYTES, Interval


class ScanError(ValueError):
    """Bad input: the message is one line, ``file[:line]: field: what is wrong``."""


@dataclass
class Workload:
    intervals: list[Interval] = field(default_factory=list)
    average_rate: float | None = None  # the scanner's "Avg" of its log write rates


RATE_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +[\d.]+ MB/s")
_FIELDS = re.compile(
    r"^(?P<label>\S+ \S+) +(?P<rate>\S+) MB/s, +(?P<seconds>\S+) sec, +(?P<flush_pages>\S+) "
    r"pg/f, +(?P<flush_seconds>\S+) sec/f, +(?P<trans_pages>\S+) pg/tr, +\S+ sec/tr, +\S+ "
    r"sec/cmt, +nOpenTrans +(?P<open_trans>\S+)\s*$"
)
DISTRIBUTION = "Distribution of log write rate"


def _number(where: str, name: str, text: str, *, positive: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ScanError(f"{where}: {name}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        kind = "a positive number" if positive else "a number >= 0"
        raise ScanError(f"{where}: {name}: {text!r} must be {kind}")
    return value


def parse_scanner(text: str, name: str) -> Workload:
    work = Workload()
    lines = text.splitlines()
    for no, line in enumerate(lines, 1):
        where = f"{name}:{no}"
        if DISTRIBUTION in line:
            if no >= len(lines) or not lines[no].split():
                raise ScanError(f"{where}: average rate: no line after {DISTRIBUTION!r}")
            work.average_rate = _number(f"{name}:{no + 1}", "Avg", lines[no].split()[-1])
            continue
        if not RATE_LINE.match(line):
            continue
        m = _FIELDS.match(line)
        if m is None:
            raise ScanError(f"{where}: rate line: not in the scanner's layout: {line.strip()!r}")
        values = {
            key: _number(where, key, m[key])
            for key in (
                "rate",
                "seconds",
                "flush_pages",
                "flush_seconds",
                "trans_pages",
                "open_trans",
            )
        }
        work.intervals.append(Interval(label=m["label"], **values))
    return work


CSV_REQUIRED = ("seconds", "flushes", "transactions", "open_transactions")


def parse_csv(text: str, name: str) -> Workload:
    reader = csv.DictReader(io.StringIO(text))
    columns = [c.strip() for c in reader.fieldnames or []]
    if not columns:
        raise ScanError(f"{name}: header: empty file, no header")
    reader.fieldnames = columns
    missing = [c for c in CSV_REQUIRED if c not in columns]
    if ("bytes" in columns) == ("mb_per_s" in columns):
        missing.append("bytes or mb_per_s (one of them)")
    if missing:
        raise ScanError(f"{name}: header: missing column(s) {', '.join(missing)}")
    work = Workload()
    for row in reader:
        where = f"{name}:{reader.line_num}"
        if None in row or any(v is None for v in row.values()):
            raise ScanError(f"{where}: row: not as many fields as the header has columns")
        seconds = _number(where, "seconds", row["seconds"], positive=True)
        flushes = _number(where, "flushes", row["flushes"], positive=True)
        commits = _number(where, "transactions", row["transactions"], positive=True)
        open_trans = _number(where, "open_transactions", row["open_transactions"])
        if "bytes" in row:
            size = _number(where, "bytes", row["bytes"], positive=True)
        else:
            size = _number(where, "mb_per_s", row["mb_per_s"], positive=True) * MB_BYTES * seconds
        label = (row.get("label") or "").strip() or f"row {len(work.intervals) + 1}"
        work.intervals.append(
            Interval(
                label=label,
                rate=size / MB_BYTES / seconds,
                flush_pages=size / PAGE_BYTES / flushes,
                flush_seconds=seconds / flushes,
                trans_pages=size / PAGE_BYTES / commits,
                open_trans=open_trans,
                seconds=seconds,
            )
        )
    return work


def read(path: Path) -> Workload:
    """A scan file: CSV by its ``.csv`` suffix, else the scanner's text. Raises ScanError
    (also for an unreadable file) and says so when it holds no interval at all."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ScanError(f"{path}: file: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".csv":
        work = parse_csv(text, str(path))
    else:
        work = parse_scanner(text, str(path))
    if not work.intervals:
        raise ScanError(f"{path}: intervals: none found (scanner rate lines or CSV rows)")
    return work
