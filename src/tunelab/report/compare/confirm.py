"""`tunelab compare --confirm`: the alarms measured again before they are believed.

The points of every block an alarm is in (a flagged point's block: a sweep's points of one
workload and cache state; a flagged block shift's; every point of an engine whose run-wide
shift was flagged) are measured again on the current checkout in new rounds (the caller's
``measure``), and those rows are compared with OLD's rows of the same points by the same
procedure, as NEW was. An alarm stands when that second comparison flags it worse too: a
point's time (its throughput) or reads, or the block's (engine's) shift. Re-measuring the
whole block, not the flagged point alone, gives the second comparison the block's shift to
take out, as the first had.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from tunelab.analysis import change
from tunelab.report.compare.changes import WORSE, Comparison, Confirmation, block, compare_frames
from tunelab.report.compare.match import groups
from tunelab.report.compare.text import change_line, shift_line

# Measures the given rows' points again: (rows, work directory, data-set directory) -> a
# function that measures them; raises ValueError for bad input before anything is measured.
Prepare = Callable[[pd.DataFrame, Path, Path], Callable[[], pd.DataFrame]]


def point_alarm(engine_sweep: str, point: str, family: str) -> str:
    return f"{engine_sweep}/{point}|{family.rsplit('/', 1)[-1]}"


def shift_alarm(s: change.Shift) -> str:
    return f"{s.group}|{s.kind or '(all)'}"


def alarms(result: Comparison) -> tuple[set[str], set[tuple[str, str]]]:
    """(each alarm's key, the blocks (engine, kind; kind "" = all its points) to measure
    again)."""
    keys, blocks = set(), set()
    for s, p, c in result.changes():
        if c.judged.verdict == change.WORSE:
            est = c.judged.estimate
            keys.add(point_alarm(s.name, p.point, est.family or est.key))
            blocks.add((s.engine, est.kind))
    for sh in result.shifts:
        if sh.verdict == WORSE:
            keys.add(shift_alarm(sh))
            blocks.add((sh.group.split(":")[0], sh.kind))
    return keys, blocks


def rows_of_blocks(frame: pd.DataFrame, blocks: set[tuple[str, str]]) -> pd.DataFrame:
    """The rows of every point in ``blocks``."""
    keep = []
    for key, rows in groups(frame, ["engine", "sweep", "point_id"]).items():
        engine, sweep = key[0], key[1]
        if (engine, "") in blocks or (engine, block(sweep, rows)) in blocks:
            keep.append(rows)
    return pd.concat(keep, ignore_index=True, sort=False) if keep else frame.iloc[:0]


def prepared(
    result: Comparison, new: pd.DataFrame, prepare: Prepare, workdir: Path, data_dir: Path
) -> Callable[[], pd.DataFrame] | None:
    """The measuring of the alarms' blocks, checked before anything is measured (None: no
    alarm). Raises ValueError for points that cannot be measured again."""
    keys, blocks = alarms(result)
    if not keys:
        return None
    return prepare(rows_of_blocks(new, blocks), workdir, data_dir)


def confirm(result: Comparison, old: pd.DataFrame, measure: Callable[[], pd.DataFrame]) -> None:
    """Measure the alarms' blocks again, compare them with OLD and keep the alarms that
    repeat (``result.confirmation``; each flagged change's ``repeated``)."""
    keys, _ = alarms(result)
    t0 = time.monotonic()
    again = measure()
    seconds = time.monotonic() - t0
    wanted = set(
        zip(again["engine"].astype(str), again["sweep"].astype(str), again["point_id"].astype(str))
    )
    rows = zip(old["engine"].astype(str), old["sweep"].astype(str), old["point_id"].astype(str))
    mine = [k in wanted for k in rows]
    second = compare_frames(
        old[mine],
        again,
        result.level,
        result.min_effect,
        None,
        result.old,
        "measured again",
        result.procedure,
    )
    flagged, _ = alarms(second)
    repeated = keys & flagged
    for s, p, c in result.changes():
        if c.judged.verdict == change.WORSE:
            est = c.judged.estimate
            c.repeated = point_alarm(s.name, p.point, est.family or est.key) in repeated
    lines = [
        change_line(s.name, p.point, c, second)
        for s, p, c in second.changes()
        if c.judged.verdict == change.WORSE
    ]
    lines += [shift_line(sh) for sh in second.shifts if sh.verdict == WORSE]
    result.confirmation = Confirmation(len(wanted), len(again), seconds, len(keys), repeated, lines)


def confirmation_line(result: Comparison) -> str:
    """E.g. "confirm: 6 points measured again (36 repetitions, 41 s): 1 of 2 alarms
    repeated"."""
    c = result.confirmation
    if c is None:
        return ""
    return (
        f"confirm: {c.points} point(s) measured again in new rounds ({c.repetitions} "
        f"repetitions, {c.seconds:.0f} s): {len(c.repeated)} of {c.alarms} alarm(s) "
        "repeated" + (f" ({', '.join(sorted(c.repeated))})" if c.repeated else "")
    )
