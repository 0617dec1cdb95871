"""What the Snakemake workflow asks of the package: which sweeps run on the chosen engine,
their points, and the paths of every stage's files. Kept here so the .smk files stay thin.

``python -m tunelab.run.pipeline SNAKEMAKE_ARGS...`` names the sweep files a run with those
arguments will use (what `./lab run` validates before anything starts); ``--for-run
SNAKEMAKE_ARGS...`` the options of ``tunelab progress`` for it (NUL-ended words);
``--count-pending-from FIELDS_FILE`` how many points the run whose fields a file holds will
measure (those without a verified results file yet). None takes the bench lock."""

from __future__ import annotations

import collections
import contextlib
import functools
import glob
import io
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.run import progress
from tunelab.store import dataset
from tunelab.sweep import checks, loading, spec
from tunelab.sweep.spec import Point
from tunelab.sweep.workloads import Workload

EXIT_INVALID = 2


class SweepFilesInvalid(Exception):
    """Raised with every validation error, one per line."""


@dataclass
class Plan:
    engine: str
    sweeps: dict[str, list[Point]]  # sweep name -> points
    files: dict[str, str]  # sweep name -> sweep file
    skipped: dict[str, str]  # sweep file -> why it does not run on this engine

    def point_ids(self, sweep: str) -> list[str]:
        return [p.point_id for p in self.sweeps[sweep]]

    def point(self, sweep: str, point_id: str) -> Point:
        return next(p for p in self.sweeps[sweep] if p.point_id == point_id)

    def uses_calibration(self, sweep: str) -> bool:
        """True when a knob of the sweep takes the measured 'calibrated' value."""
        doc, _ = loading.load_yaml(Path(self.files[sweep]))
        return checks.CALIBRATED in str(doc)

    def traces(self, sweep: str) -> bool:
        """True when the sweep asks for a page trace and its engine can capture one."""
        from tunelab import engines

        return self.sweeps[sweep][0].trace and engines.info(self.engine).traces

    def datasets(self) -> list[str]:
        return sorted({p.dataset.key for pts in self.sweeps.values() for p in pts})

    @functools.cached_property
    def _measure_order(self) -> dict[tuple[str, str], int]:
        from tunelab import engines

        info = engines.info(self.engine)
        points = [p for pts in self.sweeps.values() for p in pts]
        server = {id(p): info.server_order(p.knobs) for p in points}
        table = {id(p): table_order(p.workload, p.knobs, p.dataset) for p in points}
        tables: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
        for p in points:
            tables[server[id(p)]].add(table[id(p)])
        # A kept table outlives a restart but not another table built under its name: the
        # restart combinations that use the same tables come one after the other, and every
        # other one of them takes its tables in reverse, so that two consecutive combinations
        # meet on the same table (kept, not built again).
        group = {key: (key[0], tuple(sorted(t))) for key, t in tables.items()}
        reverse: dict[tuple[str, str], bool] = {}
        seen: collections.Counter = collections.Counter()
        for key in sorted(tables, key=lambda k: (group[k], k)):
            reverse[key] = seen[group[key]] % 2 == 1
            seen[group[key]] += 1

        def order(p: Point) -> tuple:
            key = server[id(p)]
            rank = sorted(tables[key]).index(table[id(p)])
            return (group[key], key, -rank if reverse[key] else rank, p.sweep)

        ordered = sorted(points, key=order)
        return {
            (p.sweep, p.point_id): MEASURE_BASE + len(ordered) - i for i, p in enumerate(ordered)
        }

    def measure_priority(self, sweep: str, point_id: str) -> int:
        """Snakemake's priority of a point's measurement (higher runs first): the points
        that share a server, and need no restart between them, run one after the other
        (``EngineInfo.server_order``), not interleaved with other sweeps' points; among
        those, the points that read the same table (``table_order``) come together, so each
        table is built once and reused, also across the restart combinations that read the
        same tables (ordered so that consecutive ones meet on one table). Any measurement
        (a trace asked for as a target) comes before the untimed jobs (``SHORT_UNTIMED`` and
        below)."""
        return self._measure_order.get((sweep, point_id), MEASURE_BASE)

    def sweep_priority(self, sweep: str) -> int:
        """A sweep measured in rounds (one job): its first point's place in the measuring
        order (``measure_priority``), so sweeps that share a server run one after another."""
        return max(self.measure_priority(sweep, p) for p in self.point_ids(sweep))

    def report_priority(self, sweep: str) -> float:
        """Snakemake's priority of a sweep's report, between 0 and 1 (below the short jobs
        and the checks): the reports that draw more start first (more varied dimensions, then
        more points: more figures and longer tables), so the ones still running at the end,
        two side by side, are the short ones."""
        return self._report_order[sweep]

    @functools.cached_property
    def _report_order(self) -> dict[str, float]:
        def cost(name: str) -> tuple[int, int, int]:
            points = self.sweeps[name]
            seen: dict[str, set[str]] = collections.defaultdict(set)
            for p in points:
                for key, value in {
                    **p.knobs,
                    **p.workload.params,
                    "workload": p.workload.type,
                    "_cache": p.cache,
                }.items():
                    seen[key].add(repr(value))
            # A figure per swept dimension (and the simulator's); the cache is a colour.
            swept = sum(len(v) > 1 for k, v in seen.items() if k != "_cache")
            return swept + int(self.traces(name)), len(seen["_cache"]), len(points)

        ranked = sorted(self.sweeps, key=lambda name: (cost(name), name))
        return {name: (i + 1) / (len(ranked) + 1) for i, name in enumerate(ranked)}


