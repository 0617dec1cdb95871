"""A run's start and its Snakemake in one process (``python -m tunelab.run.labstart``), as
`./lab run` starts them:

    python -m tunelab.run.labstart --fields FILE --started FILE [--local] -- SNAKEMAKE_ARGS...

In order: the run's fields read the way the Snakefile reads them (``tunelab.run.pipeline``),
written NUL-ended to ``--fields``; its sweep files validated (``tunelab validate``); with
``--local`` (not on a cluster) the engine's preflight and its image, built where it is built
from Debian's packages (``tunelab image``); what killed runs of the checkout left recovered
(``tunelab recover``); ``--started`` made; then Snakemake's command line
(``tunelab.run.snakemake_cli``). Each step was a process of its own, and each paid Python's start
and its imports; Snakemake's argument parser alone imports for about a second, which the
fields and Snakemake now pay once.

Exit: that of the first step that fails (2 for invalid arguments, sweep files, an engine this
host cannot run or a bad ``TUNELAB_IMAGE_PREFIX``; 1 when a live run holds the checkout or
the image cannot be had), else Snakemake's. Without ``--started`` made the run stopped before
its sweeps started.

SIGINT: the lab starts this with SIGINT ignored, so that a Ctrl-C in the steps before
Snakemake (where Python would print a traceback, or "Fatal Python error" in its start) waits
for the lab's own stop; Snakemake gets SIGINT back (``TUNELAB_TAKES_SIGINT=1``) where the lab
itself did not start with it ignored (a script's `./lab run &`, cron).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import NoReturn

from tunelab.cli import engine_info, sweeps
from tunelab.run import pipeline, recovery, snakemake_cli

SAY = "\033[1m[lab]\033[0m {}"  # as the lab's own lines (say in ./lab)


def say(text: str) -> None:
    print(SAY.format(text), file=sys.stderr, flush=True)


def start(fields_file: Path, local: bool, argv: list[str]) -> int:
    """The checks before the sweeps; 0 when Snakemake may start."""
    try:
        fields = pipeline.run_fields(argv)
    except pipeline.RunArgsInvalid as exc:
        print(exc, file=sys.stderr)
        return pipeline.EXIT_INVALID
    fields_file.write_bytes("".join(f"{f}\0" for f in fields).encode())
    engine, calibration, checkout, workdir, size = fields[:5]
    files = fields[8:]
    say(f"validating the run's {len(files)} sweep file(s) for engine {engine} ({size} size)")
    if code := sweeps.validate(files, engine, calibration or None, True, size=size):
        return code
    sys.stdout.flush()
    if not local and (Path("containers") / engine).is_dir():
        say(
            f"on a cluster: every node needs Docker and the {engine} image (docs/cluster.md); "
            "this host only submits"
        )
    if local:
        if code := engine_info.preflight(engine):
            return code
        # Built here from Debian's packages (tunelab.engines.images, as a point would).
        built_here = (Path("containers") / engine / "build.sh").is_file()
        if built_here and (code := engine_info.image(engine)):
            return code
        sys.stdout.flush()
    return recovery.recover_main(["--checkout", checkout, "--workdir", workdir])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tunelab.run.labstart")
    parser.add_argument("--fields", required=True, type=Path)
    parser.add_argument("--started", required=True, type=Path)
    parser.add_argument("--local", action="store_true")
    parser.add_argument("snakemake_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    rest = args.snakemake_args[1:] if args.snakemake_args[:1] == ["--"] else args.snakemake_args
    try:
        if code := start(args.fields, args.local, rest):
            return code
    except Exception as exc:  # the host's or an engine's error: one line, no traceback
        print(
            f"tunelab: the run's start failed: {type(exc).__name__}: {' '.join(str(exc).split())}",
            file=sys.stderr,
        )
        return 1
    args.started.touch()
    say("running the sweeps (progress below; logs under logs/)")
    if os.environ.get("TUNELAB_TAKES_SIGINT") == "1":
        signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = ["snakemake", *rest]
    return snakemake_cli.main()


def exit_now(code: object) -> NoReturn:
    """End as ``sys.exit(code)`` would, without Python's teardown of Snakemake's modules (a
    third of a second of every run): what must run at exit runs first (other threads
    joined, the atexit handlers: logging's flush, the finalizers of temporary directories)."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader gone: nothing left to tell it
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        exit_now(main())
    except SystemExit as stop:  # Snakemake's main ends with sys.exit()
        exit_now(stop.code)
