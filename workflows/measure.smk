rule measure_point:
    """One point of a sweep: all its repetitions, timed one at a time (bench_slot)."""
    input:
        sweep=lambda wc: ancient(sweep_file(wc)),
        data=lambda wc: ancient(point_dataset(wc)),
        calibration=calibration_for_points,
    output:
        csv=f"{RESULTS}/{ENGINE}/{{sweep}}/{{point}}.csv",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}/{{point}}.log",
    params:
        engine=ENGINE,
        workdir=config["workdir"],
        data_dir=config["data_dir"],
        run_id=RUN_ID,
        calibration=lambda wc, input: (
            f"--calibration {input.calibration}" if input.calibration else ""
        ),
    resources:
        bench_slot=1,
    shell:
        "tunelab run-point {input.sweep} {wildcards.point} --engine {params.engine}"
        " --out {output.csv} --workdir {params.workdir} --data-dir {params.data_dir}"
        " --run-id {params.run_id} {params.calibration} > {log} 2>&1"


rule merge_sweep:
    """Every repetition of every point of a sweep in one tidy file."""
    input:
        point_csvs,
    output:
        csv=f"{RESULTS}/{ENGINE}/{{sweep}}.csv",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}.merge.log",
    shell:
        "tunelab merge {input} --out {output.csv} > {log} 2>&1"


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
        bench_slot=1,
    shell:
        "tunelab trace-point {input.sweep} {wildcards.point} --engine {params.engine}"
        " --out {output.trace} --workdir {params.workdir} --data-dir {params.data_dir}"
        " > {log} 2>&1"


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
    shell:
        "tunelab bpsim {input.trace} --out {output.curve} --summary {output.summary}"
        " > {log} 2>&1"
