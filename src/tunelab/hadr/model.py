"""The log-shipping model of IBM's HADR calculator (``hadrCalculator.pl`` in IBM's
db2-hadr-wiki repository, described on its wiki pages db2logscan and perfTuning), re-derived:
what one flush of F log pages costs the primary's log writer when the log is also shipped
to a standby, and so the logging rate a replication mode allows.

Per flush of F pages (4 KiB each, in MB of 2^20 bytes as the script counts them):
write time ``w = overhead + F / disk_rate`` (the same disk on both sides), send time
``s = F / net_rate``. What the writer waits for is set by two things, so that any engine's
modes can be written without naming the engine here:

- the *ordering*: ``flush-then-send`` ships only log already written locally (the send
  follows the local write), ``write-while-send`` writes and ships the same flush at once;
- the *ack*: what the commit waits for from the standby: ``remote-flush`` (written to its
  disk), ``remote-write`` (received, not yet on its disk) or ``none``; ``remote-apply``
  (flushed and replayed, PostgreSQL's ``remote_apply``) has no IBM mode: it adds the
  standby's replay time, an input (``Link.apply``) the model does not derive.

Flush time: no ack ``max(w, s)`` (writing and shipping overlap, the slower one paces);
``flush-then-send`` ``w + s + RTT`` plus ``w`` for a remote flush (``w + apply`` for a
remote apply); ``write-while-send`` ``max(w, s + RTT)`` plus the same inside the max. IBM's SYNC is
flush-then-send/remote-flush (``w + s + w + RTT``), NEARSYNC write-while-send/remote-write
(``max(w, s + RTT)``), ASYNC no ack, SUPERASYNC no ack at a fixed 16-page shipping size
(remote catch-up: log read back from the files in 16-page pieces). Rate = F / time.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

PAGE_BYTES = 4096
MB_BYTES = 1024 * 1024  # the script's MB: pages * 4096 / 1024 / 1024
CATCHUP_PAGES = 16  # remote catch-up reads and ships the log in fixed 16-page pieces


class Ordering(enum.StrEnum):
    FLUSH_THEN_SEND = "flush-then-send"
    WRITE_WHILE_SEND = "write-while-send"


class Ack(enum.StrEnum):
    REMOTE_APPLY = "remote-apply"
    REMOTE_FLUSH = "remote-flush"
    REMOTE_WRITE = "remote-write"
    NONE = "none"


@dataclass(frozen=True)
class Mode:
    """A replication mode as the model sees it. ``fixed_pages``: the mode ships that many
    pages whatever the workload's flush size (remote catch-up)."""

    name: str
    ordering: Ordering
    ack: Ack
    fixed_pages: float | None = None


SYNC = Mode("SYNC", Ordering.FLUSH_THEN_SEND, Ack.REMOTE_FLUSH)
NEARSYNC = Mode("NEARSYNC", Ordering.WRITE_WHILE_SEND, Ack.REMOTE_WRITE)
ASYNC = Mode("ASYNC", Ordering.WRITE_WHILE_SEND, Ack.NONE)
SUPERASYNC = Mode("SUPERASYNC", Ordering.WRITE_WHILE_SEND, Ack.NONE, CATCHUP_PAGES)
CALCULATOR_MODES = {m.name: m for m in (SYNC, NEARSYNC, ASYNC, SUPERASYNC)}
DEFAULT_MODES = ("SYNC", "NEARSYNC", "ASYNC")  # the script's default -syncmode


@dataclass(frozen=True)
class Link:
    """Disk (MB/s, seconds per write) and network (MB/s, round trip in seconds); ``apply``:
    the seconds a standby takes from flushing a flush to reporting it replayed."""

    disk_rate: float
    disk_overhead: float
    net_rate: float
    rtt: float
    apply: float = 0.0

    def write_time(self, pages: float) -> float:
        return self.disk_overhead + megabytes(pages) / self.disk_rate

    def send_time(self, pages: float) -> float:
        return megabytes(pages) / self.net_rate


def megabytes(pages: float) -> float:
    return pages * PAGE_BYTES / MB_BYTES


