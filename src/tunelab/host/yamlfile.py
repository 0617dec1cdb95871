"""The lab's one YAML reader: sweep files, the findings file, a report's sweep.

A file is read no further than MAX_FILE_BYTES and must be UTF-8; the loader refuses, while
composing and so before anything is constructed, anchors and aliases (a few bytes of aliases
expand into gigabytes: 'billion laughs'), nesting deeper than MAX_DEPTH and numbers that are
not finite (.nan, .inf, 1.0e999), each error one line naming the file and the field.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import ScalarNode
from yaml.reader import ReaderError
from yaml.resolver import Resolver

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 32  # nesting of mappings and lists; real sweeps need five
_FLOAT = "tag:yaml.org,2002:float"


class YamlFileError(ValueError):
    """A file the lab cannot read: its path, the field (or byte, or line) and why."""

    def __init__(self, file: str, field: str, message: str, allowed: str = ""):
        self.file, self.field, self.message, self.allowed = file, field, message, allowed
        where = f"{field}: " if field else ""
        tail = f" (allowed: {allowed})" if allowed else ""
        super().__init__(f"{file}: {where}{message}{tail}")


def show(value: Any, limit: int = 60) -> str:
    """repr() cut short: a message stays one readable line whatever the file holds."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip(message: str, limit: int = 200) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."


class _Refused(yaml.YAMLError):
    """What the loader refuses, with the field it was found in."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path, self.message = path, message


if yaml.__with_libyaml__:
    from yaml.cyaml import CParser as _Parser  # libyaml: a large file parses ten times faster
else:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _Parser(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str):
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)


class _Loader(Composer, _Parser, SafeConstructor, Resolver):
    """SafeLoader's composer and constructor with the refusals above."""

    def __init__(self, stream: str):
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._where = [""]

    def compose_node(self, parent, index):
        here = self._where[-1]
        if isinstance(index, int):
            here = f"{here}[{index}]"
        elif index is not None:  # a mapping's value; index is its key
            key = index.value[:40] if isinstance(index, ScalarNode) else "?"
            here = f"{here}.{key}" if here else str(key)
        event = self.peek_event()
        if event.anchor is not None:
            sigil = "*" if isinstance(event, AliasEvent) else "&"
            name = show(event.anchor, 30).strip("'")
            raise _Refused(here, f"YAML anchors and aliases are not allowed (found {sigil}{name})")
        if len(self._where) > MAX_DEPTH:
            raise _Refused(here, f"nested more than {MAX_DEPTH} levels deep")
        self._where.append(here)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._where.pop()
        # A value, or a key (index None in a mapping): NaN compares unequal to every bound and
        # infinity passes every minimum, so neither is a value any field can hold.
        if node.tag == _FLOAT and not math.isfinite(self.construct_yaml_float(node)):
            raise _Refused(here, f"{show(node.value, 30)} is not a finite number")
        return node


def read_text(path: str | Path) -> str:
    """The file as UTF-8 text, read no further than the size limit."""
    file = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
            size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise YamlFileError(file, "", f"cannot read file: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        got = f"{size} bytes" if size > MAX_FILE_BYTES else f"more than {MAX_FILE_BYTES} bytes"
        raise YamlFileError(file, "", f"file too large: {got}", "at most 1 MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        msg = f"not UTF-8 text: {exc.reason} 0x{bad}"
        raise YamlFileError(file, f"byte {exc.start}", msg) from None


def parse(text: str, file: str) -> Any:
    """The document in ``text`` (read from ``file``, named in errors)."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    except _Refused as exc:
        raise YamlFileError(file, exc.path, exc.message) from None
    except ReaderError as exc:
        msg = f"not valid YAML: character #x{exc.character:04x}: {exc.reason}"
        raise YamlFileError(file, f"position {exc.position}", msg) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        problem = clip(str(getattr(exc, "problem", None) or exc))
        raise YamlFileError(file, where, f"not valid YAML: {problem}") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of 5000 digits, 2024-13-45
        why = clip(str(exc).split(";")[0])  # not Python's advice on its own limits
        raise YamlFileError(file, "", f"a value cannot be read: {why}") from None
    finally:
        loader.dispose()


def load(path: str | Path) -> Any:
    """The document of the YAML file at ``path``; YamlFileError says what is wrong."""
    return parse(read_text(path), str(path))
