# Storage calibration: one file per host and data directory, measured with fio by
# `tunelab calibrate`. The rule has no inputs, so a calibration once written is reused by
# every later run; `snakemake --forcerun calibrate` (or deleting the file) measures again.
# Config: data_dir (default ".tunelab"), calibrate_quick (default false).

from pathlib import Path

from tunelab.calibrate import default_path

CALIBRATION_FILE = str(default_path(config.get("data_dir", ".tunelab")))


def calibrate_data_dir(wildcards):
    return config.get("data_dir", ".tunelab")


def calibrate_mode(wildcards):
    return "--quick" if config.get("calibrate_quick", False) else ""


rule calibrate:
    output:
        calibration=CALIBRATION_FILE,
    log:
        calibrate=f"logs/calibrate/{Path(CALIBRATION_FILE).stem}.log",
    params:
        data_dir=calibrate_data_dir,
        mode=calibrate_mode,
    resources:
        bench_slot=1,
    shell:
        "mkdir -p {params.data_dir:q} && "
        "tunelab calibrate --dir {params.data_dir:q} {params.mode} --force "
        "--out {output.calibration:q} > /dev/null 2> {log.calibrate:q}"
