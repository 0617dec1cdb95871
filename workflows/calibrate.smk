# Storage calibration: one file per host and engine data directory (config "workdir"),
# measured with fio by `tunelab calibrate`. The rule has no inputs, so a calibration once
# written is reused by every later run; `snakemake --forcerun calibrate` (or deleting the
# file) measures again. config "calibrate": quick | full | off. Rules that show device
# limits take `calibration_input` as an input (nothing when calibration is off).

from tunelab.calibrate import workflow as calibration_config

CALIBRATION_FILE = calibration_config.output_path(config)
calibration_input = calibration_config.input_function(config)


rule calibrate:
    """fio measurements of the device under the engine data directory (one bench slot)."""
    output:
        calibration=CALIBRATION_FILE,
    conda:
        "../environment.yml"
    log:
        calibrate=calibration_config.log_path(config),
    params:
        workdir=lambda wc: calibration_config.workdir(config),
        mode=lambda wc: calibration_config.mode_flag(config),
    resources:
        bench_slot=2,
    shell:
        "mkdir -p {params.workdir:q} && "
        "tunelab calibrate --dir {params.workdir:q} {params.mode:q} --force "
        "--out {output.calibration:q} > {log.calibrate:q} 2>&1"