# Snakemake priorities (higher runs first): data sets first (a measurement waits for its data
# set, and Snakemake does not pass a measurement's priority on to it: at 0, a data set only
# one sweep reads was generated after every other measurement, then its points measured
# after the other reports); measurements above MEASURE_BASE, in their order; then the short
# untimed jobs that reports wait for (merges, simulated curves), so that the reports (below
# 1, the longest first) find their inputs ready and run two at a time until the end.
DATA_FIRST = 1_000_000
MEASURE_BASE = 10
SHORT_UNTIMED = 2
# A sweep's claims checked (after its report): as soon as they can, between the reports
# (``Plan.report_priority``, below 1), so the index does not wait for them at the end.
CHECK_SOON = 1


def table_order(w: Workload, knobs: dict[str, Any], ds: dataset.Dataset) -> str:
    """What the table a point reads is built from (data set and index layout); the points
    that write come last, since their table is built again for every repetition."""
    plan = w.index_plan(knobs.get("index", "none"))
    return json.dumps([w.writes, ds.key, plan.kind, plan.key, plan.include])


def sweep_files(pattern: str | list[str], root: str | Path | None = None) -> list[Path]:
    """The files matched by a glob or a list of globs, relative to ``root`` (default: the
    working directory). A pattern that names an existing file is that file, even when its
    name holds characters a glob reads as wildcards ('[', '*', '?')."""
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    base = Path(root) if root else Path()
    found: set[Path] = set()
    for p in patterns:
        if (base / p).is_file():
            found.add(base / p)
        else:
            found.update(base / f for f in glob.glob(p, root_dir=root))
    return sorted(found)


def load_calibration(path: str | Path | None):
    """The calibration for 'calibrated' knob values, if one was measured already."""
    if not path or not Path(path).exists():
        return None
    from tunelab import calibrate

    return calibrate.load(Path(path))


def plan(
    pattern: str | list[str],
    engine: str,
    calibration: str | Path | None = None,
    size: str = spec.SIZES[0],
) -> Plan:
    """Validate every sweep file matched, at the data-set ``size`` (quick | assignment);
    sweeps that do not list ``engine`` are skipped (and said so), every other error is
    raised together."""
    from tunelab import engines

    if engine not in engines.names():
        raise SweepFilesInvalid(
            f"config: engine: '{engine}' is not an engine (allowed: {', '.join(engines.names())})"
        )
    files = sweep_files(pattern)
    if not files:
        raise SweepFilesInvalid(f"no sweep files match {pattern}")
    found = spec.validate_files(
        files,
        engine,
        load_calibration(calibration),
        skip_other_engines=True,
        defer_calibrated=True,
        size=size,
    )
    if found.errors:
        raise SweepFilesInvalid("\n".join(map(str, found.errors)))
    return Plan(engine, found.points, found.files, found.skipped)


