"""Reading a results directory (``<engine>/<sweep>.csv`` merged files) or result CSVs, for
every command that takes one: `tunelab compare`, `tunelab check`, `tunelab logscan`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tunelab.report.data import ReportInputError, read_rows


class ResultsDirError(ValueError):
    """A results directory or file that cannot be read; the message is one line
    ``file: message``."""


def _engine_names() -> set[str]:
    from tunelab import engines

    return set(engines.names())


def result_files(path: Path) -> list[Path]:
    """The merged result files of a results directory (``<engine>/<sweep>.csv``; other
    folders, such as bpsim's curves, are left alone), or the CSVs of a directory that holds
    them directly (one engine's folder, one sweep's point files), or the file itself."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ResultsDirError(f"{path}: no such file or directory")
    names = _engine_names()
    files = sorted(p for p in path.glob("*/*.csv") if p.parent.name in names)
    if not files:
        files = sorted(p for p in path.glob("*.csv") if not p.name.endswith(".partial.csv"))
    if not files:
        raise ResultsDirError(f"{path}: no result CSVs (<engine>/<sweep>.csv) in it")
    return files


def load_side(path: Path) -> pd.DataFrame:
    """Every result row under ``path``; engine and sweep from the file's place when the rows
    lack them."""
    frames = []
    for file in result_files(path):
        try:
            frame = read_rows(file)
        except ReportInputError as exc:
            raise ResultsDirError(str(exc)) from None
        if "engine" not in frame:
            frame["engine"] = file.parent.name
        if "sweep" not in frame:
            frame["sweep"] = file.stem
        frames.append(frame)
    return pd.concat(frames, ignore_index=True, sort=False)


def results_root(path: Path) -> Path:
    """The results directory a side names: the directory itself, or for a merged CSV
    ``<root>/<engine>/<sweep>.csv`` its root, for another CSV the folder holding it."""
    path = Path(path)
    if path.is_dir():
        return path
    return path.parent.parent if path.parent.name in _engine_names() else path.parent
