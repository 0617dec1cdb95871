"""The findings the sweeps reproduce (``workflows/findings.yaml``): each stated once, from its
source and with the source's figures, and judged on every engine that can run its sweep by
one set of rules (alpha, margin, the equivalence bounds of ``similar``, the crossover's
window) fixed in the file before any run.

A finding becomes one claim of its sweep (``claims_for``): the same claim on every engine,
its margin and window taken from the rules; an engine whose words differ (a synchronisation
mode, the knob that is prefetch there) gets the finding's translation for it, never a claim
of its own. Its ``explains:`` statements are claims too, about an engine's mechanism (or
every engine's), judged on the same rows and shown beneath the finding, never in its place.

The file's digest goes into every claim, so every row and verdict file can name the version
of the findings it was judged under. The file belongs to the checkout: a sweep file in
``<dir>/sweeps/`` is judged by ``<dir>/findings.yaml`` (``path_for``); a sweep elsewhere has
only its own ``expect:``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from tunelab import engines
from tunelab.host import yamlfile

FILE_NAME = "findings.yaml"
# Claim keys that say what a finding is rather than what it compares.
ABOUT = (
    "id",
    "sweep",
    "source",
    "question",
    "reported",
    "source_ratio",
    "reported_value",
    "explains",
    "at",
    "engine",
)
# The units a figure's axis shows, per metric: a ``reported_value`` gives its a and b in one.
_TIMES = ("s", "ms")
AXIS_UNITS = {
    **{
        m: _TIMES
        for m in (
            "elapsed_s",
            "engine_elapsed_s",
            "q_first_s",
            "q_rest_median_s",
            "q_p50_s",
            "q_p95_s",
            "q_p99_s",
            "q_max_s",
        )
    },
    "throughput_rows_s": ("rows/s",),
}
RATIO_AGREES = 0.05  # a reported_value's a/b and the finding's source_ratio: within 5 %
FINDING, EXPLAINS = "finding", "explains"


class FindingsError(ValueError):
    """A findings file that cannot be used: its path, the field and what is allowed."""

    def __init__(self, file: str, field: str, message: str, allowed: str = ""):
        self.file, self.field, self.message, self.allowed = file, field, message, allowed
        where = f"{file}: {field}: " if field else f"{file}: "
        super().__init__(where + message + (f" (allowed: {allowed})" if allowed else ""))


@dataclass(frozen=True)
class Rules:
    alpha: float
    margin: float
    similar_within: float
    crossover_factor: float
    # how a finding judged in several contexts gets one word (``decisions.combine``)
    contexts: str = "all"


@dataclass(frozen=True)
class Findings:
    path: str
    rules: Rules
    entries: tuple[dict[str, Any], ...]
    digest: str  # the first 16 hex digits of the file's sha256
    # the questions of the sources, in the order the index answers them (``questions:``)
    questions: tuple[dict[str, Any], ...] = ()

    def of_question(self, question: str) -> list[dict[str, Any]]:
        """The findings that answer ``question`` (their ``question:``), in the file's order."""
        return [f for f in self.entries if f.get("question") == question]

    def of_sweep(self, sweep: str) -> list[tuple[int, dict[str, Any]]]:
        """(index in the file, finding) of every finding of ``sweep``, in the file's order."""
        return [(i, f) for i, f in enumerate(self.entries) if f["sweep"] == sweep]


def path_for(sweep_file: str | Path) -> Path | None:
    """The findings file that judges a sweep file: ``findings.yaml`` beside its folder."""
    candidate = Path(sweep_file).resolve().parent.parent / FILE_NAME
    return candidate if candidate.is_file() else None


def digest_for(sweep_file: str | Path) -> str:
    """The digest of the findings file that judges a sweep file ("" for none, or one that
    cannot be read: validation reports that)."""
    path = path_for(sweep_file)
    if path is None:
        return ""
    try:
        return load(path).digest
    except FindingsError:
        return ""


@cache
def _validator() -> jsonschema.protocols.Validator:
    text = resources.files("tunelab").joinpath("schemas/findings.schema.json").read_text()
    return jsonschema.Draft202012Validator(json.loads(text))


