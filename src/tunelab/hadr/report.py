"""The calculator's text report, in the layout IBM's script prints (so that its published
examples can be compared digit for digit): per interval an ``actual`` line and one line
per mode (target, min, max groups), then the remote catch-up line against the average
rate, then the max flush size section. Flush sizes print truncated to whole pages, as the
script's ``%3d`` does."""

from __future__ import annotations

from collections.abc import Sequence

from tunelab.hadr.model import (
    Interval,
    Link,
    Mode,
    Point,
    Score,
    catchup,
    catchup_marker,
    flush_sizes,
    score,
)


def group(p: Point, rate: float | None = None) -> str:
    rate = p.rate if rate is None else rate
    return f"{rate:7.3f} MB/s@ {int(p.pages):3d} pg/f {p.seconds:.6f} s/f"


def _head(name: str, mark: str, width: int = 10) -> str:
    return f"{name:<{width}s} {mark:<3s} "


def header(link: Link) -> list[str]:
    lines = [
        f"Network speed {link.net_rate:g} MB/s, {link.rtt:g} second round trip time",
        f"Disk speed {link.disk_rate:g} MB/s, {link.disk_overhead:g} second overhead per write",
    ]
    # not IBM's (no HADR mode waits for replay): printed only when given
    return lines + ([f"Standby replay {link.apply:g} second per flush"] if link.apply else [])


def interval_lines(interval: Interval, scores: Sequence[Score], width: int = 10) -> list[str]:
    seconds = f"{interval.seconds:g} sec, " if interval.seconds is not None else ""
    lines = [
        f"{interval.label}  {interval.rate:.3f} MB/s, {seconds}{interval.flush_pages:.1f} pg/f, "
        f"{interval.flush_seconds:.6f} sec/f, {interval.trans_pages:.1f} pg/tr, "
        f"nOpenTrans {interval.open_trans:.1f}",
        # the measured rate, not one recomputed from the averages
        _head("actual", "", width)
        + group(Point(interval.flush_pages, interval.flush_seconds), interval.rate),
    ]
    for s in scores:
        lines.append(
            _head(s.mode.name, s.marker, width)
            + group(s.target)
            + ", min "
            + group(s.min)
            + ", max "
            + group(s.max)
        )
    return lines


def catchup_lines(link: Link, average_rate: float | None) -> list[str]:
    rcu = catchup(link)
    if average_rate is None:
        return [_head("REMOTE CATCHUP", "") + group(rcu)]
    return [
        f"{'Average rate':<14s} {'':<3s} {average_rate:7.3f} MB/s",
        _head("REMOTE CATCHUP", catchup_marker(average_rate, rcu.rate)) + group(rcu),
    ]


def render(
    intervals: Sequence[Interval],
    modes: Sequence[Mode],
    link: Link,
    average_rate: float | None = None,
) -> tuple[list[str], list[Score]]:
    """The report's lines and every score behind them. Without the scanner's average,
    the average is the mean of the intervals' rates."""
    lines = header(link)
    width = max([10, *(len(m.name) for m in modes)])
    scores: list[Score] = []
    for interval in intervals:
        mine = [score(interval, mode, link) for mode in modes]
        scores.extend(mine)
        lines += ["", *interval_lines(interval, mine, width)]
    if average_rate is None and intervals:
        average_rate = sum(i.rate for i in intervals) / len(intervals)
    lines += ["", *catchup_lines(link, average_rate), ""]
    for mode in modes:
        sizes = flush_sizes(scores, mode)
        lines.append(
            f"{mode.name:<{width}s} Max flush size: predicted {int(sizes.predicted):3d} pages, "
            f"workload max {int(sizes.workload_max):3d} pages"
        )
    return lines, scores
