# Buffer-pool curves from page-reference traces (`tunelab bpsim`):
#   {traces_dir}/{name}.trace.{npy,npz,txt} -> {results_dir}/bpsim/{name}.csv (every pool
#   size: hits, misses, reads/s, application and system hit ratio) and .json (working set,
#   knee, ...). Options from config: bpsim: {args: "...", <name>: "..."}.
from tunelab.bpsim.cli import workflow_args
from tunelab.bpsim.traces import find_trace
from tunelab.run.pipeline import words

BPSIM_TRACES = config.get("traces_dir", "traces")
BPSIM_RESULTS = f"{config.get('results_dir', 'results')}/bpsim"
BPSIM_LOGS = f"{config.get('logs_dir', 'logs')}/bpsim"


rule bpsim_curve:
    """Exact LRU curve over all pool sizes (one pass) and headline figures of one trace."""
    input:
        trace=lambda wc: find_trace(BPSIM_TRACES, wc.name),
    output:
        curve=f"{BPSIM_RESULTS}/{{name}}.csv",
        summary=f"{BPSIM_RESULTS}/{{name}}.json",
    conda:
        "../environment.yml"
    log:
        f"{BPSIM_LOGS}/{{name}}.log",
    params:
        extra=lambda wc: words(workflow_args(config, wc.name)),
    wildcard_constraints:
        name=r"[^/]+",
    shell:
        "tunelab bpsim {input.trace:q} --out {output.curve:q} --summary {output.summary:q}"
        " {params.extra:q} > {log:q} 2>&1"
