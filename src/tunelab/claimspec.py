"""The claim schema: what a sweep's ``expect:`` may say, parsed into claims and checked
against the sweep's own points (keys, values, metrics) when the sweep is validated.

No pandas here: ``tunelab.spec`` validates with it, and ``analysis.claims`` evaluates the claims
on the stored rows (its docstring lists the kinds and verdicts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tunelab.units import parse_size

KINDS = ("lower", "higher", "similar", "crossover", "falls", "rises")
PAIR_KINDS = ("lower", "higher", "similar")
ALONG_KINDS = ("crossover", "falls", "rises")
ALPHA = 0.05
MIN_EFFECT = 0.05

# Row columns a claim may name as its metric; counters also by their short name.
METRICS = (
    "elapsed_s", "throughput_rows_s", "engine_elapsed_s", "client_share", "q_first_s",
    "q_rest_median_s", "q_p50_s", "q_p95_s", "q_p99_s", "q_max_s", "data_mb_s", "read_mb_s",
    "physical_reads_per_s", "hit_ratio_app", "hit_ratio_sys", "written_bytes", "uses_index",
)  # fmt: skip
COUNTERS = (
    "logical_reads", "physical_reads", "prefetch_reads", "os_read_bytes", "os_write_bytes",
    "lock_waits", "lock_wait_time_ms", "lock_escalations",
)  # fmt: skip


@dataclass(frozen=True)
class Claim:
    index: int
    kind: str
    says: str
    metric: str = "elapsed_s"
    a: dict[str, Any] = field(default_factory=dict)
    b: dict[str, Any] = field(default_factory=dict)
    where: dict[str, Any] = field(default_factory=dict)
    along: str | None = None
    within: tuple[float, float] | None = None
    alpha: float = ALPHA
    min_effect: float = MIN_EFFECT
    engines: tuple[str, ...] = ()

    def applies_to(self, engine: str) -> bool:
        return not self.engines or engine in self.engines


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
    """Claims from a sweep document's ``expect`` (already checked by the schema)."""
    raw, alpha, min_effect = _claim_list(expect)
    claims = []
    for i, c in enumerate(raw):
        within = c.get("within")
        claims.append(
            Claim(
                index=i,
                kind=c["kind"],
                says=c.get("says") or describe(c),
                metric=c.get("metric", "elapsed_s"),
                a=dict(c.get("a") or {}),
                b=dict(c.get("b") or {}),
                where=dict(c.get("where") or {}),
                along=c.get("along"),
                within=(float(within[0]), float(within[1])) if within else None,
                alpha=float(c.get("alpha", alpha)),
                min_effect=float(c.get("min_effect", min_effect)),
                engines=tuple(c.get("engines") or ()),
            )
        )
    return claims


def kv(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


def describe(c: dict) -> str:
    """A claim in words, when the sweep gives none."""
    metric = c.get("metric", "elapsed_s")
    where = f" ({kv(c['where'])})" if c.get("where") else ""
    kind = c["kind"]
    if kind in PAIR_KINDS:
        rel = {"lower": "<", "higher": ">", "similar": "≈"}[kind]
        return f"{metric}: {kv(c.get('a', {}))} {rel} {kv(c.get('b', {}))}{where}"
    if kind == "crossover":
        lo, hi = c.get("within", ("?", "?"))
        return (
            f"{metric}: {kv(c.get('b', {}))} overtakes {kv(c.get('a', {}))} as "
            f"{c.get('along')} grows, between {lo:g} and {hi:g}{where}"
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


def validate(expect: Any, points: Sequence[Any], engine: str) -> list[tuple[str, str, str]]:
    """(field, message, allowed) for every claim on ``engine`` that names a key, value or
    metric the sweep does not have there (``points``: its expanded points on ``engine``)."""
    raw, _, _ = _claim_list(expect)
    values = _values_of(points)
    swept = {k for k, v in values.items() if len(v) > 1}
    allowed_keys = ", ".join(sorted(values))
    errors: list[tuple[str, str, str]] = []
    prefix = "expect.claims" if isinstance(expect, dict) else "expect"
    for i, c in enumerate(raw):
        if c.get("engines") and engine not in c["engines"]:
            continue
        at = f"{prefix}[{i}]"
        metric = c.get("metric", "elapsed_s")
        if metric not in METRICS and metric not in COUNTERS:
            errors.append((f"{at}.metric", f"unknown metric {metric!r}",
                           ", ".join((*METRICS, *COUNTERS))))  # fmt: skip
        for part in ("a", "b", "where"):
            for key, value in (c.get(part) or {}).items():
                if key not in values:
                    errors.append((f"{at}.{part}.{key}", "not a knob or parameter of the sweep",
                                   allowed_keys))  # fmt: skip
                elif not any(same(v, value) for v in values[key]):
                    shown = ", ".join(map(str, values[key]))
                    errors.append((f"{at}.{part}.{key}", f"value {value!r} not in the sweep",
                                   shown))  # fmt: skip
        kind = c.get("kind")
        if kind in PAIR_KINDS + ("crossover",) and not (c.get("a") and c.get("b")):
            errors.append(
                (at, f"a '{kind}' claim compares a with b: give both", "a: {...}, b: {...}")
            )
        if kind in ALONG_KINDS:
            along = c.get("along")
            if along not in swept:
                errors.append((f"{at}.along", f"{along!r} is not swept (two or more values)",
                               ", ".join(sorted(swept)) or "none"))  # fmt: skip
        if kind == "crossover" and c.get("within"):
            lo, hi = c["within"]
            if not lo < hi:
                errors.append((f"{at}.within", "low must be below high", "[low, high]"))
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