def plan_or_exit(
    pattern: str | list[str],
    engine: str,
    calibration: str | Path | None = None,
    size: str = spec.SIZES[0],
) -> Plan:
    """plan() for the Snakefile: invalid sweep files end the run with their lines alone (one
    per error) and exit code 2, as `tunelab validate` does, not a workflow error's frame."""
    try:
        return plan(pattern, engine, calibration, size)
    except SweepFilesInvalid as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(EXIT_INVALID) from None


def option(flag: str, value: str | Iterable[str] | None) -> list[str]:
    """``[flag, value...]`` for a shell command's ``{params.x:q}``, or nothing when ``value``
    is empty: each word is quoted on its own."""
    values = [value] if isinstance(value, str) else list(value or [])
    values = [v for v in values if v]
    return [flag, *values] if values else []


def shared_pools_args(config: dict[str, Any]) -> str | None:
    """The `tunelab bpsim-shared` arguments of the shared-pools page; None when the config
    turns it off (``shared_pools: off``)."""
    value = config.get("shared_pools", "")
    if value is False or value in ("off", "false"):
        return None
    return str(value)


def shared_pools_or_exit(config: dict[str, Any]) -> None:
    """A bad ``shared_pools:`` in the run's configuration ends the run before anything starts:
    one line naming the field, exit code 2."""
    from tunelab.bpsim import shared_cli

    args = shared_pools_args(config)
    if args is None:
        return
    try:
        problem = shared_cli.check_args(words(args))
    except ValueError as exc:  # unbalanced quotes
        problem = str(exc)
    if problem:
        print(
            f"config: shared_pools: {problem} (allowed: `tunelab bpsim-shared` arguments, or off)",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_INVALID)


def words(text: str) -> list[str]:
    """Options written as one string (a config value) as separate words, to be quoted one by
    one with ``{params.x:q}`` rather than read by the shell."""
    return shlex.split(text)


def retire_removed_points(plan: Plan, engine: str, results_dir: str) -> None:
    """Points measured before that a sweep file of the run no longer has (a value removed,
    a point renamed by an edit) are set aside, saying so: kept, never merged again."""
    for sweep in plan.sweeps:
        folder = Path(results_dir) / engine / sweep
        from tunelab.store import results  # pandas: not for `./lab run`'s own quick start

        gone = results.retire_points_not_in(folder, plan.point_ids(sweep))
        if gone:
            print(
                f"[lab] {sweep}: {len(gone)} point(s) no longer in {plan.files[sweep]} set "
                f"aside as {folder}/<point>.csv.retired (kept, not merged): "
                f"{', '.join(gone)}",
                file=sys.stderr,
            )


def clean_run(run_id: str, workdir: str, submit: Callable[..., int | None] | None = None) -> None:
    """Remove what this run left (its shared server engine), at the workflow's end: through
    ``submit`` where given (the run's job server's, while it is up: no job runs then, and a
    new interpreter would take 0.3 s; its exit code, None when it takes no command), else in
    a process of its own. The command gets its arguments as a list: no shell reads them."""
    args = ["clean", "--run", run_id, "--workdir", workdir]
    code = None
    if submit is not None:
        with open(os.devnull, "wb") as devnull:
            code = submit(args, stdout=devnull.fileno())
    cmd = [sys.executable, "-m", "tunelab.cli", *args]
    if code is None:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    elif code:
        raise subprocess.CalledProcessError(code, cmd)


def release_timers() -> None:
    """At the workflow's end, in Snakemake's process: its job rate limiter (at most 100 jobs
    a second by default) arms a one-second timer thread after each scheduling round, and
    the interpreter waits for the last one before it exits, up to a second of every run.
    The workflow is over: nothing waits for them."""
    import threading

    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer):
            thread.cancel()


def sized_dir(directory: str, size: str) -> str:
    """Where a run of this data-set size keeps its results, reports or logs: an assignment-size
    run below ``assignment/``, so its files never mix with the quick size's."""
    return directory if size == spec.SIZES[0] else f"{directory}/{size}"


