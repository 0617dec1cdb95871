"""The host's A/A history for `tunelab compare`: what earlier comparisons of two runs of one
commit on one host measured of its noise, so that the between-run variance and the run-wide
drift are pooled over the host's runs (``analysis.change``) rather than taken from a prior.

A small JSON file, ``compare-history.json`` at the top of NEW's results directory (OLD's is
read too and carried over, so the history travels with the results): per host and group
(engine and metric) the last ``KEEP`` A/A comparisons, each with the between-run variance its
points gave beyond their medians' uncertainty, how many points, the drift of its blocks of
points (the root mean square of their shifts), the commit, the two runs (a fingerprint of
their rows) and when it was recorded (UTC).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tunelab.host import atomic

NAME = "compare-history.json"
FORMAT = 1
KEEP = 10  # comparisons kept per host and group: the most recent
MAX_BYTES = 8 * 2**20
ABOUT = (
    "A/A history of tunelab compare: per host and group (engine:metric), the between-run "
    "variance (log scale, beyond the medians' uncertainty) and the drift of a block of "
    "points (the root mean square of the run's blocks' shifts) that "
    f"comparisons of two runs of one commit on that host measured (the last {KEEP})."
)
FIELDS = {
    "variance": float,
    "points": int,
    "shift": float,
    "commit": str,
    "runs": list,
    "recorded_at": str,
}


class HistoryError(ValueError):
    """A history file that cannot be used; the message is one line ``file: field: message``."""


def fingerprint(started: Iterable[object], elapsed: Iterable[float]) -> str:
    """Names one run (its rows' start times and times): a run compared with a copy of itself
    is no A/A comparison, and the same pair recorded twice counts once."""
    text = json.dumps([sorted(map(str, started)), sorted(float(x) for x in elapsed)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class History:
    path: Path
    hosts: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    changed: bool = False

    def entries(self, host: str, group: str, skip: tuple[str, str] = ("", "")) -> list[dict]:
        """The group's comparisons on the host, but not the pair ``skip`` (the one judged)."""
        pair = sorted(skip)
        return [e for e in self.hosts.get(host, {}).get(group, []) if sorted(e["runs"]) != pair]

    def between(self, host: str, group: str, skip: tuple[str, str]) -> list[tuple[float, int]]:
        return [(e["variance"], e["points"]) for e in self.entries(host, group, skip)]

    def shifts(self, host: str, group: str, skip: tuple[str, str]) -> list[float]:
        return [e["shift"] for e in self.entries(host, group, skip) if math.isfinite(e["shift"])]

    def add(self, host: str, group: str, entry: dict) -> bool:
        """Keep ``entry``; False when the same pair of runs is already there."""
        kept = self.hosts.setdefault(host, {}).setdefault(group, [])
        if any(sorted(e["runs"]) == sorted(entry["runs"]) for e in kept):
            return False
        kept.append(entry)
        del kept[:-KEEP]
        self.changed = True
        return True

    def merge(self, other: History) -> None:
        for host, groups in other.hosts.items():
            for group, kept in groups.items():
                for entry in kept:
                    self.add(host, group, entry)
        self.changed = False

    def count(self) -> int:
        return sum(len(k) for groups in self.hosts.values() for k in groups.values())

    def save(self) -> Path:
        data = {"format": FORMAT, "about": ABOUT, "hosts": self.hosts}
        atomic.write_bytes(self.path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
        self.changed = False
        return self.path


def entry(
    variance: float,
    points: int,
    shift: float,
    commit: str,
    runs: tuple[str, str],
    when: datetime | None = None,
) -> dict:
    return {
        "variance": round(float(variance), 8),
        "points": int(points),
        "shift": round(float(shift), 6),
        "commit": commit,
        "runs": list(runs),
        "recorded_at": (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _check(data: object, where: str) -> dict:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise HistoryError(f"{where}: format: not a compare history of format {FORMAT}")
    hosts = data.get("hosts", {})
    if not isinstance(hosts, dict):
        raise HistoryError(f"{where}: hosts: must be a mapping")
    for host, groups in hosts.items():
        if not isinstance(groups, dict):
            raise HistoryError(f"{where}: hosts.{host}: must be a mapping")
        for group, kept in groups.items():
            if not isinstance(kept, list):
                raise HistoryError(f"{where}: hosts.{host}.{group}: must be a list")
            for i, e in enumerate(kept):
                for name, kind in FIELDS.items():
                    ok = isinstance(e, dict) and isinstance(e.get(name), kind)
                    if kind is float and isinstance(e, dict):
                        ok = isinstance(e.get(name), int | float) and not isinstance(
                            e.get(name), bool
                        )
                    if not ok:
                        raise HistoryError(
                            f"{where}: hosts.{host}.{group}[{i}].{name}: missing or not "
                            f"a {kind.__name__}"
                        )
    return hosts


def load(path: Path) -> History:
    """The history at ``path`` (empty when there is none)."""
    path = Path(path)
    if not path.exists():
        return History(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise HistoryError(f"{path}: larger than {MAX_BYTES // 2**20} MiB")
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise HistoryError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    except json.JSONDecodeError as exc:
        raise HistoryError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    return History(path, _check(data, str(path)))
