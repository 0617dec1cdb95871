# tunelab: sweep files -> one measured job per point -> merged results -> HTML reports.
# Run through `./lab run` (which validates first and passes the profile), or directly:
#   snakemake --profile workflows/profile [--config engine=mariadb]
import os

from snakemake.utils import min_version, validate

from tunelab import cluster, jobserver, pipeline, spec

min_version("8.20")


configfile: f"{workflow.basedir}/workflows/config.yaml"


validate(config, f"{workflow.basedir}/workflows/schemas/config.schema.yaml")

from tunelab.calibrate import calibration as calibration_file
from tunelab.calibrate import workflow as calibration_config

# The calibration file is named after the host that submits the run; its jobs, on a cluster
# other hosts, name the same file (its contents say where it was measured).
os.environ.setdefault(calibration_file.HOST_ENV, calibration_file.hostname())

# The data-set size (quick | assignment): every job's `tunelab` expands the sweeps at it.
SIZE = config["size"]
os.environ[spec.SIZE_ENV] = SIZE

# Every job of the run appends the span it held the host-wide bench lock (one JSON line:
# job, kind, pid, CLOCK_MONOTONIC start and end; see tunelab.benchlock) to this log, unless
# the caller names another file.
os.environ.setdefault(
    "TUNELAB_JOB_LOG",
    os.path.abspath(os.path.join(pipeline.sized_dir(config["logs_dir"], SIZE), "jobs.jsonl")),
)

# The job server's imports (tunelab.jobserver) begin here, beside the parse and the DAG;
# `onstart` gives it the run.
if workflow.is_main_process and not workflow.remote_exec:
    jobserver.prestart()

# Invalid sweep files end the run here: one line per error, exit code 2.
PLAN = pipeline.plan_or_exit(
    config["sweeps"], config["engine"], calibration_config.output_path(config), SIZE
)

# What the run's jobs start names this process as its owner, so `tunelab recover` tells a
# killed run's leftovers from a live run's (see tunelab.recovery).
os.environ.setdefault("TUNELAB_OWNER_PID", str(os.getpid()))
os.environ.setdefault("TUNELAB_WORKDIR", os.path.realpath(config["workdir"]))

# Points of this run may share a server engine (restarted only when a knob needs it);
# the run's end removes it, whatever the outcome. A job of the run on a cluster node is a
# Snakemake process of its own: it takes the run's id from the environment, and the first
# one on a node owns (and at its end removes) what the run's points start there.
RUN_ID = cluster.run_id()
if workflow.remote_exec:
    cluster.own_node_job(RUN_ID, config["workdir"])


# What a cluster job needs from the submitting run where the executor does not pass the
# whole environment (Kubernetes); SLURM jobs inherit it.
envvars:
    cluster.RUN_ID_ENV,
    calibration_file.HOST_ENV,


# A local run's jobs start warm, forked by the run's job server (tunelab.jobserver).
onstart:
    if workflow.local_exec and workflow.is_main_process:
        jobserver.start(RUN_ID, config["workdir"])
    else:
        jobserver.release()


onsuccess:
    pipeline.clean_run(RUN_ID, config["workdir"])  # no job runs now: in the job server
    jobserver.stop()
    pipeline.release_timers()


onerror:
    jobserver.stop()  # first: it waits for the jobs still ending
    pipeline.clean_run(RUN_ID, config["workdir"])
    pipeline.release_timers()


include: "workflows/common.smk"
include: "workflows/calibrate.smk"
include: "workflows/data.smk"
include: "workflows/bpsim.smk"
include: "workflows/measure.smk"
include: "workflows/report.smk"


# `./lab run` follows the run from what its plan says (tunelab.progress).
if workflow.is_main_process and not workflow.remote_exec:
    from tunelab import progress

    progress.announce(PLAN, ENGINE, RESULTS, LOGS)


rule all:
    default_target: True
    input:
        every_point,
        sweep_reports,
        f"{REPORTS}/index.html",
