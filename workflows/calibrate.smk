# Storage calibration: one file per host and engine data directory (config "workdir"),
# measured with fio by `tunelab calibrate`. The rule has no inputs, so a calibration once
# written is reused by every later run; `snakemake --forcerun calibrate` (or deleting the
# file) measures again. config "calibrate": quick | full | off (false = off).

from pathlib import Path

from tunelab.calibrate import default_path

CALIBRATION_FILE = str(default_path(config.get("workdir", ".tunelab")))


def calibration_wanted():
    return config.get("calibrate", "quick") not in ("off", False)


def calibration_input(wildcards):
    """For rules that show device limits: the calibration file, or nothing when off."""
    return [CALIBRATION_FILE] if calibration_wanted() else []


def calibrate_workdir(wildcards):
    return config.get("workdir", ".tunelab")


def calibrate_mode(wildcards):
    return "--quick" if config.get("calibrate", "quick") == "quick" else ""


rule calibrate:
    """fio measurements of the device under the engine data directory (one bench slot)."""
    output:
        calibration=CALIBRATION_FILE,
    log:
        calibrate=f"{config.get('logs_dir', 'logs')}/calibrate/{Path(CALIBRATION_FILE).stem}.log",
    params:
        workdir=calibrate_workdir,
        mode=calibrate_mode,
    resources:
        bench_slot=1,
    shell:
        "mkdir -p {params.workdir:q} && "
        "tunelab calibrate --dir {params.workdir:q} {params.mode} --force "
        "--out {output.calibration:q} > {log.calibrate:q} 2>&1"
