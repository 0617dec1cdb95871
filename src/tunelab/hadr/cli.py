"""`tunelab hadr-calc --disk RATE OVERHEAD --network RATE RTT SCAN...`: the logging rate a
workload would get in each replication mode (docs/hadr.md).

``main(argv, ...)`` parses its own arguments (without the leading ``hadr-calc``) and returns
an exit status. Bad input is one line on stderr, ``option: message`` or
``file:line: field: message``, and status 2. The engines' modes come in through
``engine_modes`` and a calibration's disk through ``disk_from`` (the command layer passes
them): this module sits below the engines and the calibration and never imports them.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tunelab.hadr import report, scan
from tunelab.hadr.model import CALCULATOR_MODES, DEFAULT_MODES, Link, Mode

PROG = "tunelab hadr-calc"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, `option: message`, no usage dump
        required = "the following arguments are required: "
        if message.startswith(required):
            message = f"{message[len(required) :].split(',')[0]}: required"
        elif message == "one of the arguments --disk --calibration is required":
            message = "--disk: required (or --calibration)"
        raise UsageError(message.removeprefix("argument "))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG,
        description=(
            "IBM's HADR calculator model: for every interval of a workload's log, the "
            "logging rate each replication mode allows at the actual flush size (min), at "
            "the flush size all open transactions would make (max) and at the size that "
            "keeps the workload's rate (target), with IBM's ?, ??, ??? impact markers, "
            "remote catch-up and the max flush sizes (socket and log buffer sizing)."
        ),
        epilog=(
            "SCAN: the log scanner's text output (rate lines and the log write rate "
            "distribution), or a .csv with columns seconds, bytes or mb_per_s, flushes, "
            "transactions, open_transactions [, label]; '-' reads scanner text from stdin. "
            "MB is 2^20 bytes, pages are 4 KiB."
        ),
    )
    p.add_argument("scans", nargs="+", metavar="SCAN", help="workload files (see below)")
    disk = p.add_mutually_exclusive_group(required=True)
    disk.add_argument(
        "--disk",
        nargs=2,
        metavar=("RATE", "OVERHEAD"),
        help="log disk write rate (MB/s) and overhead per write (s)",
    )
    disk.add_argument(
        "--calibration",
        metavar="FILE",
        help="the disk's write model from `tunelab calibrate` instead",
    )
    p.add_argument(
        "--network",
        nargs=2,
        required=True,
        metavar=("RATE", "RTT"),
        help="primary-standby send rate in MB/s and round trip in seconds",
    )
    p.add_argument(
        "--apply",
        metavar="SECONDS",
        default="0",
        help="the standby's replay time per flush, for modes that wait for replay "
        "(remote-apply ack; default 0: a lower bound)",
    )
    p.add_argument(
        "--modes",
        metavar="LIST",
        help="comma-separated modes, case-insensitive (default: "
        f"{','.join(DEFAULT_MODES)}, or all of --engine's)",
    )
    p.add_argument(
        "--engine", metavar="NAME", help="model that engine's replication settings, not IBM's modes"
    )
    return p


def _number(option: str, label: str, text: str, *, positive: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{option}: {label} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        kind = "positive" if positive else "0 or more"
        raise UsageError(f"{option}: {label} {text!r} must be {kind}")
    return value


DiskFrom = Callable[[str], tuple[float, float]]


def link_from(args: argparse.Namespace, disk_from: DiskFrom | None = None) -> Link:
    if args.calibration is not None:
        if disk_from is None:
            raise UsageError("--calibration: not available here")
        try:
            rate, overhead = disk_from(args.calibration)
        except (ValueError, OSError) as exc:
            raise UsageError(f"--calibration: {exc}") from None
    else:
        rate = _number("--disk", "RATE", args.disk[0], positive=True)
        overhead = _number("--disk", "OVERHEAD", args.disk[1], positive=False)
    return Link(
        disk_rate=rate,
        disk_overhead=overhead,
        net_rate=_number("--network", "RATE", args.network[0], positive=True),
        rtt=_number("--network", "RTT", args.network[1], positive=False),
        apply=_number("--apply", "SECONDS", args.apply, positive=False),
    )


def modes_from(
    args: argparse.Namespace,
    engine_names: Sequence[str],
    engine_modes: Callable[[str], dict[str, Mode]] | None,
) -> list[Mode]:
    table = CALCULATOR_MODES
    if args.engine is not None:
        if args.engine not in engine_names or engine_modes is None:
            known = ", ".join(engine_names) or "none"
            raise UsageError(f"--engine: {args.engine!r} is not an engine (one of: {known})")
        table = engine_modes(args.engine)
        if not table:
            raise UsageError(f"--engine: {args.engine} has no replication modes modelled")
    if args.modes is None:
        names = DEFAULT_MODES if table is CALCULATOR_MODES else tuple(table)
        return [table[n] for n in names]
    by_name = {n.casefold(): m for n, m in table.items()}
    chosen = []
    for name in (n.strip() for n in args.modes.split(",")):
        if name.casefold() not in by_name:
            raise UsageError(f"--modes: {name!r} is not a mode (one of: {', '.join(table)})")
        chosen.append(by_name[name.casefold()])
    return chosen


def load(paths: Sequence[str]) -> scan.Workload:
    """Every file's intervals in order; the scanner's own average when one file gives it,
    else the mean of the intervals' rates (what the scanner's average is)."""
    work = scan.Workload()
    averages = []
    for name in paths:
        if name == "-":
            part = scan.parse_scanner(sys.stdin.read(), "stdin")
            if not part.intervals:
                raise scan.ScanError("stdin: intervals: none found (scanner rate lines)")
        else:
            part = scan.read(Path(name))
        work.intervals += part.intervals
        averages.append(part.average_rate)
    if len(averages) == 1:
        work.average_rate = averages[0]
    return work


def run(
    argv: Sequence[str],
    engine_names: Sequence[str] = (),
    engine_modes: Callable[[str], dict[str, Mode]] | None = None,
    disk_from: DiskFrom | None = None,
) -> list[str]:
    """The report's lines; raises UsageError or scan.ScanError on bad input."""
    args = build_parser().parse_args(list(argv))
    link = link_from(args, disk_from)
    modes = modes_from(args, engine_names, engine_modes)
    work = load(args.scans)
    lines, _ = report.render(work.intervals, modes, link, work.average_rate)
    return lines


def main(
    argv: Sequence[str] | None = None,
    engine_names: Sequence[str] = (),
    engine_modes: Callable[[str], dict[str, Mode]] | None = None,
    disk_from: DiskFrom | None = None,
) -> int:
    try:
        argv = sys.argv[1:] if argv is None else argv
        lines = run(argv, engine_names, engine_modes, disk_from)
    except (UsageError, scan.ScanError) as exc:
        sys.stderr.write(f"{str(exc).splitlines()[0]}\n")
        return 2
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
