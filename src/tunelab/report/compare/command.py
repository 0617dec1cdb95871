"""`tunelab compare OLD NEW`: what changed between two runs of the same sweeps.

The comparison is ``report.compare.changes`` (matching in ``report.compare.match``, judging in
``analysis.change``), its text and tables ``report.compare.text`` and
``report.compare.table``, its page ``report.compare.page``, the alarms measured again
``report.compare.confirm``. This module is the command; the package gives the names callers use.

Exit codes: 1 when a point (or a whole run) got worse (with ``--confirm``: and did again),
0 otherwise, 2 for bad input (one line ``file: message`` on stderr, before anything is
measured or written).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from tunelab.report.compare import confirm, files
from tunelab.report.compare.changes import (
    BH,
    DEFAULT_LEVEL,
    DEFAULT_MIN_EFFECT,
    HOLM,
    WORSE,
    Comparison,
    compare_frames,
    read_history,
    record,
)
from tunelab.report.compare.history import History
from tunelab.report.compare.match import CompareInputError
from tunelab.report.compare.page import html_page
from tunelab.report.compare.table import json_doc, markdown, text_lines
from tunelab.report.compare.text import main_shifts, shift_line, summary_line
from tunelab.report.results_dir import ResultsDirError, load_side


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message}")


def _share(option: str) -> object:
    """A share strictly between 0 and 1: 0.05 or 5 % (a percentage needs its sign)."""

    def parse(text: str) -> float:
        try:
            value = float(text[:-1]) / 100 if text.strip().endswith("%") else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a number or a percentage (allowed: above 0 and below 1)"
            ) from None
        if not (0 < value < 1) or not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                f"{text!r} is outside (0, 1) (allowed: above 0 and below 1, e.g. 0.05 or 5%)"
            )
        return value

    parse.__name__ = option  # argparse names the option's type in its message
    return parse


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tunelab compare",
        description="What changed between two runs: per matched point, its change beyond the "
        "run's host shift, tested against the uncertainty of both runs' medians and the "
        "between-run variance of the engine's points; the Benjamini-Hochberg procedure over "
        "every point, metric and shift (--strict: Holm's), a flagged change past "
        "--min-effect too. Exit 1 when a point or a whole run got worse, 2 for bad input.",
    )
    p.add_argument("old", type=Path, metavar="OLD", help="results directory or result CSV")
    p.add_argument("new", type=Path, metavar="NEW", help="results directory or result CSV")
    p.add_argument(
        "--fdr",
        type=_share("--fdr"),
        default=DEFAULT_LEVEL,
        help="false-discovery rate of the flags (default 0.05; under --strict the "
        "family-wise rate)",
    )
    p.add_argument(
        "--min-effect",
        type=_share("--min-effect"),
        default=DEFAULT_MIN_EFFECT,
        help="a flagged change's estimate beyond its block's shift must be past "
        "this too (default 0.05: NEW/OLD above 1.05 worse, below 1/1.05 "
        "better)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="Holm's procedure instead: a family-wise false-alarm rate of --fdr "
        "whatever changed, and less power when several points changed",
    )
    p.add_argument(
        "--html",
        type=Path,
        default=Path("compare.html"),
        help="comparison page to write (default: compare.html)",
    )
    p.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="the tables as Markdown, for a CI job's summary",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="the tables as JSON")
    p.add_argument(
        "--confirm",
        action="store_true",
        help="measure the flagged points' blocks again on this checkout, in new "
        "rounds, and keep only the alarms that repeat",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path(".tunelab"),
        help="engine data directories for --confirm (default .tunelab)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path("data"),
        help="cached generated data sets for --confirm (default data)",
    )
    p.add_argument(
        "--history",
        type=Path,
        metavar="FILE",
        help="A/A history to read and update (default: compare-history.json in "
        "NEW's results directory, with OLD's carried over)",
    )
    p.add_argument(
        "--no-record", action="store_true", help="do not record this comparison in the A/A history"
    )
    return p


def _save(history: History, result: Comparison) -> None:
    if not history.changed:
        return
    try:
        history.save()
    except OSError as exc:
        print(
            f"{exc.filename or history.path}: {exc.strerror or exc} (A/A history not saved)",
            file=sys.stderr,
        )
        return
    print(
        f"tunelab compare: {result.recorded} A/A comparison(s) of commit {result.aa_commit} "
        f"recorded in {history.path}",
        file=sys.stderr,
    )


def compare_main(argv: Sequence[str] | None = None, prepare: confirm.Prepare | None = None) -> int:
    """The command; ``prepare`` measures points again for ``--confirm`` (the measuring
    layer's, given by ``tunelab.cli.compare``)."""
    from tunelab.host import atomic

    try:
        args = _parser().parse_args(argv)
        if args.confirm and prepare is None:
            raise _UsageError("tunelab compare: --confirm: nothing here can measure")
        outputs = {"--html": args.html, "--markdown": args.markdown, "--json": args.json}
        files.check_outputs(outputs)
        history = read_history(args.old, args.new, args.history)
        old, new = load_side(args.old), load_side(args.new)
        procedure = HOLM if args.strict else BH
        result = compare_frames(
            old, new, args.fdr, args.min_effect, history, str(args.old), str(args.new), procedure
        )
        measure = None
        if args.confirm:
            try:
                measure = confirm.prepared(result, new, prepare, args.workdir, args.data_dir)
            except ValueError as exc:
                raise CompareInputError(f"--confirm: {exc}") from None
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except (_UsageError, ResultsDirError) as exc:
        print(exc, file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{exc.filename or args.old}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not args.no_record:  # judged on the rows compared, before any measuring again
        record(result, history)
        _save(history, result)
    if measure is not None:
        confirm.confirm(result, old, measure)
    summary = summary_line(result)
    shifts = [shift_line(s) for s in main_shifts(result) if s.verdict == WORSE or s.host]
    written = []
    try:
        written.append(atomic.write_text(args.html, html_page(result)))
        if args.markdown:
            body = markdown(result, summary, shifts)
            confirmed = confirm.confirmation_line(result)
            if confirmed:
                body += f"\n{confirmed}\n"
            written.append(atomic.write_text(args.markdown, files.markdown_text(body)))
        if args.json:
            doc = json_doc(result, summary, result.shifts)
            if result.confirmation is not None:
                c = result.confirmation
                doc["confirmation"] = {
                    "points": c.points,
                    "repetitions": c.repetitions,
                    "seconds": round(c.seconds, 1),
                    "alarms": c.alarms,
                    "repeated": sorted(c.repeated),
                }
            written.append(atomic.write_text(args.json, files.json_text(doc)))
    except OSError as exc:
        print(f"{exc.filename or args.html}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for line in text_lines(result):
        print(line)
    if result.confirmation is not None:
        print(confirm.confirmation_line(result))
    print(f"tunelab compare: wrote {', '.join(map(str, written))}", file=sys.stderr)
    return 1 if result.worse else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(compare_main())
