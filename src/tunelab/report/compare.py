"""`tunelab compare OLD NEW`: what changed between two runs of the same sweeps.

The comparison is ``report.comparison`` (matching in ``report.compare_match``, judging in
``analysis.change``), its text ``report.compare_text``, its page ``report.compare_html``.
This module is the command, and the names callers use.

Exit codes: 1 when a point (or a whole run) got worse, 0 otherwise, 2 for bad input (one
line ``file: message`` on stderr).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from tunelab.report import compare_history
from tunelab.report.compare_html import html_page
from tunelab.report.compare_match import CompareInputError, load_side, result_files
from tunelab.report.compare_text import (
    change_line,
    main_shifts,
    shift_line,
    summary_line,
    text_lines,
)
from tunelab.report.comparison import (
    BETTER,
    DEFAULT_ALPHA,
    DEFAULT_THRESHOLD,
    NOISY,
    RANK,
    SAME,
    TOO_FEW,
    WORSE,
    Comparison,
    MetricChange,
    compare,
    compare_frames,
    read_history,
    record,
)

__all__ = [
    "BETTER", "DEFAULT_ALPHA", "DEFAULT_THRESHOLD", "NOISY", "RANK", "SAME", "TOO_FEW",
    "WORSE", "CompareInputError", "Comparison", "MetricChange", "change_line", "compare",
    "compare_frames", "compare_main", "load_side", "main_shifts", "read_history", "record",
    "result_files", "shift_line", "summary_line", "text_lines",
]  # fmt: skip


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message}")


def _fraction(text: str, zero: bool = False) -> float:
    """0.1 or 10 % (a percentage needs its sign, so 1 stays 100 %)."""
    try:
        value = float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or a percentage") from None
    if not (value >= 0 if zero else value > 0) or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be {'0 or ' if zero else ''}above 0")
    return value


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tunelab compare",
        description="What changed between two runs: per matched point, its change beyond the "
        "run's host shift, tested against the uncertainty of both runs' medians and the "
        "between-run variance of the engine's points, Holm over every point and metric (a "
        "family-wise false-alarm rate of --alpha). Exit 1 when a point or a whole run got "
        "worse, 2 for bad input.",
    )
    p.add_argument("old", type=Path, metavar="OLD", help="results directory or result CSV")
    p.add_argument("new", type=Path, metavar="NEW", help="results directory or result CSV")
    p.add_argument("--html", type=Path, default=Path("compare.html"),
                   help="comparison report to write (default: compare.html)")  # fmt: skip
    p.add_argument("--threshold", type=lambda t: _fraction(t, zero=True),
                   default=DEFAULT_THRESHOLD,
                   help="flag only changes shown past this (0.1 or 10%%; default 0)")  # fmt: skip
    p.add_argument("--alpha", type=_fraction, default=DEFAULT_ALPHA,
                   help="family-wise false-alarm rate (default 0.05)")  # fmt: skip
    p.add_argument("--history", type=Path, metavar="FILE",
                   help="A/A history to read and update (default: compare-history.json in "
                   "NEW's results directory, with OLD's carried over)")  # fmt: skip
    p.add_argument("--no-record", action="store_true",
                   help="do not record this comparison in the A/A history")  # fmt: skip
    return p


def _save(history: compare_history.History, result: Comparison) -> None:
    if not history.changed:
        return
    try:
        history.save()
    except OSError as exc:
        print(f"{exc.filename or history.path}: {exc.strerror or exc} (A/A history not saved)",
              file=sys.stderr)  # fmt: skip
        return
    print(f"tunelab compare: {result.recorded} A/A comparison(s) of commit {result.aa_commit} "
          f"recorded in {history.path}", file=sys.stderr)  # fmt: skip


def compare_main(argv: Sequence[str] | None = None) -> int:
    from tunelab import atomic

    try:
        args = _parser().parse_args(argv)
        if args.alpha >= 1:
            raise _UsageError("tunelab compare: --alpha must be below 1")
        history = read_history(args.old, args.new, args.history)
        result = compare(args.old, args.new, args.alpha, args.threshold, history)
        if not args.no_record:
            record(result, history)
            _save(history, result)
        out = atomic.write_text(args.html, html_page(result))
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (_UsageError, CompareInputError) as exc:
        print(exc, file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{exc.filename or args.html}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for line in text_lines(result):
        print(line)
    print(f"tunelab compare: wrote {out}", file=sys.stderr)
    return 1 if result.worse else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(compare_main())