def _field(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def load(path: str | Path) -> Findings:
    """The findings file read and checked; FindingsError names the first problem."""
    path = Path(path)
    stamp = path.stat() if path.is_file() else None
    return _load(str(path), stamp.st_mtime_ns if stamp else 0, stamp.st_size if stamp else -1)


@cache
def _load(file: str, _mtime: int, _size: int) -> Findings:
    try:
        text = yamlfile.read_text(file)
        doc = yamlfile.parse(text, file)
    except yamlfile.YamlFileError as exc:
        raise FindingsError(file, exc.field, exc.message, exc.allowed) from None
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        e = errors[0]
        if e.validator == "unevaluatedProperties":
            unknown = set(e.instance) - _known_keys(e.absolute_path)
            extra = ", ".join(sorted(map(str, unknown)))  # a key may be 1 or true
            at = _field([*e.absolute_path])
            raise FindingsError(
                file, at, f"unknown key(s): {extra}", _allowed_keys(e.absolute_path)
            )
        raise FindingsError(file, _field(e.absolute_path), " ".join(e.message.split())[:200])
    names = engines.names()
    questions = [str(q["id"]) for q in doc.get("questions") or []]
    for i, q in enumerate(questions):
        if q in questions[:i]:
            raise FindingsError(file, f"questions[{i}].id", f"{q!r} is used twice")
    seen: set[str] = set()
    for i, f in enumerate(doc["findings"]):
        if f["id"] in seen:
            raise FindingsError(file, f"findings[{i}].id", f"{f['id']!r} is used twice")
        seen.add(f["id"])
        if "reported_value" in f:
            _check_reported_value(file, f"findings[{i}]", f)
        if "question" in f and f["question"] not in questions:
            allowed = ", ".join(questions) or "none: the file lists no questions"
            wrong = f"no question {f['question']!r} in questions:"
            raise FindingsError(file, f"findings[{i}].question", wrong, allowed)
        for j, x in enumerate(f.get("explains") or []):
            if "engine" in x and x["engine"] not in names:
                at = f"findings[{i}].explains[{j}].engine"
                raise FindingsError(file, at, f"unknown engine {x['engine']!r}", ", ".join(names))
    r = doc["rules"]
    rules = Rules(
        float(r["alpha"]),
        float(r["margin"]),
        float(r["similar_within"]),
        float(r["crossover_factor"]),
        str(r["contexts"]),
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    asked = tuple(doc.get("questions") or ())
    return Findings(file, rules, tuple(doc["findings"]), digest, asked)


def _check_reported_value(file: str, at: str, f: dict[str, Any]) -> None:
    """A source's a and b in a unit the axis of the finding's metric shows, of a finding
    that compares two points (or a trend's last with its first), agreeing with its ratio."""
    value = f["reported_value"]
    metric = f.get("metric", "elapsed_s")
    units = AXIS_UNITS.get(metric)
    if units is None:
        shown = ", ".join(sorted(AXIS_UNITS))
        raise FindingsError(
            file,
            f"{at}.reported_value",
            f"no axis draws {metric!r} with a source's figure",
            f"metrics {shown}",
        )
    if value["unit"] not in units:
        raise FindingsError(
            file,
            f"{at}.reported_value.unit",
            f"{value['unit']!r} is no unit the axis of {metric} shows",
            ", ".join(units),
        )
    if f["kind"] == "crossover":
        raise FindingsError(
            file,
            f"{at}.reported_value",
            "a crossover's figure is its 'at'",
            "kind: lower, higher, similar, falls or rises",
        )
    ratio = f.get("source_ratio")
    said = value["a"] / value["b"]
    if ratio is not None and abs(said / float(ratio) - 1) > RATIO_AGREES:
        raise FindingsError(
            file,
            f"{at}.reported_value",
            f"a/b = {said:.3g} but source_ratio is {ratio}",
            "the same ratio within 5 %",
        )


_CHECK_KEYS = {"kind", "says", "metric", "a", "b", "where", "than", "along", "at"}
_FINDING_KEYS = _CHECK_KEYS | {
    "id",
    "sweep",
    "source",
    "question",
    "reported",
    "source_ratio",
    "reported_value",
    "explains",
}


def _known_keys(path: Any) -> set[str]:
    return _CHECK_KEYS | {"engine"} if "explains" in list(path) else _FINDING_KEYS


def _allowed_keys(path: Any) -> str:
    return ", ".join(sorted(_known_keys(path)))


def _is_per_engine(selector: dict[str, Any]) -> bool:
    names = set(engines.names())
    return (
        bool(selector)
        and set(selector) <= names
        and all(isinstance(v, dict) for v in selector.values())
    )


def resolve(
    selector: dict[str, Any] | None, engine: str | None
) -> tuple[dict[str, Any], str | None]:
    """A selector in ``engine``'s words: a whole selector given per engine, or values given
    per engine, taken for it. (selector, None), or ({}, the engines it names) when it names
    no translation for ``engine``. ``engine`` None: the first translation (for what does not
    depend on the engine: names, the dimension a claim asks along)."""
    selector = dict(selector or {})
    if engine is None:
        engine = next((e for e in selector if _is_per_engine(selector)), None) or next(
            (next(iter(v)) for v in selector.values() if isinstance(v, dict) and v), ""
        )
    if _is_per_engine(selector):
        if engine not in selector:
            return {}, ", ".join(sorted(selector))
        return dict(selector[engine]), None
    out = {}
    for key, value in selector.items():
        if isinstance(value, dict):
            if engine not in value:
                return {}, ", ".join(sorted(value))
            value = value[engine]
        out[key] = value
    return out, None


@dataclass(frozen=True)
class Translation:
    """A claim of a finding in one engine's words, or why it has none."""

    claim: dict[str, Any]
    missing: tuple[str, str] | None = None  # (field, the engines it names) when untranslated


def _claim(check: dict[str, Any], rules: Rules, engine: str | None, field: str) -> Translation:
    out: dict[str, Any] = {k: v for k, v in check.items() if k not in ABOUT}
    for part in ("a", "b", "where", "than"):
        if part in check:
            value, missing = resolve(check[part], engine)
            if missing is not None:
                return Translation({}, (f"{field}.{part}", missing))
            out[part] = value
    out["alpha"] = rules.alpha
    out["contexts"] = rules.contexts
    out["min_effect"] = rules.similar_within if check["kind"] == "similar" else rules.margin
    if check["kind"] == "crossover":
        at = float(check["at"])
        high = at * rules.crossover_factor
        if check.get("along") == "selectivity":  # no query selects more than every row
            high = min(high, 1.0)
        out["within"] = [at / rules.crossover_factor, high]
    return Translation(out)


def claims_for(findings: Findings, sweep: str, engine: str | None) -> list[Translation]:
    """Every finding of ``sweep`` as a claim on ``engine``, each followed by its explanations
    that apply there (those for ``engine`` and those for every engine; every one for
    ``engine`` None, each with the ``engine`` it is about). Each claim carries
    where it comes from: ``_field`` (its place in the file), ``_file``, the finding's id,
    source, reported figures and the file's digest."""
    out: list[Translation] = []
    for i, f in findings.of_sweep(sweep):
        field = f"findings[{i}]"
        about = {
            "_file": findings.path,
            "finding": f["id"],
            "source": f["source"],
            "reported": f["reported"],
            "findings_digest": findings.digest,
        }
        if "source_ratio" in f:
            about["source_ratio"] = float(f["source_ratio"])
        if "reported_value" in f:
            about["reported_value"] = dict(f["reported_value"])
        if "at" in f:  # a crossover's figure, drawn on the axis
            about["source_at"] = float(f["at"])
        t = _claim(f, findings.rules, engine, field)
        out.append(Translation({**t.claim, **about, "_field": field, "role": FINDING}, t.missing))
        for j, x in enumerate(f.get("explains") or []):
            if engine is not None and x.get("engine") not in (None, engine):
                continue
            xf = f"{field}.explains[{j}]"
            t = _claim(x, findings.rules, engine, xf)
            about_x = {**about, "explains_engine": x["engine"]} if "engine" in x else about
            out.append(
                Translation({**t.claim, **about_x, "_field": xf, "role": EXPLAINS}, t.missing)
            )
    return out
