"""The tables of a page across engines: settings not shared, claims' verdicts, plans chosen."""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import pandas as pd

from tunelab.analysis.claim_verdict import CANNOT_RUN, css_class, word_of
from tunelab.report import contexts, evidence
from tunelab.report.across_runs import POOL_BYTES, EngineRun, Experiment, with_pool_bytes
from tunelab.report.fragments import unique
from tunelab.report.labels import figures_text, fmt, fmt_bytes, fmt_percent, label
from tunelab.store.results import KNOB_PREFIX, WORKLOAD_PREFIX


def _values(frame: pd.DataFrame, col: str, as_bytes: bool = False) -> str:
    vals = sorted(set(pd.to_numeric(frame[col], errors="coerce").dropna())) if col in frame else []
    if not vals:
        return "—"
    shown = [fmt_bytes(v) if as_bytes else fmt(v) for v in vals]
    return shown[0] if len(shown) == 1 else f"{shown[0]} to {shown[-1]} ({len(shown)} values)"


def settings(run: EngineRun) -> dict[str, str]:
    """What the engine ran with, as its rows read it back."""
    frame = with_pool_bytes(run.data.results)
    pool = _values(frame, POOL_BYTES, as_bytes=True)
    data_bytes = pd.to_numeric(frame.get("data_bytes"), errors="coerce")
    if isinstance(data_bytes, pd.Series) and data_bytes.notna().any():
        share = frame[POOL_BYTES] / data_bytes
        lo, hi = share.min(), share.max()
        if np.isfinite(lo):
            shares = (
                fmt_percent(lo)
                if math.isclose(lo, hi, rel_tol=0.01)
                else (f"{fmt_percent(lo)} to {fmt_percent(hi)}")
            )
            pool += f" ({shares} of the table with its indexes)"
    return {
        "buffer pool": pool,
        "page size": _values(frame, "page_size_bytes", as_bytes=True),
        "access mode": ", ".join(unique(frame, "access_mode")) or "—",
        "fetch": ", ".join(unique(frame, f"{WORKLOAD_PREFIX}fetch")) or "—",
        "rows in the table": _values(frame, "dataset_rows"),
        "cache": ", ".join(unique(frame, "cache_requested")) or "—",
    }


def differences(exp: Experiment) -> list[str]:
    """The settings the engines did not share, one line each."""
    per = {r.engine: settings(r) for r in exp.runs}
    if len(per) < 2:
        return []
    lines = []
    for name in next(iter(per.values())):
        values = {e: s[name] for e, s in per.items()}
        if len(set(values.values())) > 1:
            lines.append(f"{name}: " + "; ".join(f"{e} {v}" for e, v in values.items()))
    return lines


def claim_names(exp: Experiment) -> list[str]:
    """The claims in the order the sweep is judged by (each finding, then its explanations),
    then any only the verdicts name."""
    names = [str(c.get("says")) for c in exp.claims]
    for run in exp.runs:
        names += [str(v.get("claim")) for v in run.verdicts]
    return list(dict.fromkeys(n for n in names if n and n != "None"))


def claim_rows(exp: Experiment) -> list[dict[str, Any]]:
    """Each claim's name, role and (for an explanation of one engine) that engine."""
    known = {str(c.get("says")): c for c in exp.claims}
    return [
        {
            "says": n,
            "role": known.get(n, {}).get("role", "claim"),
            "engine": known.get(n, {}).get("explains_engine"),
            "reported": known.get(n, {}).get("reported"),
            "source_ratio": known.get(n, {}).get("source_ratio"),
        }
        for n in claim_names(exp)
    ]


def verdict_of(run: EngineRun, claim: str) -> dict[str, Any] | None:
    return next((v for v in run.verdicts if str(v.get("claim")) == claim), None)


