from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def write_sweep(tmp_path: Path):
    """Write a sweep YAML (dedented) into tmp_path and return its path."""

    def write(text: str, name: str = "sweep.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write
