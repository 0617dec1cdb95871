"""The workflow's job commands, and the names the run's warm job server is known by.

The one list of what `tunelab` does as a workflow job: the job server serves these, `tunelab
recover` tells a run's jobs by them, and the CLI takes the bench lock as they say. The rest
of the package knows the job server (``tunelab.jobserver``, a layer above everything else)
only through the names kept here: nothing imports it. A leaf: it imports nothing.
"""

# How a job command holds the host-wide bench lock (tunelab.host.benchlock) for its whole run:
# alone, or beside other jobs but never beside a measurement. A measurement's command holds
# it around the measurement only (runner.bench_slot).
EXCLUSIVE = "exclusive"
SHARED = "shared"
AROUND_MEASUREMENT = "around measurement"

# The `tunelab` commands Snakemake runs as jobs, and their bench-lock mode. What is not here
# (validate, plan, progress, ...) never runs under Snakemake's lock, so it cannot keep a
# stale one.
JOB_COMMANDS = {
    "run-sweep": AROUND_MEASUREMENT,
    "run-point": AROUND_MEASUREMENT,
    "point-results": SHARED,
    "trace-point": AROUND_MEASUREMENT,
    "calibrate": EXCLUSIVE,
    "datagen": SHARED,
    "merge": SHARED,
    "bpsim": SHARED,
    "bpsim-shared": SHARED,
    "report-shared-pools": SHARED,
    "report": SHARED,
    "index": SHARED,
    "check": SHARED,
}
# The run's clean-up at the workflow's end (no job runs then), in the job server while it is up.
CLEAN = "clean"
# A report's notebook kernel: ipykernel's, forked warm like a job.
KERNEL = "kernel"
# What the job server runs; every other command runs in its own process.
SERVED = frozenset({*JOB_COMMANDS, CLEAN, KERNEL})

# The job server's socket, which a job's `tunelab` command sends itself to.
JOB_SERVER_ENV = "TUNELAB_JOB_SERVER"
# "PID:FD": a standby server `./lab run` started before its checks, and the descriptor of
# its standard input, which the workflow inherits and takes over.
STANDBY_ENV = "TUNELAB_JOB_SERVER_STANDBY"
# What its process runs (``python -m tunelab.jobserver``): how `tunelab recover` knows it.
SERVER_MODULE = "tunelab.jobserver"
# What `./lab run` runs Snakemake as (``python -m tunelab.run.labstart``, the run's start and then
# Snakemake in one process), and Snakemake's command line alone (``tunelab.run.snakemake_cli``).
SNAKEMAKE_MODULES = frozenset({"tunelab.run.labstart", "tunelab.run.snakemake_cli"})
# The report's kernel manager in a run with a job server (report.render names it, never
# imports it): its kernels are forked warm.
WARM_KERNEL_MANAGER = "tunelab.jobserver.kernel_manager.WarmKernelManager"
