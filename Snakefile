# tunelab: sweep files -> one measured job per point -> merged results -> HTML reports.
# Run through `./lab run` (which validates first and passes the profile), or directly:
#   snakemake --profile workflows/profile [--config engine=mariadb]
from snakemake.utils import min_version, validate

from tunelab.run import pipeline  # the rules' helpers (workflows/*.smk)
from tunelab.jobserver import control as job_server
from tunelab.run.workflow import ENVVARS, setup_run

min_version("8.20")


configfile: f"{workflow.basedir}/workflows/config.yaml"


validate(config, f"{workflow.basedir}/workflows/schemas/config.schema.yaml")

# The run (tunelab.run.workflow): its jobs' environment, its plan (invalid sweep files end it
# here), its id. The job server's imports begin beside the plan, the parse and the DAG.
RUN = setup_run(
    config,
    main_process=workflow.is_main_process,
    remote=workflow.remote_exec,
    prestart=job_server.prestart,
    basedir=workflow.basedir,
)
SIZE, PLAN, RUN_ID = RUN.size, RUN.plan, RUN.id  # what the rules use


# What a cluster job needs from the submitting run where the executor does not pass the
# whole environment (Kubernetes).
envvars:
    *ENVVARS,


# A local run's jobs start warm, forked by the run's job server (tunelab.jobserver).
onstart:
    job_server.on_start(RUN, local=workflow.local_exec and workflow.is_main_process)


# The run's end, whatever the outcome: its clean-up (its shared server engine), the server's stop.
onsuccess:
    job_server.on_end(RUN)


onerror:
    job_server.on_end(RUN, failed=True)


include: "workflows/common.smk"
include: "workflows/calibrate.smk"
include: "workflows/data.smk"
include: "workflows/bpsim.smk"
include: "workflows/shared_pools.smk"
include: "workflows/measure.smk"
include: "workflows/report.smk"


rule all:
    default_target: True
    input:
        every_point,
        sweep_reports,
        shared_pools_page,
        f"{REPORTS}/index.html",
