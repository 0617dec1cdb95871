"""Sweep files: load, validate (every error, one line each), expand into points.

An error reads ``file: field.path: message (allowed: ...)``. Validation covers the file's
structure (JSON Schema), each knob value against what the chosen engine can express, the
engine's cross-knob rules, and workload parameters — all before anything starts.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tunelab import engines, workloads
from tunelab.dataset import Dataset
from tunelab.engines.base import EngineInfo

DEFAULT_SEED = 42
DEFAULT_REPETITIONS = 3
DEFAULT_ACCESS = "optimizer"
CALIBRATED = "calibrated"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|K|M|G|KB|MB|GB)\s*$")
_UNITS = {"B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2,
          "MIB": 1024**2, "G": 1024**3, "GB": 1024**3, "GIB": 1024**3}  # fmt: skip


_KIND = {"array": "a list", "number": "a number", "integer": "an integer", "null": "null",
         "string": "a string", "object": "a mapping"}  # fmt: skip


@dataclass(frozen=True)
class SpecError:
    file: str
    path: str
    message: str
    allowed: str = ""

    def __str__(self) -> str:
        tail = f" (allowed: {self.allowed})" if self.allowed else ""
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}: {where}{self.message}{tail}"


class SweepInvalid(Exception):
    def __init__(self, errors: list[SpecError]):
        super().__init__("\n".join(map(str, errors)))
        self.errors = errors


@dataclass(frozen=True)
class Point:
    sweep: str
    sweep_file: str
    point_id: str
    engine: str
    knobs: dict[str, Any]
    workload: workloads.Workload
    cache: str
    repetitions: int
    dataset: Dataset
    trace: bool = False
    swept: tuple[str, ...] = field(default=())
    access: str = "optimizer"  # or "forced": the plan must be what the index knob built

    def to_json(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep,
            "point_id": self.point_id,
            "engine": self.engine,
            "knobs": self.knobs,
            "workload": {"type": self.workload.type, **self.workload.params},
            "cache": self.cache,
            "access": self.access,
            "repetitions": self.repetitions,
            "dataset": {"rows": self.dataset.rows, "seed": self.dataset.seed},
        }


@cache
def schema() -> dict:
    text = resources.files("tunelab").joinpath("schemas/sweep.schema.json").read_text()
    return json.loads(text)


def parse_size(value: Any) -> int | None:
    """Bytes for strings like '64MiB' or '512K'; None if ``value`` is not such a string."""
    if not isinstance(value, str):
        return None
    m = _SIZE.match(value)
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _schema_errors(file: str, doc: Any) -> list[SpecError]:
    validator = jsonschema.Draft202012Validator(schema())
    errors = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.path))):
        errors.extend(_explain(file, err))
    return errors


def _explain(file: str, err: jsonschema.ValidationError) -> list[SpecError]:
    """Turn a JSON Schema error into lines naming the field and what is allowed."""
    path = _path(err.absolute_path)
    sch = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "additionalProperties":
        allowed = sorted(sch.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        return [
            SpecError(file, _path([*err.absolute_path, k]), "unknown key", ", ".join(allowed))
            for k in extra
        ]
    if err.validator in ("oneOf", "anyOf"):
        named = [v for alt in err.validator_value for v in alt.get("enum", ())]
        if named:
            allowed = ", ".join(map(str, named)) + ", or a list of them"
            return [SpecError(file, path, f"{err.instance!r} not allowed", allowed)]
        kinds = [_KIND.get(alt.get("type"), str(alt.get("type"))) for alt in err.validator_value]
        return [SpecError(file, path, f"{err.instance!r} is not valid", " or ".join(kinds))]
    if err.validator == "enum":
        return [SpecError(file, path, f"{err.instance!r} not allowed",
                          ", ".join(map(str, err.validator_value)))]  # fmt: skip
    if err.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", err.message)
        return [SpecError(file, _path([*err.absolute_path, m]), "missing") for m in missing]
    if err.validator == "type":
        return [SpecError(file, path, f"{err.instance!r} has the wrong type",
                          str(err.validator_value))]  # fmt: skip
    if err.validator in ("minimum", "maximum"):
        bound = ">=" if err.validator == "minimum" else "<="
        return [SpecError(file, path, f"{err.instance!r} out of range",
                          f"{bound} {err.validator_value}")]  # fmt: skip
    if err.validator == "pattern":
        return [SpecError(file, path, f"{err.instance!r} is not a valid name",
                          "lower-case letters, digits, '-' and '_'")]  # fmt: skip
    return [SpecError(file, path, err.message)]


def load_yaml(path: Path) -> tuple[Any, list[SpecError]]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        return None, [SpecError(str(path), "", f"cannot read file: {exc.strerror}")]
    try:
        return yaml.safe_load(text), []
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        return None, [
            SpecError(str(path), where, f"not valid YAML: {getattr(exc, 'problem', exc)}")
        ]


def engines_of(doc: dict) -> list[str]:
    return list(doc.get("engines") or engines.names())


def _knob_lists(doc: dict, engine: str) -> tuple[dict[str, list], dict[str, Any]]:
    lists = dict(doc.get("knobs") or {})
    fixed = dict(doc.get("fixed") or {})
    over = (doc.get("overrides") or {}).get(engine) or {}
    lists.update(over.get("knobs") or {})
    fixed.update(over.get("fixed") or {})
    for k in lists:
        fixed.pop(k, None)
    # An override may drop a knob the engine lacks by giving it no values (null).
    return {k: v for k, v in lists.items() if v is not None}, fixed


def _normalise(
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
                errors.append(SpecError(file, path, "'calibrated' needs a calibration file",
                                        "run `tunelab calibrate` first"))  # fmt: skip
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
            errors.append(SpecError(file, path, f"{value!r} {problem}", allowed))
            continue
        out[name] = value
    return out, errors


def _defaults(info: EngineInfo) -> dict[str, Any]:
    return {k: v.default for k, v in info.knobs.items() if v.default is not None}


def _expand_workload(entry: dict) -> list[workloads.Workload]:
    wtype = entry["type"]
    params = {**workloads.DEFAULTS[wtype], **{k: v for k, v in entry.items() if k != "type"}}
    keys = list(params)
    choices = [v if isinstance(v, list) else [v] for v in params.values()]
    return [
        workloads.Workload(wtype, dict(zip(keys, combo))) for combo in itertools.product(*choices)
    ]


def _slug(value: Any) -> str:
    text = str(value).lower().replace(".", "p")
    return re.sub(r"[^a-z0-9_]+", "-", text).strip("-")


def point_id(
    swept: dict[str, Any], w: workloads.Workload, cache_state: str, varied: set[str]
) -> str:
    parts = [f"{k}-{_slug(v)}" for k, v in swept.items()]
    parts.append(w.type)
    parts += [f"{k}-{_slug(v)}" for k, v in w.params.items() if f"wl_{k}" in varied]
    parts.append(cache_state)
    readable = "_".join(parts)
    digest = hashlib.sha1(readable.encode()).hexdigest()[:6]
    return f"{readable[:100]}_{digest}"


def expand(
    path: Path, engine: str | None = None, calibration: Any = None, defer_calibrated: bool = False
) -> tuple[list[Point], list[SpecError]]:
    """Validate one sweep file and expand it into points for ``engine`` (default: the first
    engine the sweep lists). Returns (points, errors); points is empty when errors exist.
    With ``defer_calibrated`` and no calibration, 'calibrated' knob values stay as they are
    (the workflow measures the calibration before such points run)."""
    file = str(path)
    doc, errors = load_yaml(path)
    if errors:
        return [], errors
    if not isinstance(doc, dict):
        return [], [SpecError(file, "", "a sweep file must be a mapping of keys")]
    errors = _schema_errors(file, doc)
    broken = {e.path.split(".")[0].split("[")[0] for e in errors}
    # Keep checking what the schema errors leave intact, so one call reports every error.
    if broken & {"knobs", "fixed", "overrides", "engines", "dataset", "workloads"}:
        return [], errors
    allowed = engines_of(doc)
    engine = engine or allowed[0]
    if engine not in allowed:
        return [], [
            SpecError(file, "engines", f"this sweep does not run on {engine}", ", ".join(allowed))
        ]
    info = engines.info(engine)
    lists, fixed = _knob_lists(doc, engine)
    ds = Dataset(rows=doc["dataset"]["rows"], seed=doc["dataset"].get("seed", DEFAULT_SEED))
    where = {k: f"knobs.{k}" for k in lists} | {k: f"fixed.{k}" for k in fixed}
    for src in ("knobs", "fixed"):
        for k in ((doc.get("overrides") or {}).get(engine) or {}).get(src) or {}:
            where[k] = f"overrides.{engine}.{src}.{k}"

    # Workloads first: their expansion decides which parameters vary.
    wls: list[workloads.Workload] = []
    for i, entry in enumerate(doc["workloads"]):
        for w in _expand_workload(entry):
            for fld, msg in workloads.check_params(w.type, w.params, ds.rows):
                errors.append(SpecError(file, f"workloads[{i}].{fld}", msg))
            wls.append(w)
    varied = {
        f"wl_{k}"
        for t in {w.type for w in wls}
        for k in workloads.DEFAULTS[t]
        if len({json.dumps(w.params[k]) for w in wls if w.type == t}) > 1
    }

    access = doc.get("access", DEFAULT_ACCESS)
    if access not in info.access_modes:
        errors.append(SpecError(file, "access", f"{engine} cannot honour access: {access}",
                                ", ".join(info.access_modes)))  # fmt: skip
    caches = ["cold", "warm"] if doc.get("cache", "cold") == "both" else [doc.get("cache", "cold")]
    reps = doc.get("repetitions", DEFAULT_REPETITIONS)
    points: list[Point] = []
    seen: set[str] = set()
    names = list(lists)
    for combo in itertools.product(*(lists[k] for k in names)):
        asked = {**fixed, **dict(zip(names, combo))}
        knobs, errs = _normalise(info, asked, calibration, file, where, defer_calibrated)
        for e in errs:
            if str(e) not in seen:
                seen.add(str(e))
                errors.append(e)
        if errs:
            continue
        knobs = {**_defaults(info), **knobs}
        check_point = getattr(engines.engine_class(engine), "check_point", None)
        for fld, msg, allowed_text in check_point(knobs) if check_point else []:
            e = SpecError(file, where.get(fld, f"knobs.{fld}"), msg, allowed_text)
            if str(e) not in seen:
                seen.add(str(e))
                errors.append(e)
        swept = dict(zip(names, combo))
        for w in wls:
            for c in caches:
                pid = point_id(swept, w, c, varied)
                points.append(Point(str(doc.get("name")), file, pid, engine, knobs, w, c, reps, ds,
                                    bool(doc.get("trace", False)), tuple(names),
                                    access))  # fmt: skip
    if errors:
        return [], errors
    if not points:
        return [], [SpecError(file, "knobs", "the sweep expands to no points")]
    ids = [p.point_id for p in points]
    if len(set(ids)) != len(ids):
        return [], [
            SpecError(file, "knobs", "two points would have the same id; remove duplicates")
        ]
    return points, []


@dataclass
class Validated:
    points: dict[str, list[Point]]  # sweep name -> points
    files: dict[str, str]  # sweep name -> sweep file
    skipped: dict[str, str]  # sweep file -> why it does not run on the engine
    errors: list[SpecError]


def validate_files(
    paths: list[Path],
    engine: str | None = None,
    calibration: Any = None,
    *,
    skip_other_engines: bool = False,
    defer_calibrated: bool = False,
) -> Validated:
    """Validate every file (all errors, not just the first); sweep names must be unique.
    With ``skip_other_engines``, a sweep that does not list ``engine`` is skipped, not wrong."""
    out = Validated({}, {}, {}, [])
    for p in map(Path, paths):
        if skip_other_engines and engine:
            doc, errs = load_yaml(p)
            if not errs and isinstance(doc, dict) and engine not in engines_of(doc):
                out.skipped[str(p)] = f"runs on {', '.join(engines_of(doc))}"
                continue
        pts, errs = expand(p, engine, calibration, defer_calibrated)
        out.errors.extend(errs)
        if pts:
            name = pts[0].sweep
            if name in out.files:
                msg = f"'{name}' is also the name of {out.files[name]}"
                out.errors.append(SpecError(str(p), "name", msg))
            out.files[name] = str(p)
            out.points[name] = pts
    return out
