"""The run the Snakefile sets up, once per Snakemake process: the environment its jobs
inherit, its plan, its id and, in a job on a cluster node, who owns what it starts there.
The Snakefile keeps configuration, includes, hooks and ``rule all``; what it computes is
here (``setup_run``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tunelab.calibrate import calibration as calibration_file
from tunelab.calibrate import workflow as calibration_config
from tunelab.host import atomic, clockstep, ownership
from tunelab.run import cluster, pipeline, progress
from tunelab.sweep import spec

# What a cluster job needs from the submitting run where the executor does not pass the
# whole environment (Kubernetes); SLURM jobs inherit it. The Snakefile's ``envvars``.
ENVVARS = (cluster.RUN_ID_ENV, calibration_file.HOST_ENV)


@dataclass(frozen=True)
class Run:
    id: str
    workdir: str
    size: str  # the data-set size (quick | assignment)
    plan: pipeline.Plan


def setup_run(
    config: Mapping[str, Any],
    main_process: bool,
    remote: bool,
    prestart: Callable[[], None],
    basedir: str = ".",
) -> Run:
    """The run of this Snakemake process (``main_process``: the run's own, not a job's;
    ``remote``: a job on a cluster node). Invalid sweep files end it here: one line per
    error, exit code 2. ``prestart`` is called in the main process of a run on this host
    once its jobs' environment is set, before the plan: it starts the job server's imports,
    which the plan, the parse and the DAG then hide. ``basedir``: the Snakefile's folder."""
    # The calibration file is named after the host that submits the run; its jobs, on a
    # cluster other hosts, name the same file (its contents say where it was measured).
    os.environ.setdefault(calibration_file.HOST_ENV, calibration_file.hostname())
    # Every job's `tunelab` expands the sweeps at the run's data-set size.
    size = config["size"]
    os.environ[spec.SIZE_ENV] = size
    # Every job of the run appends the span it held the host-wide bench lock (one JSON line:
    # job, kind, pid, CLOCK_MONOTONIC start and end; see tunelab.host.benchlock) to this log,
    # unless the caller names another file.
    logs = pipeline.sized_dir(config["logs_dir"], size)
    os.environ.setdefault("TUNELAB_JOB_LOG", os.path.abspath(os.path.join(logs, "jobs.jsonl")))
    submitting = main_process and not remote
    # Files the wall clock left in the future (it stepped back) are dated now, here and
    # at each job's end, so no output is older than its inputs (tunelab.host.clockstep).
    roots = run_files(config, basedir)
    os.environ.setdefault(clockstep.ROOTS_ENV, os.pathsep.join(roots))
    if submitting:
        clockstep.date_future_files_now(roots)
        prestart()
        # What writers killed mid-write left (their temporary files); a live one's stay.
        if gone := atomic.orphans(roots):
            for path in gone:
                path.unlink(missing_ok=True)
            print(
                f"[lab] removed {len(gone)} partial write(s) a killed run left: "
                f"{', '.join(map(str, gone[:3]))}{' …' if len(gone) > 3 else ''}",
                file=sys.stderr,
            )
    pipeline.shared_pools_or_exit(dict(config))
    plan = pipeline.plan_or_exit(
        config["sweeps"], config["engine"], calibration_config.output_path(config), size
    )
    # What the run's jobs start names this process as its owner, so `tunelab recover` tells
    # a killed run's leftovers from a live run's (see tunelab.host.ownership).
    os.environ.setdefault(ownership.OWNER_PID_ENV, str(os.getpid()))
    os.environ.setdefault(ownership.WORKDIR_ENV, os.path.realpath(config["workdir"]))
    # Points of this run may share a server engine (restarted only when a knob needs it);
    # the run's end removes it, whatever the outcome. A job of the run on a cluster node is
    # a Snakemake process of its own: it takes the run's id from the environment, and the
    # first one on a node owns (and at its end removes) what the run's points start there.
    run_id = cluster.run_id()
    if remote:
        cluster.own_node_job(run_id, config["workdir"])
    if submitting:  # `./lab run` follows the run from what its plan says (tunelab.run.progress)
        results = pipeline.sized_dir(config["results_dir"], size)
        pipeline.retire_removed_points(plan, config["engine"], results)
        progress.announce(plan, config["engine"], results, logs)
    return Run(id=run_id, workdir=config["workdir"], size=size, plan=plan)


def run_files(config: Mapping[str, Any], basedir: str) -> list[str]:
    """What the run's jobs read and write: its directories, the sweep files' folder, the
    calibration file, the workflow's own files and report templates."""
    sweeps_dir = os.path.dirname(config["sweeps"]) or "."
    dirs = [config[k] for k in ("results_dir", "reports_dir", "logs_dir", "data_dir")]
    dirs += [config.get("traces_dir", "traces"), sweeps_dir, calibration_config.output_path(config)]
    dirs += [os.path.join(basedir, "workflows"), os.path.join(basedir, "reports")]
    return list(dict.fromkeys(os.path.abspath(d) for d in dirs))
