"""Progress of a run: one line per finished point, from the run's job log.

``tunelab progress --job-log logs/jobs.jsonl --pid PID --total N`` follows the job log
(tunelab.host.benchlock: one JSON line per job) from its current end until process PID is gone,
and for every finished ``point-results`` job (a point's rows out of its sweep's rounds, just
after the sweep is measured: ``tunelab.measure.sweeprun``) prints to stderr the sweep, the point and
the median of its repetitions' response times, with how many points are done and an estimate of the
time left, e.g.::

    [lab] 3/40 scan-vs-page-size page_size-4096_scan_cold: median 0.673 s over 6 reps · ~12 min left

The Snakefile, once it has its plan, writes these options where ``./lab run`` asks for them
(``announce``); ``python -m tunelab.run.pipeline --for-run SNAKEMAKE_ARGS...`` prints them for a
run from its arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

POLL_S = 0.5
SETTLE_S = 2.0  # at the end: how long a point whose span is logged may take to write its file
JOB = "point-results"


# -- what a run will measure -----------------------------------------------------------------
@dataclass
class RunPaths:
    total: int  # points without a verified results file
    job_log: Path
    directory: Path  # where Snakemake runs: the job log names files relative to it
    results_dir: str
    logs_dir: str


def planned(
    plan, engine: str, directory: Path, results_dir: str, logs_dir: str, job_log: Path
) -> RunPaths:
    """The run's paths, with the points of its plan (tunelab.run.pipeline.Plan) it will measure."""
    from tunelab.store import results

    total = 0
    for sweep, points in plan.sweeps.items():
        folder = directory / results_dir / engine / sweep
        # a results file without its check file was never verified: measured again
        pending = sum(
            not (
                (folder / f"{p.point_id}.csv").is_file()
                and results.check_path(folder / f"{p.point_id}.csv").is_file()
            )
            for p in points
        )
        # Without its rounds file (removed once every point had its file) the sweep is
        # measured again in rounds, and every point of it gets its file anew.
        if pending and not (folder / results.ROUNDS_FILE).is_file():
            pending = len(points)
        total += pending
    return RunPaths(total, Path(job_log), Path(directory), results_dir, logs_dir)


# Where the workflow writes its run's progress options (``write_run_file``) for a `tunelab
# progress --run-file` started beside it: `./lab run` names it.
RUN_FILE_ENV = "TUNELAB_PROGRESS_FILE"


