"""What an engine and this host allow of a sweep: its engines, knobs and values, memory, disk."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tunelab import engines
from tunelab.engines.base import VERSION_KNOB, EngineInfo, version_text
from tunelab.host import provenance
from tunelab.host.units import parse_size
from tunelab.host.yamlfile import show as _show
from tunelab.store import dataset
from tunelab.store.dataset import Dataset
from tunelab.sweep.messages import SpecError

CALIBRATED = "calibrated"


def engines_of(doc: dict) -> list[str]:
    return list(doc.get("engines") or engines.names())


def cannot_vary(doc: dict, engine: str) -> str | None:
    """Why a sweep that names no engines (so: every engine that can run it) does not run on
    ``engine``: a knob it sweeps that the engine lacks, or none of whose values it allows
    (a page size compiled into the server). None when the sweep is for this engine."""
    if doc.get("engines"):
        return None
    return knob_refusal(doc, engine)


def knob_refusal(doc: dict, engine: str) -> str | None:
    """Why ``engine``, as it declares its knobs, cannot run a sweep's comparison: a knob the
    sweep varies that the engine lacks, or none of whose values it allows (SQLite's lock
    granularity, the whole database only), or None."""
    if engine not in engines.names():
        return None
    info = engines.info(engine)
    lists, _ = knob_lists(doc, engine)
    for name, values in lists.items():
        if not isinstance(values, list) or len(values) < 2:
            continue
        knob = info.knobs.get(name)
        reason = info.notes.get(name) or (knob.meaning if knob else "")
        if knob is None:
            return f"{engine} has no knob {name}" + (f": {reason}" if reason else "")
        if knob.values is not None and not any(v in knob.values for v in values):
            return f"{engine} cannot vary {name}: {reason}"
    return None


def host_refuses(doc: dict, engine: str) -> str | None:
    """Why this host cannot run a sweep on ``engine`` (a knob it sets needs what the host
    lacks: a device of the lab's own without root), or None."""
    if engine not in engines.names():
        return None
    lists, fixed = knob_lists(doc, engine)
    rules = engines.engine_class(engine).knob_rules
    for values in ({k: v[0] for k, v in lists.items() if isinstance(v, list) and v}, fixed):
        for _, msg in rules.host_refusals(values):
            return msg
    return None


def knob_lists(doc: dict, engine: str) -> tuple[dict[str, list], dict[str, Any]]:
    """(swept knob lists, fixed knobs) of a sweep for one engine: ``overrides.<engine>``
    replaces the general values, a swept knob is not also fixed, and a knob given no values
    (null) is dropped. Reports read a sweep through this rule too."""
    lists = dict(doc.get("knobs") or {})
    fixed = dict(doc.get("fixed") or {})
    over = (doc.get("overrides") or {}).get(engine) or {}
    lists.update(over.get("knobs") or {})
    fixed.update(over.get("fixed") or {})
    for k in lists:
        fixed.pop(k, None)
    # An override may drop a knob the engine lacks by giving it no values (null).
    return {k: v for k, v in lists.items() if v is not None}, fixed


def normalise(
    info: EngineInfo,
    knobs: dict[str, Any],
    calibration: Any,
    file: str,
    where: dict[str, str],
    defer_calibrated: bool = False,
) -> tuple[dict[str, Any], list[SpecError]]:
    """Check knob values against the engine and convert units (sizes to pages, calibrated)."""
    errors: list[SpecError] = []
    out: dict[str, Any] = {}
    page_knob = info.knobs.get("page_size")
    page = knobs.get("page_size", page_knob.default if page_knob else None)
    for name, value in knobs.items():
        path = where[name]
        knob = info.knobs.get(name)
        if name == VERSION_KNOB:  # 15 or 10.11 as YAML reads them: the declared text
            value = version_text(value)
        if knob is None:
            note = info.notes.get(name)
            msg = f"{info.name} cannot express knob '{name}'" + (f": {note}" if note else "")
            errors.append(SpecError(file, path, msg, ", ".join(info.knobs)))
            continue
        if name == "buffer_pool" and (nbytes := parse_size(value)) is not None:
            if not isinstance(page, int):
                errors.append(SpecError(file, path, "a size in bytes needs a page size"))
                continue
            value = max(1, nbytes // page)
        if value == CALIBRATED and name in ("overhead_ms", "transferrate_ms"):
            if calibration is None and defer_calibrated:
                out[name] = value  # resolved when the point runs, after the calibration
                continue
            if calibration is None:
                errors.append(
                    SpecError(
                        file,
                        path,
                        "'calibrated' needs a calibration file",
                        "run `tunelab calibrate` first",
                    )
                )
                continue
            from tunelab import calibrate

            try:
                value = calibrate.calibrated_value(calibration, name, page)
            except calibrate.CalibrationError as exc:
                errors.append(SpecError(file, path, f"'calibrated': {exc}"))
                continue
        problem = knob.check(value)
        if problem:
            allowed = knob.allowed_text()
            if name == "buffer_pool":
                allowed += ", or a size such as 64MiB"
            errors.append(SpecError(file, path, f"{_show(value)} {problem}", allowed))
            continue
        out[name] = value
    return out, errors


def _size(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


def memory_refusals(knobs: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(field, message, allowed) for a buffer pool larger than the host's memory: the engine
    would fail to start, or swap and measure the disk."""
    pool, page = knobs.get("buffer_pool"), knobs.get("page_size")
    if type(pool) is not int or type(page) is not int:
        return []
    memory = provenance.memory_bytes()
    if pool * page <= memory:
        return []
    msg = (
        f"a pool of {pool} pages of {page} bytes is {_size(pool * page)}, more than this "
        f"host's memory ({_size(memory)})"
    )
    return [("buffer_pool", msg, "at most the host's memory")]


def disk_refuses(ds: Dataset, data_dir: Path) -> str | None:
    """Why the data set cannot be generated into ``data_dir``: its files would not fit the
    free space there (nothing is asked of a data set already made)."""
    if dataset.cached_path(ds, data_dir).exists():
        return None
    need = dataset.disk_bytes(ds.rows)
    folder = data_dir.absolute()
    while not folder.is_dir() and folder != folder.parent:  # made by the run: its parent's
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None  # a folder that cannot be read fails where it is used, naming it
    if need <= free:
        return None
    return f"{ds.rows} rows need about {_size(need)} in {data_dir}/, which has {_size(free)} free"
