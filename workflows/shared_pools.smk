# The shared-pools page: pureScale LBP/GBP sizing curves simulated from synthetic traces
# (`tunelab bpsim-shared`), engine-independent, so one page for every engine's run
# (`shared_pools:` in the config gives its arguments, or turns it off).
rule shared_pools_curves:
    """Every (members, write share, LBP, GBP) point of the shared-pool simulator."""
    output:
        curves=f"{RESULTS}/shared-pools.csv",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/shared-pools/curves.log",
    params:
        extra=lambda wc: words(pipeline.shared_pools_args(config) or ""),
    priority: pipeline.SHORT_UNTIMED
    shell:
        "tunelab bpsim-shared --out {output.curves:q} --force {params.extra:q} > {log:q} 2>&1"


rule shared_pools_report:
    """reports/shared-pools.html: the curves, the GBP knee against the slides' rule, the LBP."""
    input:
        curves=f"{RESULTS}/shared-pools.csv",
        template=f"{workflow.basedir}/reports/shared_pools_report.py",
    output:
        html=f"{REPORTS}/shared-pools.html",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/shared-pools/report.log",
    priority: 0.999  # among the reports, the first (two figures of many panels)
    shell:
        "tunelab report-shared-pools --curves {input.curves:q} --template {input.template:q}"
        " --out {output.html:q} > {log:q} 2>&1"
