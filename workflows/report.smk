rule sweep_report:
    """The comparative HTML report of one sweep, rendered from its stored results."""
    input:
        results=f"{RESULTS}/{ENGINE}/{{sweep}}.csv",
        sweep=lambda wc: ancient(sweep_file(wc)),
        template=f"{workflow.basedir}/reports/sweep_report.py",
        calibration=calibration_input,
        bpsim=sweep_bpsim_curve,
    output:
        html=f"{REPORTS}/{ENGINE}/{{sweep}}.html",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}.report.log",
    params:
        calibration=lambda wc, input: (
            f"--calibration {input.calibration}" if input.calibration else ""
        ),
        bpsim=lambda wc, input: f"--bpsim {input.bpsim}" if input.bpsim else "",
    shell:
        "tunelab report --results {input.results} --sweep {input.sweep}"
        " --template {input.template} {params.calibration} {params.bpsim}"
        " --out {output.html} > {log} 2>&1"


rule report_index:
    """reports/index.html linking every sweep report."""
    input:
        sweep_reports,
    output:
        html=f"{REPORTS}/index.html",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/index.log",
    params:
        results_dir=RESULTS,
        other_engines=other_engine_reports,
    shell:
        "tunelab index --out {output.html} --results-dir {params.results_dir} {input}"
        " {params.other_engines} > {log} 2>&1"
