"""``tunelab probe disk DIR`` and ``tunelab probe network``: measure the log disk and the
standby's link for ``tunelab hadr-calc`` (``tunelab.probes.disk``, ``tunelab.probes.network``).
Bad arguments and a probe that cannot run end with one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tunelab.calibrate.fio import FioError
from tunelab.calibrate.parse import FioOutputError
from tunelab.probes import disk, network

PROG = "tunelab probe"


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        raise UsageError(message)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
    return value


def _at_least_zero(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {text}")
    return value


def _count(low: int, high: int):
    def parse(text: str) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number {low}..{high}, not {text}")
        return int(text)

    return parse


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__)
    sub = p.add_subparsers(dest="what", required=True, parser_class=_Parser)
    d = sub.add_parser("disk", help="1-page and 1000-page synchronous writes (fio)")
    d.add_argument("dir", type=Path, help="a directory on the log disk")
    d.add_argument("--seconds", type=_positive, default=2.0, help="per size and repetition")
    d.add_argument("--repetitions", type=_count(1, 20), default=3, metavar="1..20")
    n = sub.add_parser("network", help="round trip and send rate through the delay proxy")
    n.add_argument(
        "--rtt-ms",
        type=_at_least_zero,
        default=0.0,
        help="the proxy's round trip, as network_rtt_ms (default 0)",
    )
    n.add_argument("--megabytes", type=_positive, default=64.0, help="sent per measurement")
    n.add_argument("--pings", type=_count(10, 10000), default=200, metavar="10..10000")
    return p


def _run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.what == "disk":
        if not args.dir.is_dir():
            raise UsageError(f"{args.dir}: no such directory")
        result = disk.probe(args.dir, args.seconds, args.repetitions)
    else:
        result = network.probe(args.rtt_ms, args.megabytes, args.pings)
    print("\n".join(result.lines()))
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(list(argv or []))
    except (UsageError, FioError, FioOutputError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