def check_size(config: dict[str, Any]) -> str:
    """The config's data-set size; RunArgsInvalid naming the key otherwise."""
    size = config.get("size", spec.SIZES[0])
    if size not in spec.SIZES:
        raise RunArgsInvalid(
            f"config size: {size!r} not allowed (allowed: {', '.join(spec.SIZES)})"
        )
    return size


def reports_of_other_engines(reports_dir: str | Path, engine: str) -> list[str]:
    """Other engines' reports of the same size (an engine's directory, not ``assignment/``)."""
    from tunelab import engines

    root = Path(reports_dir)
    others = set(engines.names()) - {engine}
    return sorted(str(p) for p in root.glob("*/*.html") if p.parent.name in others)


class RunArgsInvalid(Exception):
    """Snakemake arguments (or the config they name) that the run would refuse."""


@dataclass
class Run:
    engine: str
    files: list[Path]  # relative to the caller's working directory
    calibration: Path | None  # the measured calibration, if there is one already
    directory: Path = Path(".")  # where Snakemake runs (its lock is there)
    workdir: Path = Path(".tunelab")  # the engine data directory (relative to the caller)
    size: str = spec.SIZES[0]  # quick | assignment: see sized_dir() for its directories


@contextlib.contextmanager
def _prog(name: str):
    """argparse names the program after sys.argv[0]: its errors then say ``name``."""
    saved = list(sys.argv)
    sys.argv[:1] = [name]
    try:
        yield
    finally:
        sys.argv[:] = saved


def run_config(argv: list[str]) -> tuple[dict[str, Any], Path]:
    """The config a ``snakemake --snakefile Snakefile ARGS`` run will see, and its working
    directory, read the way Snakemake reads them: its own argument parser (so profiles too),
    the Snakefile's config file, then ``--configfile`` files in order, then ``--config``."""
    from snakemake.cli import parse_args, parse_config
    from snakemake.common.configfile import load_configfile
    from snakemake.utils import update_config

    # Help and version print and exit; neither changes the config.
    argv = [a for a in argv if a not in ("-h", "--help", "--version", "-v")]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said), _prog("snakemake"):
            _, args = parse_args(argv)
        config: dict[str, Any] = {}
        if not args.replace_workflow_config:  # the Snakefile's configfile: comes first
            snakefile = Path(args.snakefile or "Snakefile")
            config = load_configfile(str(snakefile.parent / "workflows" / "config.yaml"))
        for f in args.configfile or []:
            update_config(config, load_configfile(f))
        update_config(config, parse_config(args.config))
    except SystemExit:  # argparse has said why on stderr
        lines = [ln for ln in said.getvalue().splitlines() if ln.strip()]
        raise RunArgsInvalid(lines[-1] if lines else "snakemake: invalid arguments") from None
    except Exception as exc:  # a config file or --config entry Snakemake would refuse too
        raise RunArgsInvalid(f"snakemake: {' '.join(str(exc).split())}") from None
    return config, Path(args.directory or ".")


def resolve_run(argv: list[str]) -> Run:
    """The engine and exactly the sweep files a run with these Snakemake arguments uses: the
    same config, and the same expansion of its ``sweeps`` as the Snakefile's."""
    from tunelab import engines
    from tunelab.calibrate import workflow as calibration_config

    config, workdir = run_config(argv)
    engine, pattern = config.get("engine"), config.get("sweeps")
    if engine not in engines.names():
        raise RunArgsInvalid(
            f"config engine: {engine!r} not allowed (allowed: {', '.join(engines.names())})"
        )
    size = check_size(config)
    is_text = isinstance(pattern, str) or (
        isinstance(pattern, list) and pattern and all(isinstance(p, str) for p in pattern)
    )
    if not is_text:
        raise RunArgsInvalid(
            f"config sweeps: {pattern!r} is not valid (allowed: a glob or a list of globs)"
        )
    files = sweep_files(pattern, workdir)
    if not files:
        where = (
            ""
            if workdir == Path(".")
            else f" under --directory {workdir} (a relative glob is read there)"
        )
        raise RunArgsInvalid(f"config sweeps: no sweep files match {pattern!r}{where}")
    calibration = workdir / calibration_config.output_path(config)
    data = workdir / str(config.get("workdir", ".tunelab"))
    return Run(engine, files, calibration if calibration.is_file() else None, workdir, data, size)


