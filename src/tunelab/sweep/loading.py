"""A sweep file read by the lab's one YAML reader and checked against the sweep schema."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from tunelab import engines
from tunelab.host import yamlfile
from tunelab.host.yamlfile import show as _show
from tunelab.sweep.messages import SpecError, explain


@cache
def schema() -> dict:
    """The sweep schema, with the engine names taken from the registry (``tunelab.engines``),
    the one place that lists them."""
    text = resources.files("tunelab").joinpath("schemas/sweep.schema.json").read_text()
    doc = json.loads(text)
    doc["$defs"]["engine"] = {**doc["$defs"]["engine"], "enum": engines.names()}
    return doc


def _unique_key(item: Any) -> tuple:
    if isinstance(item, bool):  # JSON's true is not 1
        return ("bool", item)
    if isinstance(item, (int, float)):
        return ("number", item)
    if isinstance(item, str) or item is None:
        return ("scalar", item)
    return ("json", json.dumps(item, sort_keys=True, default=str))


def _unique_items(validator, unique, instance, _schema):
    """uniqueItems in linear time: jsonschema's own compares every pair of a mixed list."""
    if not (unique and validator.is_type(instance, "array")):
        return
    seen: set[tuple] = set()
    for item in instance:
        key = _unique_key(item)
        if key in seen:
            yield jsonschema.ValidationError(f"{_show(instance)} has non-unique elements")
            return
        seen.add(key)


def _is_integer(_checker, instance: Any) -> bool:
    """An integer as the file wrote it: JSON Schema counts 1000.0 one, but the code that reads
    a count (range(), numpy sizes, int() of the data set's name) does not."""
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _validator() -> jsonschema.protocols.Validator:
    base = jsonschema.Draft202012Validator
    cls = jsonschema.validators.extend(
        base,
        {"uniqueItems": _unique_items},
        type_checker=base.TYPE_CHECKER.redefine("integer", _is_integer),
    )
    return cls(schema())


def schema_errors(file: str, doc: Any) -> list[SpecError]:
    validator = _validator()
    errors = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.path))):
        errors.extend(explain(file, err))
    return errors


def load_yaml(path: Path) -> tuple[Any, list[SpecError]]:
    """A YAML file read by the lab's one reader (tunelab.host.yamlfile): (document, []), or
    (None, the one error)."""
    try:
        return yamlfile.load(path), []
    except yamlfile.YamlFileError as exc:
        return None, [SpecError(exc.file, exc.field, exc.message, exc.allowed)]
