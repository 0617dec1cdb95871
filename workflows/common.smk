from pathlib import Path

# Paths of every stage, from the config (helpers live in tunelab.run.pipeline). A run at the
# assignment's size keeps its results, reports and logs below assignment/ (SIZE: Snakefile).
RESULTS = pipeline.sized_dir(config["results_dir"], SIZE)
REPORTS = pipeline.sized_dir(config["reports_dir"], SIZE)
ENGINE = config["engine"]
LOGS = pipeline.sized_dir(config["logs_dir"], SIZE)


def point_csvs(wildcards):
    return expand(
        f"{RESULTS}/{ENGINE}/{{sweep}}/{{point}}.csv",
        sweep=wildcards.sweep,
        point=PLAN.point_ids(wildcards.sweep),
    )


def every_point(wildcards):
    """Every point of every sweep, as a target of its own: a point added to a sweep, or
    whose file was deleted, is measured even when the sweep's merged file looks newer."""
    return [
        f"{RESULTS}/{ENGINE}/{sweep}/{point}.csv"
        for sweep in PLAN.sweeps
        for point in PLAN.point_ids(sweep)
    ]


def sweep_file(wildcards):
    return PLAN.files[wildcards.sweep]


def point_dataset(wildcards):
    key = PLAN.point(wildcards.sweep, wildcards.point).dataset.key
    return f"{config['data_dir']}/{key}.csv"


def sweep_reports(wildcards):
    return [f"{REPORTS}/{ENGINE}/{s}.html" for s in PLAN.sweeps]


def findings_file(wildcards):
    """The findings file that judges the sweep, if it has one."""
    return pipeline.findings_input(sweep_file(wildcards))


def sweep_verdicts(wildcards):
    return [f"{REPORTS}/{ENGINE}/{s}.verdicts.json" for s in PLAN.sweeps]


def shared_pools_page(wildcards):
    """reports/shared-pools.html, unless the config turns it off."""
    if pipeline.shared_pools_args(config) is None:
        return []
    return [f"{REPORTS}/shared-pools.html"]


def stability_file(wildcards):
    found = Path(REPORTS) / "stability.json"
    return [str(found)] if found.is_file() else []


def other_engine_reports(wildcards):
    """Reports rendered earlier for other engines stay linked from the index."""
    return pipeline.reports_of_other_engines(REPORTS, ENGINE)


wildcard_constraints:
    sweep=r"[a-z0-9][a-z0-9_-]*",
    point=r"[a-z0-9_-]+",
    key=r"[a-z]+-v\d+-r\d+-s\d+",


def sweep_datasets(wildcards):
    keys = sorted({p.dataset.key for p in PLAN.sweeps[wildcards.sweep]})
    return [f"{config['data_dir']}/{key}.csv" for key in keys]


def calibration_for_points(wildcards):
    """Points whose knobs say 'calibrated' need the calibration file; others do not wait."""
    if not PLAN.uses_calibration(wildcards.sweep):
        return []
    return [calibration_config.output_path(config)]


def sweep_bpsim_curve(wildcards):
    """The simulated curve of the sweep's first point, when the sweep asks (trace: true)."""
    if not PLAN.traces(wildcards.sweep):
        return []
    first = PLAN.point_ids(wildcards.sweep)[0]
    return [f"{RESULTS}/{ENGINE}/{wildcards.sweep}/{first}.bpsim.csv"]