def run_paths(argv: list[str]) -> progress.RunPaths:
    """What ``tunelab progress`` needs to know of a run with these Snakemake arguments, read
    the way the Snakefile reads them."""
    config, directory = run_config(argv)
    run = resolve_run(argv)
    found = plan([str(f) for f in run.files], run.engine, run.calibration, run.size)
    results_dir = sized_dir(str(config.get("results_dir", "results")), run.size)
    logs_dir = sized_dir(str(config.get("logs_dir", "logs")), run.size)
    # The Snakefile names the log only when the caller has not (relative to its directory).
    job_log = directory / os.environ.get("TUNELAB_JOB_LOG", os.path.join(logs_dir, "jobs.jsonl"))
    return progress.planned(found, run.engine, directory, results_dir, logs_dir, job_log)


def count_pending(argv: list[str]) -> int:
    """How many points a run with these Snakemake arguments will measure."""
    return run_paths(argv).total


def count_pending_from(fields_file: Path) -> int:
    """``count_pending`` of the run whose fields (``main``'s output) `./lab run` kept in
    ``fields_file``: the count of a stopped run's last line, without Snakemake's argument
    parser (about a second of the stop)."""
    words = fields_file.read_bytes().decode().split("\0")[:-1]
    engine, calibration, directory, _, size, _, results_dir, logs_dir, *files = words
    found = plan(files, engine, calibration or None, size)
    job_log = Path(logs_dir) / "jobs.jsonl"  # not read for the count
    return progress.planned(found, engine, Path(directory), results_dir, logs_dir, job_log).total


def _for_run(argv: list[str]) -> int:
    """``--for-run``: the options of ``tunelab progress`` for the run (NUL-ended words)."""
    try:
        paths = run_paths(argv)
    except SystemExit as exc:  # the plan of invalid sweep files has said why
        return exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # invalid arguments or sweep files: one line
        print(f"tunelab progress: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    sys.stdout.write("".join(f"{w}\0" for w in progress.options_for(paths)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print the run's engine, its calibration file (or nothing), the directory Snakemake runs
    in, its engine data directory, its data-set size, its index page, its results and logs
    directories and its sweep files, each ended by a NUL byte (a file name may hold any other
    character); or one line and exit 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--count-pending-from"] and len(args) == 2:
        print(count_pending_from(Path(args[1])))
        return 0
    if args[:1] == ["--for-run"]:
        return _for_run(args[1:])
    try:
        fields = run_fields(args)
    except RunArgsInvalid as exc:
        print(exc, file=sys.stderr)
        return EXIT_INVALID
    sys.stdout.write("".join(f"{f}\0" for f in fields))
    return 0


def run_fields(argv: list[str]) -> list[str]:
    """What ``main`` prints, in its order; RunArgsInvalid for arguments Snakemake refuses."""
    run = resolve_run(argv)
    config, _ = run_config(argv)
    reports = sized_dir(str(config.get("reports_dir", "reports")), run.size)
    index = run.directory / reports / "index.html"
    results = run.directory / sized_dir(str(config.get("results_dir", "results")), run.size)
    logs = run.directory / sized_dir(str(config.get("logs_dir", "logs")), run.size)
    return [
        run.engine,
        str(run.calibration or ""),
        str(run.directory),
        str(run.workdir),
        run.size,
        str(index),
        str(results),
        str(logs),
        *map(str, run.files),
    ]


if __name__ == "__main__":
    sys.exit(main())


def findings_input(sweep_file: str) -> list[str]:
    """The findings file that judges a sweep file (``tunelab.sweep.findings.path_for``), as a
    rule's input: none when the sweep has none."""
    from tunelab.sweep import findings

    path = findings.path_for(sweep_file)
    return [os.path.relpath(path)] if path is not None else []