def flush_time(mode: Mode, pages: float, link: Link) -> float:
    """Seconds the log writer spends per flush of ``pages`` pages in ``mode``."""
    w, s = link.write_time(pages), link.send_time(pages)
    if mode.ack is Ack.NONE:
        return max(w, s)
    remote = {Ack.REMOTE_APPLY: w + link.apply, Ack.REMOTE_FLUSH: w}.get(mode.ack, 0.0)
    if mode.ordering is Ordering.FLUSH_THEN_SEND:
        return w + s + remote + link.rtt
    return max(w, s + link.rtt + remote)


@dataclass(frozen=True)
class Point:
    """A flush size, its flush time and the logging rate (MB/s) they make."""

    pages: float
    seconds: float

    @property
    def rate(self) -> float:
        return megabytes(self.pages) / self.seconds if self.seconds > 0 else 0.0


def point(mode: Mode, pages: float, link: Link) -> Point:
    return Point(pages, flush_time(mode, pages, link))


def target(mode: Mode, rate: float, low: Point, high: Point, link: Link) -> Point:
    """The flush size whose rate matches ``rate``, by bisection between ``low`` and
    ``high`` (rate grows with flush size in every mode). As IBM's script does, the search
    stops once the bracket is at most one page wide and rounds up to its upper end."""
    if rate <= low.rate:
        return low
    if rate >= high.rate:
        return high
    while high.pages - low.pages > 1:
        mid = point(mode, (low.pages + high.pages) / 2, link)
        if rate > mid.rate:
            low = mid
        else:
            high = mid
    return high


@dataclass(frozen=True)
class Interval:
    """One sampling interval of a workload's log: its logging rate (MB/s), the average
    flush (pages, seconds), the average transaction (pages) and open transactions."""

    label: str
    rate: float
    flush_pages: float
    flush_seconds: float
    trans_pages: float
    open_trans: float
    seconds: float | None = None


@dataclass(frozen=True)
class Score:
    """A mode on one interval: at the actual flush size (min), at the flush size all open
    transactions would make (max), and at the size that keeps the workload's rate
    (target; min when min already does, max when even max cannot)."""

    mode: Mode
    target: Point
    min: Point
    max: Point
    marker: str


def score(interval: Interval, mode: Mode, link: Link) -> Score:
    pages = mode.fixed_pages if mode.fixed_pages is not None else interval.flush_pages
    low = point(mode, pages, link)
    if mode.fixed_pages is not None:
        high = low
    else:
        high = point(mode, max(pages, interval.trans_pages * interval.open_trans), link)
    best = target(mode, interval.rate, low, high, link)
    return Score(mode, best, low, high, marker(interval.rate, low.rate, high.rate))


def marker(rate: float, min_rate: float, max_rate: float) -> str:
    """IBM's impact marker: blank when the mode keeps up at the actual flush size, then
    "?", "??", "???" as the workload's rate passes a quarter and a half of the mode's
    max rate (small, medium, heavy impact on commit time)."""
    if rate <= min_rate:
        return ""
    if rate > max_rate / 2:
        return "???"
    if rate > max_rate / 4:
        return "??"
    return "?"


def catchup(link: Link) -> Point:
    """Remote catch-up: shipping without acks in 16-page pieces."""
    return point(ASYNC, CATCHUP_PAGES, link)


def catchup_marker(average_rate: float, catchup_rate: float) -> str:
    """Whether a standby behind can catch up: "???" when the workload's average rate is
    above the catch-up rate, "??" above 75 % of it, "?" above 50 %."""
    if average_rate > catchup_rate:
        return "???"
    if average_rate > catchup_rate * 0.75:
        return "??"
    if average_rate > catchup_rate * 0.5:
        return "?"
    return ""


@dataclass(frozen=True)
class FlushSizes:
    """The max flush size section: over all intervals, the largest target flush size
    ("predicted") and the largest max flush size ("workload max"), which the standby's
    socket buffer and the log buffer should hold."""

    mode: Mode
    predicted: float
    workload_max: float


def flush_sizes(scores: list[Score], mode: Mode) -> FlushSizes:
    mine = [s for s in scores if s.mode == mode]
    return FlushSizes(
        mode,
        max((s.target.pages for s in mine), default=0.0),
        max((s.max.pages for s in mine), default=0.0),
    )
