"""`tunelab logscan RESULTS...`: the log traffic of the lab's write points, as IBM's log
scanner (db2logscan) reports a workload's, so that `tunelab hadr-calc` can predict what
shipping that log to a standby would cost.

Every repetition of a write point is one interval: its timed section's seconds, the log
bytes the engine wrote in it (``c_log_bytes``: PostgreSQL's pg_stat_wal, InnoDB's redo,
Db2's MON_GET_TRANSACTION_LOG), the writes that wrote them (``c_log_writes``: the log
writer's flushes), the transactions the section committed and those open at a time (one per
client thread). From them, per interval: MB/s (MB of 2^20 bytes, as IBM's tools count),
pages (4 KiB) per flush, seconds per flush (the section's time over its flushes: the writer
taken as never idle), pages per transaction, open transactions. SQLite records none (its
rollback journal is no log to ship).

``--csv`` prints the intervals in the calculator's CSV input (``docs/hadr.md``), the
arithmetic on both sides being the calculator's own (``tunelab.hadr.scan``).

Exit codes: 0; 2 for bad input or no write rows with log counters (one line on stderr).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tunelab.hadr.scan import ScanError, parse_csv
from tunelab.report.results_dir import ResultsDirError, load_side

CSV_COLUMNS = ("label", "seconds", "bytes", "flushes", "transactions", "open_transactions")
NEEDED = ("elapsed_s", "c_log_bytes", "c_log_writes", "transactions", "open_transactions")


class LogscanError(ValueError):
    """Bad input; the message is one line."""


def intervals(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """One row per write repetition with log counters, in the calculator's CSV columns."""
    missing = [c for c in NEEDED if c not in frame]
    if missing:
        raise LogscanError(
            f"{source}: columns: no {', '.join(missing)} (log counters come with the write "
            "points of an engine that keeps a log to ship: docs/hadr.md)"
        )
    num = {c: pd.to_numeric(frame[c], errors="coerce") for c in NEEDED}
    usable = (num["c_log_bytes"] > 0) & (num["c_log_writes"] > 0) & (num["transactions"] > 0)
    usable &= (num["elapsed_s"] > 0) & num["open_transactions"].notna()
    rows = frame[usable]
    if rows.empty:
        raise LogscanError(f"{source}: rows: no write repetition wrote any log")
    label = (
        rows["engine"].astype(str)
        + "/"
        + rows["sweep"].astype(str)
        + "/"
        + rows["point_id"].astype(str)
        + "#"
        + rows["rep"].astype(str)
    )
    return pd.DataFrame(
        {
            "label": label,
            "seconds": num["elapsed_s"][usable],
            "bytes": num["c_log_bytes"][usable],
            "flushes": num["c_log_writes"][usable],
            "transactions": num["transactions"][usable],
            "open_transactions": num["open_transactions"][usable],
        }
    )


def read(paths: Sequence[Path]) -> pd.DataFrame:
    frames = []
    for path in paths:
        try:
            frame = load_side(path)
        except ResultsDirError as exc:
            raise LogscanError(str(exc)) from None
        frames.append(intervals(frame, str(path)))
    return pd.concat(frames, ignore_index=True)


def csv_text(table: pd.DataFrame) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in table.itertuples(index=False):
        writer.writerow([row.label, *(f"{getattr(row, c):.9g}" for c in CSV_COLUMNS[1:])])
    return out.getvalue()


def text_lines(table: pd.DataFrame) -> list[str]:
    """IBM's scanner fields per interval, then the average rate over them all."""
    try:
        work = parse_csv(csv_text(table), "rows")
    except ScanError as exc:  # the rows were checked above: a bug, not bad input
        raise LogscanError(str(exc)) from None
    width = max(len(i.label) for i in work.intervals)
    lines = [
        f"{i.label:<{width}}  {i.rate:8.3f} MB/s, {i.seconds:8.3f} sec, {i.flush_pages:6.1f} "
        f"pg/f, {i.flush_seconds:.6f} sec/f, {i.trans_pages:7.1f} pg/tr, "
        f"nOpenTrans {i.open_trans:5.1f}"
        for i in work.intervals
    ]
    seconds = sum(i.seconds or 0 for i in work.intervals)
    mb = sum(i.rate * (i.seconds or 0) for i in work.intervals)
    average = mb / seconds if seconds else math.nan
    lines.append(f"{len(work.intervals)} intervals, {seconds:.3f} sec, average {average:.3f} MB/s")
    return lines


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise LogscanError(f"tunelab logscan: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tunelab logscan", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "results",
        nargs="+",
        type=Path,
        help="results directories (<engine>/<sweep>.csv) or result CSVs",
    )
    p.add_argument(
        "--csv", action="store_true", help="print the intervals as `tunelab hadr-calc` reads them"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        table = read(args.results)
        out = csv_text(table) if args.csv else "\n".join(text_lines(table)) + "\n"
    except LogscanError as exc:
        print(exc, file=sys.stderr)
        return 2
    sys.stdout.write(out)
    return 0
