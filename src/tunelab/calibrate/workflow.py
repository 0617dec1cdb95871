"""What workflows/calibrate.smk needs from the workflow config, kept out of the .smk file.

Config keys (the lab's workflow config): ``workdir`` — the directory that holds the engines'
data, measured by the calibration; ``calibrate`` — quick | full | off (false is off);
``logs_dir``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tunelab.calibrate.calibration import DEFAULT_DATA_DIR, default_path

MODES = ("quick", "full", "off")


def workdir(config: Mapping[str, Any]) -> str:
    return str(config.get("workdir", DEFAULT_DATA_DIR))


def mode(config: Mapping[str, Any]) -> str:
    value = config.get("calibrate", "quick")
    if value is False:
        return "off"
    if value not in MODES:
        raise ValueError(f"config calibrate: {value!r} (allowed: {', '.join(MODES)})")
    return value


def output_path(config: Mapping[str, Any]) -> str:
    return str(default_path(workdir(config)))


def log_path(config: Mapping[str, Any]) -> str:
    return f"{config.get('logs_dir', 'logs')}/calibrate/{Path(output_path(config)).stem}.log"


def mode_flag(config: Mapping[str, Any]) -> str:
    return "--quick" if mode(config) == "quick" else ""


def input_function(config: Mapping[str, Any]) -> Callable[[Any], list[str]]:
    """An input function for rules that show device limits: the file, or nothing when off."""

    def calibration_input(wildcards: Any) -> list[str]:
        return [] if mode(config) == "off" else [output_path(config)]

    return calibration_input
