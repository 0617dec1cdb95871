import os


rule generate_dataset:
    """A seeded data set, generated once and cached (same key -> byte-identical file)."""
    output:
        csv=f"{config['data_dir']}/{{key}}.csv",
    conda:
        "../environment.yml"
    log:
        f"{LOGS}/data/{{key}}.log",
    priority: pipeline.DATA_FIRST
    params:
        data_dir=lambda wc, output: os.path.dirname(output.csv),
    shell:
        "tunelab datagen {wildcards.key:q} --data-dir {params.data_dir:q} > {log:q} 2>&1"
