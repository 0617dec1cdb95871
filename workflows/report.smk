rule sweep_report:
    """The comparative HTML report of one sweep, rendered from its stored results."""
    input:
        results=f"{RESULTS}/{ENGINE}/{{sweep}}.csv",
        sweep=lambda wc: ancient(sweep_file(wc)),
        template="reports/sweep_report.py",
    output:
        html=f"{REPORTS}/{ENGINE}/{{sweep}}.html",
    log:
        f"logs/{ENGINE}/{{sweep}}.report.log",
    shell:
        "tunelab report --results {input.results} --sweep {input.sweep}"
        " --out {output.html} > {log} 2>&1"


rule report_index:
    """reports/index.html linking every sweep report."""
    input:
        sweep_reports,
    output:
        html=f"{REPORTS}/index.html",
    log:
        "logs/index.log",
    params:
        results_dir=RESULTS,
    shell:
        "tunelab index --out {output.html} --results-dir {params.results_dir} {input}"
        " > {log} 2>&1"
