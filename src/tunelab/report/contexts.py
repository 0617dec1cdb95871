"""A verdict's contexts and curve in words, from a stored verdict (``Verdict.to_json``):
how many of its contexts reproduced, did not, or stayed undecided ("reproduced at 7 of 8
selectivities; undecided at 50 %"), the rule that made one word of them, and the shape of
a curve along a swept key ("69.6, 64, 62.4, 60.9, 40.4 ms at buffer_pool 64 … 16384: no
clear step, then falls"). Every page that shows a verdict takes these lines from here."""

from __future__ import annotations

import re
from typing import Any

from tunelab.analysis.claim_verdict import REPRODUCED, WORDS, word_of
from tunelab.report.labels import fmt_selectivity_percent

# A context key in the plural, as a count of its values reads ("7 of 8 selectivities").
PLURAL = {"selectivity": "selectivities", "cache": "cache states", "workload": "workloads"}
# The rules a verdict's word follows over its contexts (``decisions.combine``), in words.
RULE_TEXT = {
    "all-bonferroni": "reproduced only where every context reproduces; not reproduced where "
    "one of its k contexts shows the effect absent or reversed at alpha / k (a context that "
    "does so at alpha only is undecided)",
    "all": "reproduced only where every context reproduces; not reproduced where one shows "
    "the effect absent or reversed",
    "majority": "the word of more than half of the contexts",
}
# At most this many contexts are named one by one; more are counted.
NAMED = 3


def _value(label: str) -> tuple[str, str]:
    """(key, value in the reader's unit) of a one-key context label ("selectivity 0.5")."""
    key, _, value = label.partition(" ")
    if key == "selectivity":
        try:
            return key, fmt_selectivity_percent(float(value))
        except ValueError:
            pass
    return key, value


def tally(v: dict[str, Any]) -> str:
    """How the contexts of a verdict came out, "" for a verdict of one context: each word
    with the count of its contexts, naming them where few ("reproduced at 7 of 8
    selectivities; undecided at 50 %")."""
    contexts = [c for c in v.get("contexts") or [] if c.get("label")]
    if len(contexts) < 2:
        return ""
    one_key = all(", " not in str(c["label"]) for c in contexts)
    keys = {_value(str(c["label"]))[0] for c in contexts} if one_key else set()
    key = next(iter(keys)) if len(keys) == 1 else ""
    plural = PLURAL.get(key, f"values of {key}") if key else "contexts"
    n = len(contexts)
    by_word: dict[str, list[str]] = {}
    for c in contexts:
        shown = _value(str(c["label"]))[1] if key else str(c["label"])
        by_word.setdefault(str(c.get("word")), []).append(shown)
    largest = max(len(x) for x in by_word.values())
    at = "" if key == "cache" else " at"  # "reproduced warm", "reproduced at 50 %"
    parts = []
    for word in sorted(by_word, key=lambda w: WORDS.index(w) if w in WORDS else len(WORDS)):
        labels, k = by_word[word], len(by_word[word])
        if k == n:
            parts.append(f"{word} at {'both' if n == 2 else f'all {n}'} {plural}")
        elif k > NAMED or (k == largest and k > 1):
            parts.append(f"{word} at {k} of {n} {plural}")
        else:
            parts.append(f"{word}{at} {', '.join(labels)}")
    return "; ".join(parts)


def rule_text(v: dict[str, Any]) -> str:
    """The rule that made one word of several contexts, "" for one context."""
    if len(v.get("contexts") or []) < 2:
        return ""
    # a verdict stored without its rule was combined by "all", the one rule there was then
    rule = str(v.get("contexts_rule") or "all")
    return f"the word over its contexts: {RULE_TEXT.get(rule, rule)} (rules.contexts: {rule})"


def _percent_selectivity(label: str) -> str:
    return re.sub(
        r"selectivity ([0-9.e-]+)",
        lambda m: f"selectivity {fmt_selectivity_percent(float(m.group(1)))}",
        label,
    )


def curves(v: dict[str, Any]) -> list[str]:
    """Each context's curve along its swept key, with the context named where there are
    several: "cache warm: 147, 150, 150, 142, 143 ms at buffer_pool 16 … 65536: level,
    then no clear step"."""
    out = []
    contexts = v.get("contexts") or []
    for c in contexts:
        curve = c.get("curve")
        if not curve or not curve.get("text"):
            continue
        label = _percent_selectivity(str(c.get("label") or ""))
        out.append(f"{label}: {curve['text']}" if label and len(contexts) > 1 else curve["text"])
    return out


def shapes(v: dict[str, Any]) -> list[str]:
    """Each context's curve shape alone ("level, then falls"), for a small cell."""
    out = []
    contexts = v.get("contexts") or []
    for c in contexts:
        curve = c.get("curve")
        if curve and curve.get("shape"):
            label = _percent_selectivity(str(c.get("label") or "").replace("cache ", ""))
            several = label and len(contexts) > 1
            out.append(f"{label}: {curve['shape']}" if several else str(curve["shape"]))
    return out


def reading(v: dict[str, Any], explains: list[dict[str, Any]]) -> str:
    """What this run found for a finding, in one sentence made from its verdict alone (never
    a fixed sentence beside it that could say otherwise): its word, how its contexts or its
    curve came out, the first likely cause where it did not reproduce, and what its checked
    explanations found on the same rows."""
    said = word_of(v)
    detail = tally(v) or "; ".join(shapes(v))
    text = f"This run: {said}" + (f" ({detail})" if detail else "")
    causes = [str(c) for c in v.get("causes") or []]
    if causes and said != REPRODUCED:
        text += f", {causes[0]}"
    checked = [f"{x.get('claim')}: {word_of(x)}" for x in explains]
    if checked:
        text += f". Checked on the same rows: {'; '.join(checked)}"
    return text + "."
