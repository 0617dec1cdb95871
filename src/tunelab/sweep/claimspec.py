"""The claim schema: what a sweep's ``expect:`` may say, parsed into claims and checked
against the sweep's own points (keys, values, metrics) when the sweep is validated.

No pandas here: ``sweep.spec`` validates with it, and ``analysis.claims`` evaluates the claims
on the stored rows (its docstring lists the kinds and verdicts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tunelab.host.units import parse_size
from tunelab.sweep import findings

# flat_then_falls: no gain while the pool is smaller than the data, a gain once it holds them
FLAT_THEN_FALLS = "flat_then_falls"
KINDS = ("lower", "higher", "similar", "crossover", "falls", "rises", FLAT_THEN_FALLS)
PAIR_KINDS = ("lower", "higher", "similar")
ALONG_KINDS = ("crossover", "falls", "rises", FLAT_THEN_FALLS)
# the one key along which "the pool holds the data" means something (rows: the pool as
# applied, in pages, times the page size, against data_bytes)
POOL_KEY = "buffer_pool"
CLAIM = "claim"  # a sweep's own expect: (not a finding of the findings file)
ALPHA = 0.05
MIN_EFFECT = 0.05

# Row columns a claim may name as its metric; counters also by their short name.
METRICS = (
    "elapsed_s",
    "throughput_rows_s",
    "engine_elapsed_s",
    "client_share",
    "q_first_s",
    "q_rest_median_s",
    "q_p50_s",
    "q_p95_s",
    "q_p99_s",
    "q_max_s",
    "data_mb_s",
    "read_mb_s",
    "physical_reads_per_s",
    "hit_ratio_app",
    "hit_ratio_sys",
    "written_bytes",
    "uses_index",
)
COUNTERS = (
    "logical_reads",
    "physical_reads",
    "prefetch_reads",
    "read_wait_ms",
    "os_read_bytes",
    "os_write_bytes",
    "lock_waits",
    "lock_wait_time_ms",
    "lock_escalations",
)


@dataclass(frozen=True)
class Claim:
    index: int
    kind: str
    says: str
    metric: str = "elapsed_s"
    a: dict[str, Any] = field(default_factory=dict)
    b: dict[str, Any] = field(default_factory=dict)
    where: dict[str, Any] = field(default_factory=dict)
    # lower/higher: the ratio a/b where `where` holds against the ratio a/b where `than`
    # replaces some of its values (an interaction)
    than: dict[str, Any] = field(default_factory=dict)
    along: str | None = None
    within: tuple[float, float] | None = None
    alpha: float = ALPHA
    min_effect: float = MIN_EFFECT
    # Where it comes from: a finding of the findings file, an explanation beneath one, or
    # the sweep's own expect: (CLAIM).
    role: str = CLAIM
    finding: str | None = None
    source: str | None = None
    reported: str | None = None
    source_ratio: float | None = None
    findings_digest: str | None = None
    # how the verdicts of several contexts make one (``decisions.combine``)
    contexts: str = "all"


def _claim_list(expect: Any) -> tuple[list[dict], float, float]:
    """``expect`` is a list of claims, or a mapping with sweep-wide ``alpha``/``min_effect``
    and ``claims``."""
    if isinstance(expect, dict):
        return (
            list(expect.get("claims") or []),
            float(expect.get("alpha", ALPHA)),
            float(expect.get("min_effect", MIN_EFFECT)),
        )
    return list(expect or []), ALPHA, MIN_EFFECT


def parse(expect: Any) -> list[Claim]:
    """Claims from a sweep document's ``expect`` (already checked by the schema) or from
    ``sweep_claims``."""
    raw, alpha, min_effect = _claim_list(expect)
    claims = []
    for i, c in enumerate(raw):
        within = c.get("within")
        ratio = c.get("source_ratio")
        claims.append(
            Claim(
                index=i,
                kind=c["kind"],
                says=c.get("says") or describe(c),
                metric=c.get("metric", "elapsed_s"),
                a=dict(c.get("a") or {}),
                b=dict(c.get("b") or {}),
                where=dict(c.get("where") or {}),
                than=dict(c.get("than") or {}),
                along=c.get("along"),
                within=(float(within[0]), float(within[1])) if within else None,
                alpha=float(c.get("alpha", alpha)),
                min_effect=float(c.get("min_effect", min_effect)),
                role=c.get("role", CLAIM),
                finding=c.get("finding"),
                source=c.get("source"),
                reported=c.get("reported"),
                source_ratio=None if ratio is None else float(ratio),
                findings_digest=c.get("findings_digest"),
                contexts=str(c.get("contexts", "all")),
            )
        )
    return claims


ClaimError = tuple[str, str, str, str]  # (file, field, message, allowed)


def sweep_claims(
    doc: dict, sweep_file: str | Path, engine: str | None
) -> tuple[list[dict], list[ClaimError]]:
    """The claims a sweep is judged by on ``engine``, as dicts ``parse`` reads: its findings
    (``tunelab.sweep.findings``, from the findings file beside the sweeps' folder) each followed by
    its explanations for this engine, then the sweep's own ``expect:``. Errors: a findings
    file that cannot be read, or a finding with no translation for this engine. ``engine``
    None: for what does not depend on the engine (``findings.resolve``)."""
    out: list[dict] = []
    errors: list[ClaimError] = []
    path = findings.path_for(sweep_file)
    if path is not None:
        try:
            book = findings.load(path)
        except findings.FindingsError as exc:
            return [], [(exc.file, exc.field, exc.message, exc.allowed)]
        for t in findings.claims_for(book, str(doc.get("name")), engine):
            if t.missing is not None:
                fld, named = t.missing
                errors.append(
                    (
                        str(path),
                        fld,
                        f"gives no value for {engine}, which runs the "
                        "sweep: say what the finding is in its words",
                        named,
                    )
                )
            else:
                out.append(t.claim)
    raw, alpha, min_effect = _claim_list(doc.get("expect"))
    prefix = "expect.claims" if isinstance(doc.get("expect"), dict) else "expect"
    for i, c in enumerate(raw):
        out.append(
            {
                "alpha": alpha,
                "min_effect": min_effect,
                **c,
                "_field": f"{prefix}[{i}]",
                "_file": str(sweep_file),
            }
        )
    return out, errors


def kv(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


def describe(c: dict) -> str:
    """A claim in words, when the sweep gives none."""
    metric = c.get("metric", "elapsed_s")
    where = f" ({kv(c['where'])})" if c.get("where") else ""
    kind = c["kind"]
    if kind in PAIR_KINDS:
        rel = {"lower": "<", "higher": ">", "similar": "≈"}[kind]
        if c.get("than"):
            ratio = f"{kv(c.get('a', {}))} / {kv(c.get('b', {}))}"
            than = kv({**c.get("where", {}), **c["than"]})
            return f"{metric}: {ratio}{where} {rel} {ratio} ({than})"
        return f"{metric}: {kv(c.get('a', {}))} {rel} {kv(c.get('b', {}))}{where}"
    if kind == "crossover":
        lo, hi = c.get("within", ("?", "?"))
        return (
            f"{metric}: {kv(c.get('b', {}))} overtakes {kv(c.get('a', {}))} as "
            f"{c.get('along')} grows, between {lo:g} and {hi:g}{where}"
        )
    if kind == FLAT_THEN_FALLS:
        return (
            f"{metric} stays level as {c.get('along')} grows until it holds the data, then "
            f"falls{where}"
        )
    verb = "falls" if kind == "falls" else "rises"
    return f"{metric} {verb} as {c.get('along')} grows{where}"


def _values_of(points: Sequence[Any]) -> dict[str, list[Any]]:
    """Every key a claim may name, with the values the sweep's points take."""
    seen: dict[str, list[Any]] = {}

    def add(key: str, value: Any) -> None:
        vals = seen.setdefault(key, [])
        if not any(same(v, value) for v in vals):
            vals.append(value)

    for p in points:
        for k, v in p.knobs.items():
            add(k, v)
        for k, v in p.workload.params.items():
            add(k, v)
        add("cache", p.cache)
        add("workload", p.workload.type)
    return seen


def validate(claims: list[dict], points: Sequence[Any], engine: str) -> list[ClaimError]:
    """(file, field, message, allowed) for every claim (``sweep_claims``) that names a key,
    value or metric the sweep does not have on ``engine`` (``points``: its points there)."""
    values = _values_of(points)
    swept = {k for k, v in values.items() if len(v) > 1}
    allowed_keys = ", ".join(sorted(values))
    errors: list[ClaimError] = []
    for c in claims:
        file, at = c.get("_file", ""), c.get("_field", "expect")

        def err(fld: str, msg: str, allowed: str, file: str = file) -> None:
            errors.append((file, fld, msg, allowed))

        metric = c.get("metric", "elapsed_s")
        if metric not in METRICS and metric not in COUNTERS:
            err(f"{at}.metric", f"unknown metric {metric!r}", ", ".join((*METRICS, *COUNTERS)))
        for part in ("a", "b", "where", "than"):
            for key, value in (c.get(part) or {}).items():
                if key not in values:
                    err(
                        f"{at}.{part}.{key}",
                        f"not a knob or parameter of the sweep on {engine}",
                        allowed_keys,
                    )
                elif not any(same(v, value) for v in values[key]):
                    shown = ", ".join(map(str, values[key]))
                    err(
                        f"{at}.{part}.{key}", f"value {value!r} not in the sweep on {engine}", shown
                    )
        kind = c.get("kind")
        if c.get("than") and kind not in ("lower", "higher"):
            err(f"{at}.than", f"a '{kind}' claim has no 'than'", "kind: lower or higher")
        if c.get("than") and not set(c["than"]) <= set(c.get("where") or {}):
            err(
                f"{at}.than",
                "names a key 'where' does not: it replaces where's values",
                ", ".join(sorted(c.get("where") or {})) or "none",
            )
        if kind in PAIR_KINDS + ("crossover",) and not (c.get("a") and c.get("b")):
            err(at, f"a '{kind}' claim compares a with b: give both", "a: {...}, b: {...}")
        if kind in ALONG_KINDS:
            along = c.get("along")
            if along not in swept:
                err(
                    f"{at}.along",
                    f"{along!r} is not swept on {engine} (two or more values)",
                    ", ".join(sorted(swept)) or "none",
                )
        if kind == FLAT_THEN_FALLS and c.get("along") != POOL_KEY:
            err(
                f"{at}.along",
                f"a '{kind}' claim is along the pool, whose size is compared with the data's",
                POOL_KEY,
            )
        if kind == "crossover" and c.get("within"):
            lo, hi = c["within"]
            if not lo < hi:
                err(f"{at}.within", "low must be below high", "[low, high]")
    return errors


def same(cell: Any, value: Any) -> bool:
    """A value a claim names matches a point's (or a row's cell): as numbers where both read
    as one (sizes in bytes), else as text, case aside."""
    if isinstance(cell, float) and math.isnan(cell):
        return value is None
    for conv in (as_number,):
        x, y = conv(cell), conv(value)
        if x is not None and y is not None:
            return math.isclose(x, y, rel_tol=1e-9)
    return str(cell).lower() == str(value).lower()


def as_number(value: Any) -> float | None:
    """A number, a size ('64MiB') in bytes or numeric text as a float; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    size = parse_size(value)
    if size is not None:
        return float(size)
    try:
        return float(str(value))
    except ValueError:
        return None
