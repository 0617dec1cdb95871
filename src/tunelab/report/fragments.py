"""HTML fragments and counts the report page's modules share: display in the notebook,
escaping, the call-out box, a column's distinct values, the repetitions per point."""

from __future__ import annotations

import html
import json
from typing import Any

import pandas as pd

from tunelab.report.data import ReportData
from tunelab.report.labels import fmt


def show(fragment: str | None) -> None:
    """Display an HTML fragment in the notebook (nothing for None)."""
    if fragment:
        from IPython.display import HTML, display

        display(HTML(fragment))


def esc(value: Any) -> str:
    return html.escape(fmt(value) if not isinstance(value, str) else value)


def script_json(value: Any) -> str:
    """JSON to put inside a <script> block: no '<', '>' or '&' in it (their \\u escapes, which
    JSON reads back as the same text), so no text a file gave can end the block ('</script>')
    or make the parser hold the rest of the page as script ('<!--<script')."""
    text = json.dumps(value, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def note(text: str, kind: str = "note") -> str:
    """A call-out box; ``kind`` is note or warn. ``text`` is HTML."""
    return f'<div class="tl-{kind}">{text}</div>'


def reps_per_point(data: ReportData) -> pd.Series:
    """Rows per point: the repetitions each point got."""
    frame = data.results
    by = ["point_id"] if "point_id" in frame else data.point_columns
    if not by:
        return pd.Series([len(frame)])
    return frame.groupby(by, dropna=False).size()


def unique(frame: pd.DataFrame, col: str) -> list[str]:
    """A column's distinct values as sorted strings ([] without the column)."""
    if col not in frame:
        return []
    return sorted({str(v) for v in frame[col].dropna()})
