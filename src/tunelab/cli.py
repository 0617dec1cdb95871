"""The `tunelab` command. Bad input gets one line per problem on stderr and exit code 2;
engine failures exit 1 with the engine's message; neither prints a traceback.

Every other failure also ends with one line on stderr, the last one, saying what happened
and what to do, and exit code 1: a full disk, an unreachable Docker engine, or any other
exception (``tunelab COMMAND: TYPE: MESSAGE``). Its traceback is printed before that line
only when stderr is not a terminal (a job's log, where it helps whoever reads it later) or
when ``TUNELAB_DEBUG=1``. Ctrl-C prints "interrupted" and exits 130; output cut short by a
closed pipe (``tunelab plan FILE | head``) ends quietly with 141, as a command killed by
SIGPIPE does, so ``set -o pipefail`` scripts see what they see with any other tool.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import sys
from pathlib import Path

from tunelab import engines
from tunelab.host import benchlock, clockstep, jobs
from tunelab.sweep import claimspec, spec, workloads

EXIT_USAGE = 2
EXIT_FAILED = 1

# Subcommands whose implementation lives in their own module: name -> "module:function".
DELEGATED = {
    "calibrate": "tunelab.calibrate.cli:main",
    "bpsim": "tunelab.bpsim.cli:main",
    "bpsim-shared": "tunelab.bpsim.shared_cli:main",
    "report": "tunelab.report.cli:report_main",
    "report-shared-pools": "tunelab.report.cli:shared_pools_main",
    "index": "tunelab.report.cli:index_main",
    "report-all": "tunelab.run.report_all:main",
    "guide": "tunelab.report.guide:guide_main",
    "compare": "tunelab.cli:compare_main",
    "check": "tunelab.run.check:check_main",
    "clean": "tunelab.run.recovery:clean_main",
    "recover": "tunelab.run.recovery:recover_main",
    "progress": "tunelab.run.progress:progress_main",
    "hadr-calc": "tunelab.cli:hadr_calc_main",
    "logscan": "tunelab.report.logscan:main",
    "probe": "tunelab.probes.cli:main",
}

# How the commands Snakemake runs hold the host-wide bench lock for their whole run
# (tunelab.host.jobs); run-point and trace-point hold it around the measurement (runner.bench_slot).
_LOCKS = {jobs.EXCLUSIVE: benchlock.exclusive, jobs.SHARED: benchlock.shared}
BENCH_LOCK = {name: _LOCKS[mode] for name, mode in jobs.JOB_COMMANDS.items() if mode in _LOCKS}


def hadr_calc_main(argv: list[str]) -> int:
    """`tunelab hadr-calc`: tunelab.hadr.cli, with the engines' replication modes (it sits
    below the engines and takes them from here)."""
    from tunelab.hadr import cli as hadr_cli

    def modes(name: str):
        return engines.engine_class(name).replication

    def disk(path: str) -> tuple[float, float]:
        """The calibration's write model in the calculator's units: MB of 2^20 bytes (the
        calibration's are 1,024,000) and seconds."""
        from tunelab import calibrate

        cal = calibrate.load(path)
        if cal.write_rate_mb_s is None:
            raise ValueError(
                f"{path}: write_rate_mb_s: none (write time did not grow with size); give --disk"
            )
        return cal.write_rate_mb_s * cal.mb_bytes / 2**20, cal.write_overhead_ms / 1000

    return hadr_cli.main(argv, engines.names(), modes, disk)


def compare_main(argv: list[str]) -> int:
    """`tunelab compare`, able to measure flagged points again (``--confirm``)."""
    from tunelab.report.compare import compare_main as compare

    def prepare(rows, workdir: Path, data_dir: Path):
        from tunelab.measure import sweeprun

        sweeps = sweeprun.points_again(rows, data_dir)  # bad input: before measuring
        return lambda: sweeprun.measure_again(
            sweeps, workdir, data_dir, log=lambda line: print(line, file=sys.stderr, flush=True)
        )

    return compare(argv, prepare)


def _err(msg: str) -> None:
    print(msg, file=sys.stderr)


def _calibration(path: str | None):
    if not path:
        return None
    from tunelab import calibrate

    return calibrate.load(Path(path))


def cmd_validate(args: argparse.Namespace) -> int:
    return validate(
        args.files,
        args.engine,
        args.calibration,
        args.skip_other_engines,
        data_dir=Path(args.data_dir),
    )


def validate(
    files: list[str],
    engine: str | None,
    calibration: str | None,
    skip_other_engines: bool,
    size: str | None = None,
    data_dir: Path = spec.DATA_DIR,
) -> int:
    """``tunelab validate``: every error, one line each; 0 when the files are valid, else 2."""
    found = spec.validate_files(
        [Path(f) for f in files],
        engine,
        _calibration(calibration),
        skip_other_engines=skip_other_engines,
        size=size,
        data_dir=data_dir,
    )
    for f, why in found.skipped.items():
        print(f"{f}: skipped ({why})")
    for w in found.warnings:  # allowed: they never change the exit code
        _err(str(w))
    for e in found.errors:
        _err(str(e))
    if found.errors:
        return EXIT_USAGE
    n = len(files) - len(found.skipped)
    print(f"{n} sweep file(s) valid" + (f" for {engine}" if engine else ""))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from tunelab.engines import abilities

    points, errors = spec.expand(Path(args.file), args.engine, _calibration(args.calibration))
    for e in errors:
        _err(str(e))
    if errors:
        return EXIT_USAGE
    for p in points:
        if args.sql:
            eng = engines.engine_class(p.engine)
            print(f"-- point {p.point_id} ({p.workload.type}, {p.cache}, {p.repetitions} reps)")
            plan = p.workload.index_plan(p.knobs.get("index", "none"))
            offline = eng(Path("/nonexistent"), "plan")
            # The point's own order (an insert indexes the empty table and loads nothing) and
            # only its cache state's steps.
            point = {"workload": p.workload.type, "cache": p.cache}
            for stmt in abilities.planned_sql(offline, p.knobs, p.dataset, plan, **point):
                print(stmt)
            timed = workloads.timed_sql(offline.dialect, p.workload, plan, p.access, p.dataset)
            for stmt in timed:
                print(stmt)
        else:
            print(json.dumps(p.to_json(), sort_keys=True))
    return 0


def run_list(text: str) -> list[str]:
    """The engines of ``engine=all`` (every engine, in the lab's order) or ``engine=a,b``;
    ValueError naming the bad entry and the allowed values."""
    allowed = engines.names()
    if text.strip() == "all":
        return allowed
    names = [n.strip() for n in text.split(",")]
    for i, name in enumerate(names):
        if name not in allowed:
            raise ValueError(
                f"engine={text}: unknown engine {name!r} (allowed: {', '.join(allowed)}, or all)"
            )
        if name in names[:i]:
            raise ValueError(f"engine={text}: {name} is listed twice (each engine runs once)")
    return names


def cmd_engines(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    if args.run_list is not None:
        try:
            print("\n".join(run_list(args.run_list)))
        except ValueError as exc:
            _err(str(exc))
            return EXIT_USAGE
        return 0
    rows = []
    for name in engines.names():
        info = engines.info(name)
        for k in info.knobs.values():
            rows.append(
                {
                    "engine": name,
                    "knob": k.name,
                    "allowed": k.allowed_text(),
                    "default": k.default,
                    "meaning": k.meaning,
                }
            )
        for k, why in info.notes.items():
            rows.append(
                {
                    "engine": name,
                    "knob": k,
                    "allowed": "not a knob",
                    "default": None,
                    "meaning": why,
                }
            )
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    table = Table(title="Engines and the knobs they express", show_lines=False)
    cols = ("engine", "knob", "allowed", "default", "meaning")
    for col in cols:
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*(str(r[c]) if r[c] is not None else "" for c in cols))
    Console().print(table)
    return 0


def _one_point(args: argparse.Namespace) -> tuple[spec.Point | None, int]:
    points, errors = spec.expand(
        Path(args.file), args.engine, _calibration(args.calibration), data_dir=Path(args.data_dir)
    )
    for e in errors:
        _err(str(e))
    if errors:
        return None, EXIT_USAGE
    chosen = [p for p in points if p.point_id == args.point]
    if not chosen:
        _err(f"{args.file}: no point with id {args.point!r} (see `tunelab plan {args.file}`)")
        return None, EXIT_USAGE
    return chosen[0], 0


def _on_point(args: argparse.Namespace, action) -> int:
    """Run ``action(point)`` on the point named by the arguments; engine failures and
    existing results become one line on stderr."""
    from tunelab.engines.base import EngineError
    from tunelab.store.results import ResultExistsError

    point, code = _one_point(args)
    if point is None:
        return code
    try:
        action(point)
    except ResultExistsError as exc:
        _err(str(exc))
        return EXIT_USAGE
    except EngineError as exc:
        _err(f"{args.file}: point {args.point}: {exc}")
        return EXIT_FAILED
    return 0


def cmd_run_point(args: argparse.Namespace) -> int:
    from tunelab.measure import runner

    dirs = (Path(args.workdir), Path(args.data_dir))
    return _on_point(args, lambda p: runner.run_point(p, Path(args.out), *dirs, args.run_id))


def cmd_run_sweep(args: argparse.Namespace) -> int:
    """Every point of a sweep, in rounds (tunelab.measure.sweeprun), to one rounds file."""
    from tunelab.engines.base import EngineError
    from tunelab.measure import sweeprun

    points, errors = spec.expand(
        Path(args.file), args.engine, _calibration(args.calibration), data_dir=Path(args.data_dir)
    )
    for e in errors:
        _err(str(e))
    if errors:
        return EXIT_USAGE
    if not points:
        _err(f"{args.file}: no point runs on engine {args.engine}")
        return EXIT_USAGE
    dirs = (Path(args.workdir), Path(args.data_dir))
    doc, _ = spec.load_yaml(Path(args.file))  # read and checked by expand above
    judged_by, _ = claimspec.sweep_claims(doc, args.file, args.engine)
    try:
        sweeprun.run_sweep(
            points,
            Path(args.out),
            *dirs,
            args.run_id,
            judged_by,
            log=lambda line: print(line, flush=True),
        )
    except EngineError as exc:
        _err(f"{args.file}: {exc}")
        return EXIT_FAILED
    return 0


def cmd_point_results(args: argparse.Namespace) -> int:
    from tunelab.measure import sweeprun
    from tunelab.store.results import ResultExistsError

    try:
        sweeprun.point_results(Path(args.rounds), args.point, Path(args.out))
    except (ResultExistsError, ValueError, OSError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    return 0


def cmd_trace_point(args: argparse.Namespace) -> int:
    from tunelab.measure import runner

    dirs = (Path(args.workdir), Path(args.data_dir))
    return _on_point(args, lambda p: print(runner.trace_point(p, Path(args.out), *dirs)))


def cmd_preflight(args: argparse.Namespace) -> int:
    return preflight(args.engine)


def preflight(engine: str) -> int:
    """``tunelab preflight``: one line, 0 when this host can run the engine, else 2."""
    from tunelab.engines.base import EngineError

    try:
        engines.engine_class(engine).preflight()
    except EngineError as exc:
        _err(f"engine {engine}: {exc}")
        return EXIT_USAGE
    print(f"engine {engine}: ready to run here")
    return 0


def cmd_image(args: argparse.Namespace) -> int:
    return max(image(engine, args.version) for engine in args.engines)


def image(engine: str, version: str | None = None) -> int:
    """``tunelab image``: the image the engine runs with here (at ``version``, one of those it
    declares: knob ``engine_version``; None: its default), built first where the lab builds
    it (``tunelab.engines.images.ensure_image``, as a run's points ask); one line. 0, 2 for a
    bad ``TUNELAB_IMAGE_PREFIX`` or a version the engine does not have, 1 when there is no
    image."""
    from tunelab.engines.images import ensure_image
    from tunelab.host.containers import ContainerError

    src = engines.info(engine).image
    names = [v.version for v in src.versions] if src is not None else []
    if version is not None and version not in names:
        _err(
            f"engine {engine}: --version {version} not allowed (allowed: "
            f"{', '.join(names) or 'none: it has one version'})"
        )
        return EXIT_USAGE
    if src is None:
        print(f"engine {engine}: runs without a container image")
        return 0
    try:
        tag = ensure_image(engine, src, version=version)
    except ValueError as exc:
        _err(f"engine {engine}: {exc}")
        return EXIT_USAGE
    except ContainerError as exc:
        _err(f"engine {engine}: {exc}")
        return EXIT_FAILED
    print(f"engine {engine}: image {tag}")
    return 0


def cmd_datagen(args: argparse.Namespace) -> int:
    from tunelab.store import dataset

    try:
        ds = dataset.Dataset.from_key(args.key)
    except ValueError as exc:
        _err(f"datagen: {exc}")
        return EXIT_USAGE
    path = dataset.materialise(ds, Path(args.data_dir))
    dataset.read_rows(ds, Path(args.data_dir))  # its rows' copy, here rather than in a point
    print(f"{path} sha256={dataset.sha256(path)}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from tunelab.store import results

    # Verify every point before anything is written: a bad file is named, set aside (so the
    # workflow sees its point as not measured) and the merged file is left as it was.
    checked = results.verify_points(args.inputs)
    bad = [c for c in checked if c.problem is not None]
    for c in bad:
        kept = results.set_aside(c.path)
        where = f" (kept as {kept[0].name})" if kept else ""
        _err(f"{c.path}: {c.problem}; it will be measured again on the next run{where}")
    if bad:
        _err(f"{args.out}: not written: {len(bad)} of {len(checked)} point file(s) failed")
        return EXIT_FAILED
    frame = results.concat(c.frame for c in checked)
    results.write_rows(frame.to_dict("records"), Path(args.out), overwrite=True)
    print(f"{args.out}: {len(frame)} rows from {len(args.inputs)} verified point file(s)")
    return 0


@functools.cache  # built once where the job server preloads it (its forks reuse it)
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tunelab", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--engine", choices=engines.names(), help="engine to validate/plan for")
        sp.add_argument("--calibration", help="calibration JSON for 'calibrated' knob values")

    sp = sub.add_parser("validate", help="validate sweep files (every error, one line each)")
    sp.add_argument("files", nargs="+", metavar="FILE")
    sp.add_argument(
        "--skip-other-engines",
        action="store_true",
        help="with --engine: skip sweeps that do not list that engine",
    )
    sp.add_argument(
        "--data-dir",
        default=str(spec.DATA_DIR),
        help="where the data sets go: each must fit its free space",
    )
    common(sp)
    sp.set_defaults(func=cmd_validate)

    sp = sub.add_parser("plan", help="print a sweep's points, one JSON object per line")
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("--sql", action="store_true", help="print every statement each point runs")
    common(sp)
    sp.set_defaults(func=cmd_plan)

    sp = sub.add_parser("engines", help="list engines and the knobs and values they support")
    sp.add_argument("--json", action="store_true")
    sp.add_argument(
        "--run-list",
        metavar="LIST",
        help="check an engine list of `./lab run "
        "--config engine=LIST` (all, or names joined by commas) and print it, one "
        "engine a line",
    )
    sp.set_defaults(func=cmd_engines)

    sp = sub.add_parser("run-point", help="measure one point of a sweep (Snakemake calls this)")
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("point", metavar="POINT_ID")
    sp.add_argument("--out", required=True, help="results CSV to write")
    sp.add_argument("--workdir", default=".tunelab", help="engine data directories")
    sp.add_argument(
        "--run-id",
        help="a workflow run whose points may share one server engine "
        "(removed when the run ends; `tunelab recover` after a kill)",
    )
    sp.add_argument("--data-dir", default="data", help="cached generated data sets")
    common(sp)
    sp.set_defaults(func=cmd_run_point)

    sp = sub.add_parser(
        "run-sweep", help="measure every point of a sweep in rounds (Snakemake calls this)"
    )
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("--out", required=True, help="the sweep's rounds file (every row)")
    sp.add_argument("--workdir", default=".tunelab", help="engine data directories")
    sp.add_argument(
        "--run-id",
        help="a workflow run whose points may share one server engine "
        "(removed when the run ends; `tunelab recover` after a kill)",
    )
    sp.add_argument("--data-dir", default="data", help="cached generated data sets")
    common(sp)
    sp.set_defaults(func=cmd_run_sweep)

    sp = sub.add_parser(
        "point-results",
        help="one point's rows of a sweep's rounds file, verified, to its results file",
    )
    sp.add_argument("rounds", metavar="ROUNDS_CSV")
    sp.add_argument("point", metavar="POINT_ID")
    sp.add_argument("--out", required=True, help="the point's results CSV")
    sp.set_defaults(func=cmd_point_results)

    sp = sub.add_parser("trace-point", help="a point's page-reference trace (engines that trace)")
    sp.add_argument("file", metavar="FILE")
    sp.add_argument("point", metavar="POINT_ID")
    sp.add_argument("--out", required=True, help="trace file to write (.npz, .npy or text)")
    sp.add_argument("--workdir", default=".tunelab")
    sp.add_argument("--data-dir", default="data")
    common(sp)
    sp.set_defaults(func=cmd_trace_point)

    sp = sub.add_parser("preflight", help="check this host can run an engine, before starting")
    sp.add_argument("engine", choices=engines.names())
    sp.set_defaults(func=cmd_preflight)

    sp = sub.add_parser(
        "image",
        help="the container image an engine runs with here, built "
        "first where the lab builds it (containers/ENGINE/build.sh)",
    )
    sp.add_argument("engines", nargs="+", choices=engines.names(), metavar="ENGINE")
    sp.add_argument(
        "--version",
        help="one of the engine's versions (knob engine_version, "
        "`tunelab engines`); default: its default one",
    )
    sp.set_defaults(func=cmd_image)

    sp = sub.add_parser("datagen", help="generate and cache a data set by its key")
    sp.add_argument("key", help="e.g. accounts-v1-r100000-s42")
    sp.add_argument("--data-dir", default="data")
    sp.set_defaults(func=cmd_datagen)

    sp = sub.add_parser(
        "merge",
        help="verify per-point result files, then concatenate them into one CSV",
        description="Verify every point file against its check file (<point>.check.json) "
        "and the other points, then concatenate them. A file that fails is named, set aside "
        "as <file>.rejected (its point is measured again on the next run) and nothing is "
        "written: exit 1.",
    )
    sp.add_argument("inputs", nargs="+", metavar="CSV")
    sp.add_argument("--out", required=True)
    sp.set_defaults(func=cmd_merge)

    for name in DELEGATED:
        sub.add_parser(name, help=f"see `tunelab {name} --help`", add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    hold = BENCH_LOCK.get(argv[0]) if argv else None
    if hold is None or {"-h", "--help"} & set(argv):  # help never waits for a measurement
        lock = contextlib.nullcontext()
    else:
        lock = hold(benchlock.job_name(argv))
    command = f"tunelab {argv[0]}" if argv and not argv[0].startswith("-") else "tunelab"
    try:
        with lock:
            code = _dispatch(argv)
        if code == 0 and (roots := clockstep.roots_from_env()):  # a job of a run ended
            clockstep.date_future_files_now([*roots, *(a for a in argv if os.path.isfile(a))])
        return code
    except KeyboardInterrupt:  # also while waiting for the lock
        _err("interrupted")
        return 130
    except BrokenPipeError as exc:
        if not _stdout_gone():
            return _failed(command, exc, _unexpected(exc))
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        return _failed(command, exc, _summary(exc, argv))


EXIT_BROKEN_PIPE = 128 + 13  # what a shell reports for a command killed by SIGPIPE


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (the BrokenPipeError came from the
    output, not from a socket to an engine)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # stdout replaced or closed
        return False


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's final flush must not fail again."""
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it was raised from or while handling, outermost first."""
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _one_line(exc: BaseException, limit: int = 300) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.partition("=")[2]
    return None


def _disk_full(exc: BaseException, argv: list[str]) -> str | None:
    """What was being written when the disk filled up ("" when unknown), None when the
    failure is not a full disk (or quota)."""
    import errno

    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return str(e.filename or _option(argv, "--out") or "")
        if engines.disk_full(e):
            return _option(argv, "--workdir") or ".tunelab"  # the engine's data files
    return None


def _docker_down(exc: BaseException) -> BaseException | None:
    """The connection error of a call to the Docker engine (socket missing, daemon stopped,
    no permission), if that is what the failure comes from."""
    import traceback

    for e in _chain(exc):
        # requests' ConnectionError (what the SDK raises) or the built-in one
        if type(e).__name__ != "ConnectionError" and not isinstance(e, ConnectionError):
            continue
        url = str(getattr(getattr(e, "request", None), "url", ""))
        frames = traceback.extract_tb(e.__traceback__)
        if url.startswith("http+docker") or any("/docker/" in f.filename for f in frames):
            return e
    return None


def _os_reason(exc: BaseException) -> str:
    """The operating system's words inside a wrapped connection error (e.g. "Connection
    refused"), else its own message."""
    todo: list[object] = [exc]
    seen: set[int] = set()
    while todo:
        item = todo.pop(0)
        if id(item) in seen or not isinstance(item, BaseException):
            continue
        seen.add(id(item))
        if isinstance(item, OSError) and item.strerror:
            return item.strerror
        # urllib3 keeps the cause in .reason, requests in args, Python in the chain
        todo += [*item.args, getattr(item, "reason", None), item.__cause__, item.__context__]
    return _one_line(exc)


def _summary(exc: Exception, argv: list[str]) -> str:
    """The one line that ends a failure: what happened and what to do."""
    from tunelab.engines.base import EngineError
    from tunelab.host.containers import ContainerError

    where = _disk_full(exc, argv)
    if where is not None:
        written = f" writing {where}" if where else ""
        return f"disk full{written}: free space and run again; finished points are kept"
    docker_error = _docker_down(exc)
    if docker_error is not None:
        return (
            f"Docker engine not reachable ({_os_reason(docker_error)}): start it (or fix "
            "DOCKER_HOST), run `tunelab clean` and run again; finished points are kept"
        )
    if isinstance(exc, ContainerError | EngineError):  # written for the user already
        return _one_line(exc)
    return _unexpected(exc)


def _traceback_wanted() -> bool:
    import os

    if os.environ.get("TUNELAB_DEBUG") == "1":
        return True
    try:
        return not sys.stderr.isatty()
    except (AttributeError, ValueError):
        return True


def _unexpected(exc: BaseException) -> str:
    hint = "full traceback in the log" if _traceback_wanted() else "TUNELAB_DEBUG=1 shows where"
    return f"{type(exc).__name__}: {_one_line(exc)} ({hint})"


def _failed(command: str, exc: BaseException, summary: str) -> int:
    """Traceback (to a log, or with TUNELAB_DEBUG=1), then the one line; exit code 1."""
    import traceback

    with contextlib.suppress(OSError):  # stderr itself may be the closed pipe
        if _traceback_wanted():
            traceback.print_exception(exc, file=sys.stderr)
        _err(f"{command}: {summary}")
    return EXIT_FAILED


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in DELEGATED:
        module, _, func = DELEGATED[argv[0]].partition(":")
        return getattr(importlib.import_module(module), func)(argv[1:])
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
