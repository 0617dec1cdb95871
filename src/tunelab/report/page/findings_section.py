"""The sweep's findings as ``tunelab check`` judged them: each finding, its source's
figure beside this engine's, the verdict and the evidence, its explanations beneath it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tunelab.analysis.claim_verdict import css_class, word_of
from tunelab.report import contexts, evidence
from tunelab.report.fragments import esc, note
from tunelab.report.labels import figures_text, fmt_selectivity_percent


def stored_verdicts(path: str | Path) -> list[dict[str, Any]]:
    """The verdicts of a `tunelab check --json` file (one sweep's)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    for entry in doc.values() if isinstance(doc, dict) else []:
        if isinstance(entry, dict) and isinstance(entry.get("verdicts"), list):
            return entry["verdicts"]
    return []


def claims_html(verdicts: list[dict[str, Any]]) -> str:
    """The sweep's findings as ``tunelab check`` judged them (``Verdict.to_json``): each the
    finding in words, its source's figure beside this engine's, the verdict, the evidence and,
    where it did not reproduce, the likely cause; its explanations beneath it."""
    if not verdicts:
        return note(
            "No finding is stated for this sweep (workflows/findings.yaml) and the "
            "sweep states no claims (`expect:`)."
        )
    items = ""
    for i, v in enumerate(verdicts):
        said = word_of(v)
        # one plain sentence, each side's median the page's figure of it (``evidence``)
        figures = evidence.sentence(v)
        if not figures and figures_text(v):  # a file from before sides were stored
            level = evidence.levels_text(v)
            figures = "; ".join(figures_text(v)) + (f" ({level})" if level else "")
        here = f"here: {figures}" if figures else ""
        source = f"source ({v['source']}): {v['reported']}" if v.get("reported") else ""
        if v.get("source_ratio") is not None:
            source += f" — ratio {float(v['source_ratio']):.3g}"
        if v.get("kind") == "similar" and v.get("margin"):
            here += f"; similar means the equivalence interval within ±{float(v['margin']):.0%}"
        elif v.get("window"):
            lo, hi = v["window"]
            here += f"; window {fmt_selectivity_percent(lo)} to {fmt_selectivity_percent(hi)}"
        explains = v.get("role") == "explains"
        head = (
            f'<span class="tl-explains">↳ why: {esc(str(v.get("claim", "")))}</span>'
            if explains
            else f"<strong>{esc(str(v.get('claim', '')))}</strong>"
        )
        # a finding's reading gives its contexts' counts; an explanation's are shown alone
        counted = [
            contexts.tally(v) if explains else "",
            contexts.rule_text(v),
            *contexts.curves(v),
        ]
        read = ""
        if not explains:  # its explanations follow it (``claims.evaluate_sweep``'s order)
            below = [x for x in verdicts[i + 1 :] if x.get("finding") == v.get("finding")]
            mine = [x for x in below if x.get("role") == "explains"] if v.get("finding") else []
            read = contexts.reading(v, mine)
        lines = [
            x
            for x in (read, source, here if figures else "", *counted, v.get("other_version"))
            if x
        ]
        items += (
            f'<li><span class="tl-verdict {css_class(said)}">{esc(said)}</span>{head}'
            + "".join(f'<div class="tl-evidence">{esc(x)}</div>' for x in lines)
            + f'<details><summary class="tl-evidence">test detail</summary>'
            f'<div class="tl-evidence">{esc(evidence.detail(v))}</div></details></li>'
        )
    return f'<ul class="tl-claims">{items}</ul>'
