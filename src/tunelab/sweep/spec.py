"""Sweep files: load, validate (every error, one line each), expand into points.

An error reads ``file: field.path: message (allowed: ...)``. Validation covers the file's
structure (JSON Schema), each knob value against what the chosen engine can express, the
engine's cross-knob rules, and workload parameters — all before anything starts. What an
engine accepts but advises against is a warning, ``file: field.path: warning: message``,
which never makes a file invalid.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunelab import engines
from tunelab.engines.base import VERSION_KNOB
from tunelab.host.yamlfile import show as _show
from tunelab.store.dataset import Dataset
from tunelab.sweep import checks, claimspec, findings, loading, workloads
from tunelab.sweep.messages import SpecError, SpecWarning

DEFAULT_SEED = 42
DEFAULT_REPETITIONS = 3
# The most rounds a point may get, fixed or as a {min, max} budget (the schema says the same:
# a test keeps the two equal). A round of a cold point restarts or re-reads its table, so a
# hundred is already hours on the slower engines; a sequential budget stops earlier.
MAX_REPETITIONS = 100
DEFAULT_ACCESS = "optimizer"
# Bounds on what one sweep file may ask for, so bad input is refused quickly and cheaply (the
# file's size and nesting: tunelab.host.yamlfile).
DEFAULT_MAX_POINTS = 10_000
MAX_POINTS_ENV = "TUNELAB_MAX_POINTS"
# Data-set sizes: "quick" (dataset.rows) or the assignment's (dataset.assignment_rows where a
# sweep gives it). The workflow sets the variable from its config, so every job agrees.
SIZES = ("quick", "assignment")
SIZE_ENV = "TUNELAB_SIZE"
# Where the data sets go: the workflow config's data_dir, relative to the run's directory.
DATA_DIR = Path("data")
# What a knob the host refuses needs (host.blockdev.unavailable_reason says what is missing).
HOST_ALLOWED = (
    "the lab as root on a host with loop devices, losetup, mkfs.ext4 and mount; or no os_read_ahead"
)


@dataclass(frozen=True)
class Point:
    sweep: str
    sweep_file: str
    point_id: str
    engine: str
    knobs: dict[str, Any]
    workload: workloads.Workload
    cache: str
    repetitions: int  # the most rounds the point may get: the budget
    dataset: Dataset
    trace: bool = False
    swept: tuple[str, ...] = field(default=())
    access: str = "optimizer"  # or "forced": the plan must be what the index knob built
    # The fewest rounds before measuring may stop (tunelab.analysis.sequential); 0: as repetitions.
    repetitions_min: int = 0

    def __post_init__(self) -> None:
        if not self.repetitions_min:
            object.__setattr__(self, "repetitions_min", self.repetitions)

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
            "repetitions_min": self.repetitions_min,
            "dataset": {"rows": self.dataset.rows, "seed": self.dataset.seed},
        }


def max_points() -> int:
    """The most points one sweep may expand to: $TUNELAB_MAX_POINTS, else 10,000."""
    raw = os.environ.get(MAX_POINTS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_POINTS
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{MAX_POINTS_ENV}={_show(raw)} is not a number of points")
    return int(raw)


def run_size(size: str | None = None) -> str:
    """``size``, else $TUNELAB_SIZE, else "quick"; ValueError for anything but SIZES."""
    value = size if size is not None else (os.environ.get(SIZE_ENV, "").strip() or SIZES[0])
    if value not in SIZES:
        where = "size" if size is not None else SIZE_ENV
        raise ValueError(f"{where}={_show(value)} is not a data-set size")
    return value


def _limit_text(limit: int) -> str:
    return f"at most {limit} points; {MAX_POINTS_ENV} sets the limit"


def _long_list(doc: Any, limit: int, where: str = "") -> tuple[str, int] | None:
    """The first list anywhere in ``doc`` longer than ``limit``: every list of a sweep either
    multiplies the grid or adds points to it (or is engines, of three), so such a list means
    too many points, and it is refused before the schema walks it."""
    if isinstance(doc, list):
        if len(doc) > limit:
            return where, len(doc)
        items = ((f"{where}[{i}]", v) for i, v in enumerate(doc))
    elif isinstance(doc, dict):
        items = ((f"{where}.{k}" if where else str(k), v) for k, v in doc.items())
    else:
        return None
    for path, value in items:
        if isinstance(value, (list, dict)) and (found := _long_list(value, limit, path)):
            return found
    return None


def _grid_size(
    lists: dict[str, list], where: dict[str, str], entries: list[dict], caches: list[str]
) -> tuple[int, str]:
    """Points the sweep expands to, from the lengths of its lists (nothing is expanded), and
    the path of its longest list."""
    lengths = {where[k]: len(v) for k, v in lists.items()}
    per_workload = []
    for i, entry in enumerate(entries):
        sizes = {f"workloads[{i}].{k}": len(v) for k, v in entry.items() if isinstance(v, list)}
        lengths.update(sizes)
        per_workload.append(math.prod(sizes.values()))
    total = math.prod(lengths[where[k]] for k in lists) * sum(per_workload) * len(caches)
    longest = max(lengths, key=lengths.__getitem__) if lengths else "knobs"
    return total, longest


def repetitions_asked(doc: dict) -> Any:
    """What a sweep asks of ``repetitions`` (the same budget on every engine), else the
    default."""
    return doc.get("repetitions", DEFAULT_REPETITIONS)


def repetitions(doc: dict, engine: str | None = None) -> tuple[int, int]:
    """(min, max) rounds of a valid sweep on ``engine``: an integer N is (N, N), a mapping
    {min, max} its two values, no key the default."""
    reps = repetitions_asked(doc)
    if isinstance(reps, dict):
        return int(reps["min"]), int(reps["max"])
    return int(reps), int(reps)


def _repetitions_errors(file: str, reps: Any) -> list[SpecError]:
    """What the schema cannot say about ``repetitions``: min above max."""
    if isinstance(reps, dict) and reps["min"] > reps["max"]:
        msg = f"min {reps['min']} is above max {reps['max']}"
        return [SpecError(file, "repetitions", msg, "min <= max")]
    return []


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
    path: Path,
    engine: str | None = None,
    calibration: Any = None,
    defer_calibrated: bool = False,
    point_limit: int | None = None,
    *,
    size: str | None = None,
    warnings: list[SpecWarning] | None = None,
    data_dir: Path = DATA_DIR,
) -> tuple[list[Point], list[SpecError]]:
    """Validate one sweep file and expand it into points for ``engine`` (default: the first
    engine the sweep lists). Returns (points, errors); points is empty when errors exist.
    With ``defer_calibrated`` and no calibration, 'calibrated' knob values stay as they are
    (the workflow measures the calibration before such points run). A sweep of more than
    ``point_limit`` points (default: max_points()) is refused before it is expanded.
    ``size`` (default: run_size()) "assignment" takes ``dataset.assignment_rows`` where the
    sweep gives it. Warnings (allowed, against the engine's advice) go to ``warnings``. The
    data set must fit the free space of ``data_dir`` (unless it is there already)."""
    file = str(path)
    limit = point_limit
    if limit is None:
        try:
            limit = max_points()
        except ValueError as exc:
            return [], [SpecError(file, "", str(exc), "an integer >= 1")]
    try:
        size = run_size(size)
    except ValueError as exc:
        return [], [SpecError(file, "", str(exc), ", ".join(SIZES))]
    if "{" in file or "}" in file:  # Snakemake would read them as wildcards in the file's path
        msg = "a sweep file's path may not hold '{' or '}' (the workflow reads them as wildcards)"
        return [], [SpecError(file, "", msg)]
    doc, errors = loading.load_yaml(path)
    if errors:
        return [], errors
    if not isinstance(doc, dict):
        return [], [SpecError(file, "", "a sweep file must be a mapping of keys")]
    if found := _long_list(doc, limit):
        where, n = found
        msg = f"{n} values: the sweep would expand to more than {limit} points"
        return [], [SpecError(file, where, msg, _limit_text(limit))]
    errors = loading.schema_errors(file, doc)
    broken = {e.path.split(".")[0].split("[")[0] for e in errors}
    # Keep checking what the schema errors leave intact, so one call reports every error.
    if broken & {"knobs", "fixed", "overrides", "engines", "dataset", "workloads"}:
        return [], errors
    allowed = checks.engines_of(doc)
    engine = engine or allowed[0]
    if engine not in allowed:
        return [], [
            SpecError(file, "engines", f"this sweep does not run on {engine}", ", ".join(allowed))
        ]
    info = engines.info(engine)
    lists, fixed = checks.knob_lists(doc, engine)
    rows = "rows"
    if size == "assignment" and "assignment_rows" in doc["dataset"]:
        rows = "assignment_rows"
    ds = Dataset(rows=doc["dataset"][rows], seed=doc["dataset"].get("seed", DEFAULT_SEED))
    if problem := checks.disk_refuses(ds, Path(data_dir)):
        errors.append(SpecError(file, f"dataset.{rows}", problem, "fewer rows, or more free space"))
    where = {k: f"knobs.{k}" for k in lists} | {k: f"fixed.{k}" for k in fixed}
    for src in ("knobs", "fixed"):
        for k in ((doc.get("overrides") or {}).get(engine) or {}).get(src) or {}:
            where[k] = f"overrides.{engine}.{src}.{k}"
    # A refused cache value is reported by the schema; the rest is checked as if cold.
    cache_asked = doc.get("cache", "cold") if "cache" not in broken else "cold"
    caches = ["cold", "warm"] if cache_asked == "both" else [cache_asked]
    total, longest = _grid_size(lists, where, doc["workloads"], caches)
    if total > limit:
        msg = f"the sweep expands to {total} points, more than the limit of {limit}"
        return [], [*errors, SpecError(file, longest, msg, _limit_text(limit))]

    # Workloads first: their expansion decides which parameters vary.
    wls: list[workloads.Workload] = []
    for i, entry in enumerate(doc["workloads"]):
        for w in _expand_workload(entry):
            wrong = workloads.check_params(w.type, w.params, ds.rows)
            for fld, msg in wrong:
                errors.append(SpecError(file, f"workloads[{i}].{fld}", msg))
            if not wrong and "cold" in caches and (refused := workloads.cold_refusal(w)):
                fld, msg, allowed_text = refused
                errors.append(SpecError(file, f"workloads[{i}].{fld}", msg, allowed_text))
            wls.append(w)
    varied = {
        f"wl_{k}"
        for t in {w.type for w in wls}
        for k in workloads.DEFAULTS[t]
        if len({json.dumps(w.params[k]) for w in wls if w.type == t}) > 1
    }

    access = doc.get("access", DEFAULT_ACCESS)
    if access not in info.access_modes:
        errors.append(
            SpecError(
                file,
                "access",
                f"{engine} cannot honour access: {access}",
                ", ".join(info.access_modes),
            )
        )
    reps_errors = []
    if "repetitions" not in broken:
        reps_errors = _repetitions_errors(file, doc.get("repetitions", DEFAULT_REPETITIONS))
    errors.extend(reps_errors)
    fine = "repetitions" not in broken and not reps_errors
    reps_min, reps = repetitions(doc, engine) if fine else (1, 1)
    points: list[Point] = []
    seen: set[str] = set()
    warned: list[SpecWarning] = []
    names = list(lists)
    rules = engines.engine_class(engine).knob_rules
    for combo in itertools.product(*(lists[k] for k in names)):
        asked = {**fixed, **dict(zip(names, combo))}
        knobs, errs = checks.normalise(info, asked, calibration, file, where, defer_calibrated)
        for e in errs:
            if str(e) not in seen:
                seen.add(str(e))
                errors.append(e)
        if errs:
            continue
        knobs = {**info.defaults(), **knobs}
        for fld, msg, allowed_text in [
            *checks.memory_refusals(knobs),
            *rules.check_point(knobs),
        ]:
            e = SpecError(file, where.get(fld, f"knobs.{fld}"), msg, allowed_text)
            if str(e) not in seen:
                seen.add(str(e))
                errors.append(e)
        for fld, msg in rules.host_refusals(knobs):
            e = SpecError(file, where.get(fld, f"knobs.{fld}"), msg, HOST_ALLOWED)
            if str(e) not in seen:
                seen.add(str(e))
                errors.append(e)
        for fld, msg in rules.warn_point(knobs):
            w = SpecWarning(file, where.get(fld, f"knobs.{fld}"), msg)
            if w not in warned:
                warned.append(w)
        swept = dict(zip(names, combo))
        for w in wls:
            for c in caches:
                pid = point_id(swept, w, c, varied)
                points.append(
                    Point(
                        str(doc.get("name")),
                        file,
                        pid,
                        engine,
                        knobs,
                        w,
                        c,
                        reps,
                        ds,
                        bool(doc.get("trace", False)),
                        tuple(names),
                        access,
                        reps_min,
                    )
                )
    if warnings is not None:
        warnings.extend(warned)
    if not errors:
        errors.extend(_version_refusals(file, engine, points, where.get(VERSION_KNOB, "")))
    if not errors and "expect" not in broken:
        found, claim_errors = claimspec.sweep_claims(doc, file, engine)
        claim_errors += claimspec.validate(found, points, engine)
        errors.extend(
            SpecError(f or file, fld, msg, allowed_text)
            for f, fld, msg, allowed_text in claim_errors
        )
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


def _version_refusals(file: str, engine: str, points: list[Point], where: str) -> list[SpecError]:
    """An engine version the sweep asks that this host cannot run (the apt mirror lacks the
    Debian release it is built from, and no image of it is here): one line, before anything
    starts; allowed, the versions it can run."""
    asked = dict.fromkeys(str(p.knobs[VERSION_KNOB]) for p in points if VERSION_KNOB in p.knobs)
    if not asked:
        return []
    rules = engines.engine_class(engine).knob_rules
    refused = {v: why for v in asked if (why := rules.version_refusal(v))}
    if not refused:
        return []
    knob = engines.info(engine).knobs[VERSION_KNOB]
    here = [
        v
        for v in knob.values or ()
        if v not in refused and (v in asked or not rules.version_refusal(v))
    ]
    return [
        SpecError(
            file, where, f"{engine} {v} cannot run here: {why}", ", ".join(here) or "none here"
        )
        for v, why in refused.items()
    ]


@dataclass
class Validated:
    points: dict[str, list[Point]]  # sweep name -> points
    files: dict[str, str]  # sweep name -> sweep file
    skipped: dict[str, str]  # sweep file -> why it does not run on the engine
    errors: list[SpecError]
    warnings: list[SpecWarning] = field(default_factory=list)


def validate_files(
    paths: list[Path],
    engine: str | None = None,
    calibration: Any = None,
    *,
    skip_other_engines: bool = False,
    defer_calibrated: bool = False,
    size: str | None = None,
    data_dir: Path = DATA_DIR,
) -> Validated:
    """Validate every file (all errors, not just the first); sweep names must be unique.
    With ``skip_other_engines``, a sweep that does not list ``engine`` is skipped, not wrong.
    ``size`` and ``data_dir``: as expand() takes them."""
    out = Validated({}, {}, {}, [])
    for p in map(Path, paths):
        if skip_other_engines and engine:
            doc, errs = loading.load_yaml(p)
            if not errs and isinstance(doc, dict) and engine not in checks.engines_of(doc):
                out.skipped[str(p)] = f"runs on {', '.join(checks.engines_of(doc))}"
                continue
            if not errs and isinstance(doc, dict) and (why := checks.cannot_vary(doc, engine)):
                out.skipped[str(p)] = why
                continue
            if not errs and isinstance(doc, dict) and (why := checks.host_refuses(doc, engine)):
                out.skipped[str(p)] = why  # the pack runs on; `tunelab validate` refuses it
                continue
        pts, errs = expand(
            p,
            engine,
            calibration,
            defer_calibrated,
            size=size,
            warnings=out.warnings,
            data_dir=data_dir,
        )
        out.errors.extend(errs)
        if pts:
            name = pts[0].sweep
            if name in out.files:
                msg = f"'{name}' is also the name of {out.files[name]}"
                out.errors.append(SpecError(str(p), "name", msg))
            out.files[name] = str(p)
            out.points[name] = pts
    out.errors.extend(_unknown_sweeps(paths))
    # A findings file's error is met once per sweep it judges: one line is enough.
    out.errors = list({str(e): e for e in out.errors}.values())
    return out


def _unknown_sweeps(paths: list[Path]) -> list[SpecError]:
    """A finding whose sweep is none of the sweep files beside the validated ones."""
    errors: list[SpecError] = []
    for book_path in {findings.path_for(p) for p in map(Path, paths)} - {None}:
        try:
            book = findings.load(book_path)
        except findings.FindingsError:
            continue  # reported with the sweep files it judges
        names = set()
        for f in sorted(Path(book_path).parent.joinpath("sweeps").glob("*.yaml")):
            doc, errs = loading.load_yaml(f)
            if not errs and isinstance(doc, dict):
                names.add(str(doc.get("name")))
        for i, entry in enumerate(book.entries):
            if entry["sweep"] not in names:
                errors.append(
                    SpecError(
                        str(book_path),
                        f"findings[{i}].sweep",
                        f"no sweep named {entry['sweep']!r}",
                        ", ".join(sorted(names)),
                    )
                )
    return errors
