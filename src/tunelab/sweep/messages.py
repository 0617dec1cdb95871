"""Validation's lines (file: field: message), and a JSON Schema error put in those words."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import jsonschema

from tunelab.host.yamlfile import clip as _clip
from tunelab.host.yamlfile import show as _show

_KIND = {
    "array": "a list",
    "number": "a number",
    "integer": "an integer",
    "null": "null",
    "string": "a string",
    "object": "a mapping",
}


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


@dataclass(frozen=True)
class SpecWarning:
    """Allowed, but against the engine maker's advice: printed, never refused."""

    file: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}: {where}warning: {self.message}"


class SweepInvalid(Exception):
    def __init__(self, errors: list[SpecError]):
        super().__init__("\n".join(map(str, errors)))
        self.errors = errors


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def explain(file: str, err: jsonschema.ValidationError) -> list[SpecError]:
    """Turn a JSON Schema error into lines naming the field and what is allowed."""
    path = _path(err.absolute_path)
    sch = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "additionalProperties":
        allowed = sorted(sch.get("properties", {}))
        extra = set(err.instance) - set(allowed) if isinstance(err.instance, dict) else set()
        # A key may be any YAML scalar (1, true, null): named and sorted as text.
        names = sorted(k[:40] if isinstance(k, str) else _show(k, 40) for k in extra)
        return [
            SpecError(file, f"{path}.{k}" if path else k, "unknown key", ", ".join(allowed))
            for k in names
        ]
    if err.validator in ("oneOf", "anyOf"):
        named = [v for alt in err.validator_value for v in alt.get("enum", ())]
        if named:
            allowed = ", ".join(map(str, named)) + ", or a list of them"
            return [SpecError(file, path, f"{_show(err.instance)} not allowed", allowed)]
        kinds = [_KIND.get(alt.get("type"), str(alt.get("type"))) for alt in err.validator_value]
        return [SpecError(file, path, f"{_show(err.instance)} is not valid", " or ".join(kinds))]
    if err.validator == "enum":
        return [
            SpecError(
                file,
                path,
                f"{_show(err.instance)} not allowed",
                ", ".join(map(str, err.validator_value)),
            )
        ]
    if err.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", err.message)
        return [SpecError(file, _path([*err.absolute_path, m]), "missing") for m in missing]
    if err.validator == "type":
        kinds = err.validator_value
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if isinstance(err.instance, float):  # 6.0 where a count belongs: only the number kinds
            kinds = [k for k in kinds if k in ("integer", "number")] or kinds
        return [
            SpecError(file, path, f"{_show(err.instance)} has the wrong type", " or ".join(kinds))
        ]
    if err.validator in ("minimum", "maximum"):
        bound = ">=" if err.validator == "minimum" else "<="
        return [
            SpecError(
                file, path, f"{_show(err.instance)} out of range", f"{bound} {err.validator_value}"
            )
        ]
    if err.validator == "pattern":
        return [
            SpecError(
                file,
                path,
                f"{_show(err.instance)} is not a valid name",
                "lower-case letters, digits, '-' and '_'",
            )
        ]
    return [SpecError(file, path, _clip(err.message))]
