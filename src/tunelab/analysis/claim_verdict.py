"""A claim's ``Verdict`` and what it says in words (reproduced, holds, undecided, ...)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tunelab.analysis import decisions
from tunelab.analysis.claim_rows import metric_column
from tunelab.analysis.decisions import HOLDS, INCONCLUSIVE
from tunelab.sweep.claimspec import Claim
from tunelab.sweep.findings import FINDING

VERDICTS = decisions.VERDICTS
# What a verdict says in words: of a finding, whether it reproduced here; of an explanation
# or a sweep's own claim, whether it holds. A directional claim shown equivalent within its
# margin (SIMILAR) or wholly short of it (SHORT) did not reproduce: the effect is shown absent.
REPRODUCED, NOT_REPRODUCED, UNDECIDED = "reproduced", "not reproduced", "undecided"
HOLDS_WORD, FAILS_WORD = "holds", "does not hold"
CANNOT_RUN = "cannot run here"
WORDS = (REPRODUCED, NOT_REPRODUCED, UNDECIDED, HOLDS_WORD, FAILS_WORD, CANNOT_RUN)


def word(verdict: str, role: str) -> str:
    """The verdict of a claim in its role's words (``claimspec.Claim.role``)."""
    if verdict == INCONCLUSIVE or verdict not in decisions.DECIDED:
        return UNDECIDED
    if role == FINDING:
        return REPRODUCED if verdict == HOLDS else NOT_REPRODUCED
    return HOLDS_WORD if verdict == HOLDS else FAILS_WORD


def word_of(stored: dict[str, Any]) -> str:
    """The word of a stored verdict (``Verdict.to_json``; a file written before words were
    stored has the verdict alone)."""
    return str(stored.get("word") or word(str(stored.get("verdict")), stored.get("role", "")))


def css_class(text: str) -> str:
    """The class a page styles a verdict word by (tl-reproduced, tl-not-reproduced, ...)."""
    word = "-".join(str(text).split()).replace("-here", "")
    return "tl-" + re.sub(r"[^A-Za-z0-9_-]", "", word)  # a stored file's word: nothing else


@dataclass
class Verdict:
    claim: Claim
    verdict: str
    evidence: str
    causes: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)  # the compared rows' hosts
    needed: int | None = None  # inconclusive: repetitions the observed spread would need
    # per context (e.g. cold, warm): its label, verdict, ratio [low, high] or crossing
    contexts: list[dict[str, Any]] = field(default_factory=list)
    # rows measured under another version of the findings file than the one judging them
    other_version: str = ""
    # the look of a sequential procedure that gave the verdict (look, looks, rounds, alpha)
    look: dict[str, Any] | None = None
    # the weight of the CPU-speed correction of its times (None: times as measured)
    weight: float | None = None

    @property
    def decided(self) -> bool:
        return self.verdict in decisions.DECIDED

    @property
    def pooled(self) -> str:
        """A warning when the compared rows come from more than one host ("" otherwise)."""
        if len(self.hosts) < 2:
            return ""
        return f"warning: rows from {len(self.hosts)} hosts compared ({', '.join(self.hosts)})"

    def line(self, sweep: str) -> str:
        why = f"; likely cause: {'; '.join(self.causes)}" if self.causes else ""
        pooled = f"; {self.pooled}" if self.pooled else ""
        other = f"; {self.other_version}" if self.other_version else ""
        return f"{sweep}: {self.claim.says}: {self.word} ({self.evidence}{why}{pooled}{other})"

    @property
    def word(self) -> str:
        return word(self.verdict, self.claim.role)

    def to_json(self) -> dict[str, Any]:
        c = self.claim
        return {
            "claim": c.says,
            "kind": c.kind,
            "metric": metric_column(c.metric) if c.metric != "uses_index" else c.metric,
            "role": c.role,
            "finding": c.finding,
            "source": c.source,
            "reported": c.reported,
            "source_ratio": c.source_ratio,
            "findings_digest": c.findings_digest,
            "margin": c.min_effect,
            "window": list(c.within) if c.within else None,
            # the intervals in the evidence are at 1 - alpha of the look that decided
            "interval_level": round(1 - c.alpha, 4),
            "word": self.word,
            "verdict": self.verdict,
            "evidence": self.evidence,
            "causes": self.causes,
            "hosts": self.hosts,
            "decided": self.decided,
            "needed": self.needed,
            "contexts": self.contexts,
            # how the contexts' verdicts made this one (``decisions.combine``)
            "contexts_rule": c.contexts,
            "other_version": self.other_version,
            "look": self.look,
            "weight": self.weight,
        }
