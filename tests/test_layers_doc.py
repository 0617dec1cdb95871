"""docs/layers.md is true to the import contracts: the same layers in the same order, every
part of the package in one of them, each folder saying in its docstring what lives there,
and few modules at the package's root."""

from __future__ import annotations

import ast
import re
import tomllib

from tests.conftest import REPO

PACKAGE = REPO / "src" / "tunelab"


def contract_layers() -> list[str]:
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    (layers,) = [
        c["layers"] for c in doc["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
    ]
    return layers


def doc_layers() -> list[str]:
    page = (REPO / "docs" / "layers.md").read_text()
    rows = re.findall(r"^\| (`[^|]+`(?: \\\| `[^|]+`)*) \|", page, re.M)
    return [" | ".join(re.findall(r"`([^`]+)`", row)) for row in rows]


def parts() -> set[str]:
    return {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()
    }


def test_the_page_lists_the_contracts_layers_in_order():
    assert doc_layers() == contract_layers()


def test_every_part_of_the_package_is_in_a_layer():
    named = {part.strip() for layer in contract_layers() for part in layer.split("|")}
    assert parts() == named


def test_every_folder_says_what_lives_there_and_the_root_is_small():
    for folder in (p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        tree = ast.parse((folder / "__init__.py").read_text())
        assert ast.get_docstring(tree), f"{folder.name}/__init__.py has no docstring"
    assert len(list(PACKAGE.glob("*.py"))) <= 8
