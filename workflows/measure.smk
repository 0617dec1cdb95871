from tunelab.store import results


rule measure_sweep:
    """Every point of a sweep, measured in rounds (round r: repetition r of every point, in a
    seeded random order), timed one repetition at a time (bench_slot). A killed run keeps
    its finished rounds; the next continues from there."""
    input:
        sweep=lambda wc: ancient(sweep_file(wc)),
        data=lambda wc: [ancient(d) for d in sweep_datasets(wc)],
        calibration=calibration_for_points,
    output:
        # temp: once every point has its file, it goes; a point file deleted, cut or added
        # then measures its whole sweep again, so that its rows stay paired by round
        rounds=temp(f"{RESULTS}/{ENGINE}/{{sweep}}/{results.ROUNDS_FILE}"),
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}.measure.log",
    params:
        engine=ENGINE,
        workdir=config["workdir"],
        data_dir=config["data_dir"],
        run_id=RUN_ID,
        calibration=lambda wc, input: pipeline.option("--calibration", input.calibration),
    resources:
        bench_slot=2,  # both slots: no other job of the run beside a measurement
    # Sweeps whose points share a server run one after the other (fresh and restart knobs).
    priority: lambda wc: PLAN.sweep_priority(wc.sweep)
    shell:
        "tunelab run-sweep {input.sweep:q} --engine {params.engine:q} --out {output.rounds:q}"
        " --workdir {params.workdir:q} --data-dir {params.data_dir:q}"
        " --run-id {params.run_id:q} {params.calibration:q} > {log:q} 2>&1"


rule measure_point:
    """A point's rows of its sweep's rounds, verified, to its own results file."""
    input:
        rounds=f"{RESULTS}/{ENGINE}/{{sweep}}/{results.ROUNDS_FILE}",
    output:
        csv=f"{RESULTS}/{ENGINE}/{{sweep}}/{{point}}.csv",
        # written after the CSV: a CSV without it was never verified, so not measured
        check=f"{RESULTS}/{ENGINE}/{{sweep}}/{{point}}.check.json",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}/{{point}}.log",
    priority: pipeline.SHORT_UNTIMED
    shell:
        "tunelab point-results {input.rounds:q} {wildcards.point:q} --out {output.csv:q}"
        " > {log:q} 2>&1"


rule merge_sweep:
    """Every repetition of every point of a sweep in one tidy file. `tunelab merge` verifies
    each point first; one that fails is set aside, so the next run measures it again."""
    input:
        # With the points' directory among the inputs, deleting a point file reruns the
        # merge, hence that point (Snakemake does not rerun a job for a deleted input alone).
        unpack(lambda wc: results.merge_inputs(point_csvs(wc), sweep_bpsim_curve(wc))),
    output:
        csv=f"{RESULTS}/{ENGINE}/{{sweep}}.csv",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}.merge.log",
    priority: pipeline.SHORT_UNTIMED
    shell:
        "tunelab merge {input.points:q} --out {output.csv:q} > {log:q} 2>&1"


rule trace_point:
    """The page-reference trace of one point's workload (untimed), beside its results: for
    the buffer-pool simulator. Sweeps with `trace: true` ask for their first point's; any
    point's can be asked for as a target."""
    input:
        sweep=lambda wc: ancient(sweep_file(wc)),
        data=lambda wc: ancient(point_dataset(wc)),
    output:
        trace=f"{RESULTS}/{ENGINE}/{{sweep}}/{{point}}.trace.npz",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}/{{point}}.trace.log",
    params:
        engine=ENGINE,
        workdir=config["workdir"],
        data_dir=config["data_dir"],
    resources:
        bench_slot=2,
    # Among the measurements (its sweep's report waits for it), not after them.
    priority: lambda wc: PLAN.measure_priority(wc.sweep, wc.point)
    shell:
        "tunelab trace-point {input.sweep:q} {wildcards.point:q} --engine {params.engine:q}"
        " --out {output.trace:q} --workdir {params.workdir:q} --data-dir {params.data_dir:q}"
        " > {log:q} 2>&1"


rule simulate_point:
    """Exact LRU curve over every pool size from a point's trace (`tunelab bpsim`)."""
    input:
        trace=f"{RESULTS}/{ENGINE}/{{sweep}}/{{point}}.trace.npz",
    output:
        curve=f"{RESULTS}/{ENGINE}/{{sweep}}/{{point}}.bpsim.csv",
        summary=f"{RESULTS}/{ENGINE}/{{sweep}}/{{point}}.bpsim.json",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}/{{point}}.bpsim.log",
    priority: pipeline.SHORT_UNTIMED
    shell:
        "tunelab bpsim {input.trace:q} --out {output.curve:q} --summary {output.summary:q}"
        " > {log:q} 2>&1"