def verdict_cell(v: dict[str, Any] | None, href: str = "", missing: str = "") -> str:
    """A verdict in words with this engine's figure per context (its interval at the level
    the deciding look used), linking to the evidence; where the engine has no verdict, why:
    "cannot run here" with the reason, or not run yet."""
    esc = html.escape
    if v is None:
        if not missing:
            return '<span class="tl-muted">—</span>'
        if missing.startswith("not run yet"):
            return f'<span class="tl-muted" title="{esc(missing)}">not run</span>'
        badge = f'<span class="tl-verdict tl-cannot-run">{CANNOT_RUN}</span>'
        return f'<div class="tl-cell">{badge}<div class="tl-ratio">{esc(missing)}</div></div>'
    said = word_of(v)
    figures = figures_text(v)
    level = evidence.levels_text(v)  # the level the intervals really have
    if figures and level:
        figures.append(level)
    # how its contexts came out and a curve's shape, before the figures they summarise
    counted = [x for x in (contexts.tally(v), *contexts.shapes(v)) if x]
    ratio = "".join(f'<div class="tl-ratio">{esc(f)}</div>' for f in (*counted, *figures))
    badge = f'<span class="tl-verdict {css_class(said)}">{esc(said)}</span>'
    title = esc(evidence.sentence(v) or evidence.detail(v))
    inner = f'<a href="{esc(href)}" title="{title}">{badge}</a>' if href else badge
    return f'<div class="tl-cell">{inner}{ratio}</div>'


def claim_label(row: dict[str, Any]) -> str:
    """A finding in words with its source's figure; an explanation marked as one."""
    esc = html.escape
    if row["role"] == "explains":
        about = f" ({row['engine']})" if row.get("engine") else ""
        return f'<span class="tl-explains">↳ why{esc(about)}: {esc(row["says"])}</span>'
    text = f"<strong>{esc(row['says'])}</strong>"
    if row.get("reported"):
        text += f'<div class="tl-ratio">source: {esc(str(row["reported"]))}</div>'
    return text


def plans_html(exp: Experiment, x: str) -> str:
    """Each engine's access path per point, side by side (the plan each engine chose)."""
    if not any("access_path" in r.data.results for r in exp.runs):
        return ""
    cols = [
        c
        for c in dict.fromkeys(c for r in exp.runs for c in r.data.point_columns)
        if not (x == POOL_BYTES and c == f"{KNOB_PREFIX}buffer_pool")
    ]
    table: dict[tuple, dict[str, str]] = {}
    for run in exp.runs:
        frame = run.data.results
        if "access_path" not in frame:
            continue
        present = [c for c in cols if c in frame]
        groups = frame.groupby(present, dropna=False, sort=False) if present else [((), frame)]
        for key, g in groups:
            got = dict(zip(present, key if isinstance(key, tuple) else (key,), strict=True))
            key = tuple(str(got[c]) if c in got else "—" for c in cols)  # "—": not its knob
            paths = g["access_path"].dropna().astype(str)
            table.setdefault(key, {})[run.engine] = paths.mode().iloc[0] if not paths.empty else "—"
    if not table:
        return ""
    varied = any(len(set(v.values())) > 1 for v in table.values())
    head = "".join(f"<th>{html.escape(label(c))}</th>" for c in cols)
    head += "".join(f"<th>{html.escape(r.engine)}</th>" for r in exp.runs)
    body = ""
    for key in sorted(table, key=lambda k: tuple(_sort_key(v) for v in k)):
        cells = "".join(f"<td>{html.escape(fmt(_as_number(v)))}</td>" for v in key)
        cells += "".join(f"<td>{html.escape(table[key].get(r.engine, '—'))}</td>" for r in exp.runs)
        body += f"<tr>{cells}</tr>"
    lead = (
        "The engines chose different access paths for the same point: that is the lesson "
        "of this page."
        if varied
        else "Every engine used the same access path at each point."
    )
    return (
        f'<h2 id="plans">Plans</h2><p class="tl-muted">{lead}</p>'
        f'<table class="tl-grid"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _as_number(v: str) -> Any:
    try:
        return float(v)
    except ValueError:
        return v


def _sort_key(v: str) -> tuple:
    n = _as_number(v)
    return (0, n, "") if isinstance(n, float) else (1, 0.0, v)
