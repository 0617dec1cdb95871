"""Sizes written with a unit ('64MiB', '512K'): in sweep files, claims and reports alike."""

from __future__ import annotations

import re
from typing import Any

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|K|M|G|KB|MB|GB)\s*$")
_UNITS = {
    "B": 1,
    "K": 1024,
    "KB": 1024,
    "KIB": 1024,
    "M": 1024**2,
    "MB": 1024**2,
    "MIB": 1024**2,
    "G": 1024**3,
    "GB": 1024**3,
    "GIB": 1024**3,
}


def parse_size(value: Any) -> int | None:
    """Bytes for strings like '64MiB' or '512K'; None if ``value`` is not such a string."""
    if not isinstance(value, str):
        return None
    m = _SIZE.match(value)
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
