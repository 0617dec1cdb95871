"""What the Snakemake workflow asks of the package: which sweeps run on the chosen engine,
their points, and the paths of every stage's files. Kept here so the .smk files stay thin."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

from tunelab import dataset, spec
from tunelab.spec import Point


class SweepFilesInvalid(Exception):
    """Raised with every validation error, one per line."""


@dataclass
class Plan:
    engine: str
    sweeps: dict[str, list[Point]]  # sweep name -> points
    files: dict[str, str]  # sweep name -> sweep file
    skipped: dict[str, str]  # sweep file -> why it does not run on this engine

    def point_ids(self, sweep: str) -> list[str]:
        return [p.point_id for p in self.sweeps[sweep]]

    def point(self, sweep: str, point_id: str) -> Point:
        return next(p for p in self.sweeps[sweep] if p.point_id == point_id)

    def uses_calibration(self, sweep: str) -> bool:
        """True when a knob of the sweep takes the measured 'calibrated' value."""
        doc, _ = spec.load_yaml(Path(self.files[sweep]))
        return spec.CALIBRATED in str(doc)

    def traces(self, sweep: str) -> bool:
        """True when the sweep asks for a page trace and its engine can capture one."""
        from tunelab import engines
        from tunelab.engines.base import Engine

        first = self.sweeps[sweep][0]
        can = engines.engine_class(self.engine).capture_trace is not Engine.capture_trace
        return first.trace and can

    def datasets(self) -> list[str]:
        return sorted({p.dataset.key for pts in self.sweeps.values() for p in pts})


def sweep_files(pattern: str | list[str]) -> list[Path]:
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    return sorted({Path(f) for p in patterns for f in glob.glob(p)})


def load_calibration(path: str | Path | None):
    """The calibration for 'calibrated' knob values, if one was measured already."""
    if not path or not Path(path).exists():
        return None
    from tunelab import calibrate

    return calibrate.load(Path(path))


def plan(pattern: str | list[str], engine: str, calibration: str | Path | None = None) -> Plan:
    """Validate every sweep file matched; sweeps that do not list ``engine`` are skipped
    (and said so), every other error is raised together."""
    files = sweep_files(pattern)
    if not files:
        raise SweepFilesInvalid(f"no sweep files match {pattern}")
    found = spec.validate_files(
        files,
        engine,
        load_calibration(calibration),
        skip_other_engines=True,
        defer_calibrated=True,
    )
    if found.errors:
        raise SweepFilesInvalid("\n".join(map(str, found.errors)))
    return Plan(engine, found.points, found.files, found.skipped)


def dataset_of_key(key: str) -> dataset.Dataset:
    """Inverse of Dataset.key (``accounts-v1-r1000-s42``)."""
    table, version, rows, seed = key.split("-")
    if version != f"v{dataset.FORMAT_VERSION}":
        raise ValueError(f"dataset {key}: generator version {version} is not the current one")
    return dataset.Dataset(rows=int(rows[1:]), seed=int(seed[1:]), table=table)


def reports_of_other_engines(reports_dir: str | Path, engine: str) -> list[str]:
    root = Path(reports_dir)
    return sorted(
        str(p) for p in root.glob("*/*.html") if p.parent.name != engine and p.parent.is_dir()
    )