def write_run_file(paths: RunPaths) -> None:
    """The options of ``tunelab progress`` for this run, to the file ``RUN_FILE_ENV`` names
    (the Snakefile, once its plan is made: the run's own figures, no second reading of its
    arguments and sweep files). Nothing when no file is named."""
    target = os.environ.get(RUN_FILE_ENV)
    if not target:
        return
    tmp = Path(f"{target}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(options_for(paths)))
    tmp.replace(target)


def announce(plan, engine: str, results_dir: str, logs_dir: str) -> None:
    """The options of `tunelab progress` for this run, from its plan (tunelab.run.pipeline.Plan),
    where `./lab run` asks for them (RUN_FILE_ENV); the Snakefile's main process, once
    planned."""
    job_log = Path(os.environ["TUNELAB_JOB_LOG"])  # named by tunelab.run.workflow, absolute
    write_run_file(planned(plan, engine, Path.cwd(), results_dir, logs_dir, job_log))


def _await_run_file(path: Path, pid: int) -> list[str] | None:
    """The options the workflow writes to ``path``; None when ``pid`` ends first (a run
    that stopped before its plan: invalid arguments, a dry run that failed)."""
    while not path.exists():
        if not pid_alive(pid):
            return None
        time.sleep(0.05)
    return [str(w) for w in json.loads(path.read_text())]


def options_for(paths: RunPaths) -> list[str]:
    return [
        "--total",
        str(paths.total),
        "--job-log",
        str(paths.job_log),
        "--directory",
        str(paths.directory),
        "--results-dir",
        paths.results_dir,
        "--logs-dir",
        paths.logs_dir,
    ]


# -- following the job log -------------------------------------------------------------------
class JobLog:
    """New complete lines of an append-only file, from where it ended when first opened."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = self._size()
        self.partial = b""

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def read(self, final: bool = False) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size < self.offset:  # replaced or cut: start again
                    self.offset, self.partial = 0, b""
                f.seek(self.offset)
                data = f.read()
        except OSError:  # not written yet
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        if final and self.partial:  # the writer is gone: a cut last line stays cut
            lines.append(self.partial)
            self.partial = b""
        spans = []
        for line in lines:
            with contextlib.suppress(ValueError):
                span = json.loads(line)
                if isinstance(span, dict):
                    spans.append(span)
        return spans


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    try:  # a zombie has ended: only its parent has not collected it yet
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@dataclass
class Finished:
    sweep: str
    point: str
    median_s: float | None  # None: no results (the point failed)
    reps: int
    log: str | None  # the point's log, when it exists


def point_result(csv_file: Path) -> tuple[float | None, int]:
    """Median elapsed_s of a point's results file and its repetitions; (None, 0) without one."""
    times = []
    try:
        with open(csv_file, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                with contextlib.suppress(TypeError, ValueError):
                    value = float(row.get("elapsed_s") or "nan")
                    if math.isfinite(value):
                        times.append(value)
    except (OSError, UnicodeDecodeError, csv.Error):
        return None, 0
    return (statistics.median(times), len(times)) if times else (None, 0)


def fmt_seconds(s: float) -> str:
    return f"{s:.0f}" if s >= 100 else f"{s:.3g}" if s >= 0.001 else f"{s:.2e}"


def fmt_left(s: float) -> str:
    if s < 60:
        return f"~{max(1, round(s))} s left"
    minutes = round(s / 60)
    if minutes < 60:
        return f"~{minutes} min left"
    return f"~{minutes // 60} h {minutes % 60} min left"


@dataclass
class Progress:
    total: int
    directory: Path = Path(".")
    results_dir: str = "results"
    logs_dir: str = "logs"
    done: int = 0
    first_start_ns: int | None = None
    last_end_ns: int | None = None
    waiting: list[dict] = field(default_factory=list)  # spans whose file may still come

    def add(self, span: dict) -> None:
        job = span.get("job")
        start = span.get("start_ns")
        # From the run's first job on: a sweep is measured whole before its points' files
        # come, so the time per point counts the measuring jobs too.
        if isinstance(start, int) and not isinstance(start, bool):
            first = self.first_start_ns
            self.first_start_ns = start if first is None else min(start, first)
        if isinstance(job, str) and job.split(" ", 1)[0] == JOB and " " in job:
            self.waiting.append(span)

    def settle(self, final: bool = False) -> list[str]:
        """Lines for the points whose results file is there, or whose job has ended (without
        one, it failed); at the end, for every point left."""
        ready, still = [], []
        for span in self.waiting:
            target = self.directory / span["job"].split(" ", 1)[1]
            pid = span.get("pid")
            ended = final or not (isinstance(pid, int) and pid_alive(pid))
            (ready if target.is_file() or ended else still).append((span, target))
        self.waiting = [span for span, _ in still]
        for span, _ in ready:
            start, end = span.get("start_ns"), span.get("end_ns")
            if isinstance(start, int) and isinstance(end, int) and end >= start:
                first, last = self.first_start_ns, self.last_end_ns
                self.first_start_ns = start if first is None else min(start, first)
                self.last_end_ns = end if last is None else max(end, last)
        # A sweep's points come together once it is measured: the time per point is the
        # run's time over every point done by the end of this batch, not by each line of it
        # (which made the batch's first line promise hours).
        per_point = None
        if self.last_end_ns is not None and self.first_start_ns is not None and ready:
            per_point = (self.last_end_ns - self.first_start_ns) / 1e9 / (self.done + len(ready))
        return [self._line(target, per_point) for _, target in ready]

    def _line(self, target: Path, per_point: float | None) -> str:
        self.done += 1
        median, reps = point_result(target)
        total = max(self.total, self.done)
        count = f"{self.done}/{total}" if self.total > 0 else f"{self.done}"
        head = f"{count} {target.parent.name} {target.stem}"
        if median is None:
            log = self._log(target)
            text = f"{head}: failed" + (f" (see {log})" if log else "")
        else:
            text = f"{head}: median {fmt_seconds(median)} s over {reps} rep{'s' * (reps != 1)}"
        left = total - self.done
        if self.total > 0 and left > 0 and per_point is not None:
            text += f" · {fmt_left(per_point * left)}"
        return text

    def _log(self, target: Path) -> str | None:
        """logs/<engine>/<sweep>/<point>.log for results/<engine>/<sweep>/<point>.csv."""
        try:
            within = target.relative_to(self.directory / self.results_dir)
        except ValueError:
            return None
        log = self.directory / self.logs_dir / within.with_suffix(".log")
        return str(log) if log.is_file() else None


def prefix(stream: TextIO) -> str:
    with contextlib.suppress(AttributeError, ValueError):
        if stream.isatty():
            return "\033[1m[lab]\033[0m "  # as the lab script's own lines
    return "[lab] "


def follow(
    job_log: Path, pid: int, progress: Progress, out: TextIO = sys.stderr, poll: float = POLL_S
) -> None:
    """Print a line per finished point until ``pid`` is gone (or SIGTERM), then a last read."""
    log = JobLog(job_log)
    stopped = []
    with contextlib.suppress(ValueError):  # not the main thread: no signal handler
        signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
    lead = prefix(out)
    while True:
        alive = pid_alive(pid) and not stopped  # before reading: the last read sees all
        for span in log.read(final=not alive):
            progress.add(span)
        if not alive:
            deadline = time.monotonic() + SETTLE_S
            while progress.waiting and time.monotonic() < deadline:
                _say(out, lead, progress.settle())
                time.sleep(0.1)
        _say(out, lead, progress.settle(final=not alive))
        if not alive:
            return
        for _ in range(max(1, round(poll / 0.1))):  # short sleeps: SIGTERM is seen soon
            if stopped:
                break
            time.sleep(min(poll, 0.1))


def _say(out: TextIO, lead: str, lines: list[str]) -> None:
    for line in lines:
        out.write(f"{lead}{line}\n")
    out.flush()


def progress_main(argv: list[str] | None = None) -> int:
    """``tunelab progress --job-log FILE --pid PID [--total N] ...``."""
    parser = argparse.ArgumentParser(
        prog="tunelab progress",
        description="Follow a run's job log from its current end until process PID is gone, "
        "printing one line per finished point (sweep, point, median response time, points "
        "done, time left) to stderr.",
    )
    parser.add_argument("--job-log", help="the run's job log (logs/jobs.jsonl)")
    parser.add_argument("--pid", type=int, required=True, help="follow while this process runs")
    parser.add_argument(
        "--run-file",
        type=Path,
        help="take the options below from this file "
        f"once the workflow has written it (it names it in ${RUN_FILE_ENV})",
    )
    parser.add_argument("--total", type=int, default=0, help="points the run will measure")
    parser.add_argument("--directory", default=".", help="where Snakemake runs")
    parser.add_argument("--results-dir", default="results", help="as in the run's config")
    parser.add_argument("--logs-dir", default="logs", help="as in the run's config")
    args = parser.parse_args(argv)
    try:
        if args.run_file is not None:
            options = _await_run_file(args.run_file, args.pid)
            if options is None:
                return 0
            args = parser.parse_args([*options, "--pid", str(args.pid)])
        if args.job_log is None:
            parser.error("--job-log (or --run-file) is needed")
        progress = Progress(args.total, Path(args.directory), args.results_dir, args.logs_dir)
        follow(Path(args.job_log), args.pid, progress)
    except (KeyboardInterrupt, BrokenPipeError):
        return 0
    except Exception as exc:  # progress is a courtesy: one line, never a traceback
        with contextlib.suppress(OSError):
            print(f"tunelab progress: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0
