rule sweep_report:
    """The comparative HTML report of one sweep, rendered from its stored results."""
    input:
        results=f"{RESULTS}/{ENGINE}/{{sweep}}.csv",
        sweep=lambda wc: ancient(sweep_file(wc)),
        template=f"{workflow.basedir}/reports/sweep_report.py",
        calibration=calibration_input,
        bpsim=sweep_bpsim_curve,
        verdicts=f"{REPORTS}/{ENGINE}/{{sweep}}.verdicts.json",
    output:
        html=f"{REPORTS}/{ENGINE}/{{sweep}}.html",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}.report.log",
    params:
        calibration=lambda wc, input: pipeline.option("--calibration", input.calibration),
        bpsim=lambda wc, input: pipeline.option("--bpsim", input.bpsim),
    # The longest reports first: the two slots end together.
    priority: lambda wc: PLAN.report_priority(wc.sweep)
    shell:
        "tunelab report --results {input.results:q} --sweep {input.sweep:q}"
        " --template {input.template:q} {params.calibration:q} {params.bpsim:q}"
        " --verdicts {input.verdicts:q} --out {output.html:q} > {log:q} 2>&1"


rule check_sweep:
    """The sweep's findings and claims judged once on its results: the verdicts its report,
    the index and the cross-engine pages show (a finding not reproduced is a result, not a
    failed run)."""
    input:
        results=f"{RESULTS}/{ENGINE}/{{sweep}}.csv",
        sweep=lambda wc: ancient(sweep_file(wc)),
        # not ancient: findings edited re-judge the stored rows (the verdicts say so)
        findings=findings_file,
    output:
        verdicts=f"{REPORTS}/{ENGINE}/{{sweep}}.verdicts.json",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/{ENGINE}/{{sweep}}.check.log",
    priority: pipeline.CHECK_SOON
    shell:
        "tunelab check --no-fail --sweep {input.sweep:q} --json {output.verdicts:q}"
        " {input.results:q} > {log:q} 2>&1"


rule report_index:
    """reports/index.html linking every sweep report, and the pages across engines beside it
    (reports/engines/): one that cannot be made fails the rule, its log's line says why."""
    input:
        reports=sweep_reports,
        verdicts=sweep_verdicts,
        # `tunelab check --stability-out` over several runs: the index shows it when newer
        stability=stability_file,
        shared_pools=shared_pools_page,
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
        "tunelab index --out {output.html:q} --results-dir {params.results_dir:q}"
        " {input.reports:q} {params.other_engines:q} --verdicts {input.verdicts:q}"
        " > {log:q} 2>&1"
