"""The files `tunelab compare` writes (its page, the Markdown table, the JSON document), each
carrying a mark that names its writer: an existing file is replaced only when it carries the
mark, so that a file the lab did not make is never overwritten."""

from __future__ import annotations

import json
from pathlib import Path

from tunelab.report.compare.match import CompareInputError

HTML_MARK = '<meta name="generator" content="tunelab compare">'
MARKDOWN_MARK = "<!-- written by tunelab compare -->"
JSON_MARK = "tunelab compare"  # its "generator"
OLD_PAGE = "<title>tunelab compare</title>"  # pages written before they carried the mark


def made_by_compare(path: Path) -> bool:
    """Whether the file is one `tunelab compare` wrote."""
    try:
        head = Path(path).read_bytes()[:200_000].decode("utf-8", errors="replace")
    except OSError:
        return False
    if HTML_MARK in head or OLD_PAGE in head or head.startswith(MARKDOWN_MARK):
        return True
    try:
        return json.loads(head).get("generator") == JSON_MARK
    except (ValueError, AttributeError):
        return False


def check_outputs(outputs: dict[str, Path | None]) -> None:
    """Before anything is measured or written: each output (option -> path) is new, or a
    file compare wrote; two options never name one file. Raises CompareInputError."""
    seen: dict[Path, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        path = Path(path)
        resolved = path.resolve()
        if resolved in seen:
            raise CompareInputError(f"{option} {path}: the same file as {seen[resolved]}")
        seen[resolved] = option
        if path.is_dir():
            raise CompareInputError(f"{option} {path}: is a directory")
        if path.exists() and not made_by_compare(path):
            raise CompareInputError(
                f"{option} {path}: exists and was not written by tunelab compare; "
                "remove it or name another file"
            )


def markdown_text(body: str) -> str:
    return f"{MARKDOWN_MARK}\n{body.rstrip()}\n"


def json_text(doc: dict) -> str:
    return json.dumps({"generator": JSON_MARK, **doc}, indent=1, allow_nan=False) + "\n"
