"""The run-to-run noise of a point on a host, for `tunelab compare`.

Two estimates, both a bound on the log scale (``h``: the ratio moves within
[exp(-h), exp(h)] by noise alone; printed as ±(exp(h) - 1)):

- **In the run.** The width of the central 80 % of the point's values within one run, on the
  log scale (log of the 90th over the 10th percentile), the wider of the two sides. A run's
  median can land anywhere among the values the host gives that point within a run: where
  the host's state lasts minutes (a slower disk or CPU for a while, values in two clusters),
  two runs' medians differ by up to that width with nothing changed, far more than the
  values' half-width would allow. Empirical percentiles, not a normal's: robust to a few
  disturbed repetitions (under 10 %) and right for two clusters. Rows that carry ``round``
  were measured one repetition per round spread over the run, so this spread includes the
  host's drift across the run; rows without it were measured back to back and their spread
  hides that drift (``source`` says which).
- **Between runs.** A point can move from one run to the next by more than its in-run width:
  a run's state (the point's engine opened anew, a server start, the device that day) can
  last the whole run. In eight A/A comparisons of this lab's default packs (SQLite 4,
  MariaDB 2, PostgreSQL 2), 3-6 % of the points moved beyond their in-run width, by up to
  0.073, 0.060 and 0.117 on the log scale, while the median point moved less than 3 %. So
  the in-run width gets an allowance added, the ``excess``: the largest amount by which a
  point's change between two runs of one commit passed its in-run width on this host, pooled
  over every point of the engine in the floor file (one A/A comparison gives one observation
  per point); until the host has ``MIN_EXCESS_POINTS`` of them (about three comparisons of a
  pack, so that the largest is not that of a few dozen), ``DEFAULT_EXCESS``, the largest
  seen above.
- **A/A floor.** Earlier comparisons of two runs of one commit on one host, kept in a small
  JSON file (``FloorFile``): per host, point and metric the last ``KEEP`` observed
  |log(ratio of medians)| (and the point's in-run width then); the floor is the largest of
  them.

- **CPU speed.** Where times are compared at one CPU speed (``analysis.hostspeed``), how far
  the model puts the CPU speeds of the two runs apart (``hostspeed.shift``): a host whose CPU
  ran slower through one run's measuring of a sweep moves that sweep's CPU-bound points by
  about that much, and the correction does not take all of it out.

The floor is the larger of (in run + between runs + CPU speed) and the A/A floor.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from tunelab import atomic

# The central share of a run's values whose width is the in-run noise.
IN_RUN_CENTRAL = 0.80
ROUNDS, REPETITIONS = "rounds", "repetitions"
FLOOR_NAME = "noise-floor.json"
FORMAT = 1
KEEP = 5  # observations kept per host, point and metric: the most recent
# The between-run allowance (log scale) until a host has its own: the largest excess of a
# point's A/A change over its in-run width in this lab's packs (docs/measurement.md, "Compare
# knows the host's noise"). Counters (physical reads) are counts, not times.
DEFAULT_EXCESS = {"elapsed_s": 0.12, "throughput_rows_s": 0.12}
MIN_EXCESS_POINTS = 200  # A/A observations of an engine on a host before its own counts
MAX_BYTES = 32 * 2**20
ABOUT = (
    "A/A noise floor of tunelab compare: per host, point and metric, the |log(NEW/OLD ratio of "
    "medians)| observed between two runs of one commit on that host (the last "
    f"{KEEP}); the floor is the largest."
)


class NoiseFloorError(ValueError):
    """A floor file that cannot be used; the message is one line ``file: field: message``."""


def percent(h: float) -> str:
    """A log half-width as "±6 %"."""
    if not math.isfinite(h):
        return "n/a"
    value = 100 * math.expm1(h)
    return f"±{value:.0f} %" if value >= 9.5 else f"±{value:.1f} %".replace(".0 %", " %")


def in_run(old: np.ndarray, new: np.ndarray) -> float:
    """Width (log scale) of the central ``IN_RUN_CENTRAL`` of the point's values within a
    run, the wider side; NaN when neither side has two positive values (counters that
    stayed at 0)."""
    tail = (1 - IN_RUN_CENTRAL) / 2
    widths = []
    for side in (old, new):
        side = np.asarray(side, dtype=float)
        side = side[np.isfinite(side)]
        if side.size < 2 or not np.median(side) > 0:
            continue
        low, high = np.quantile(side, [tail, 1 - tail])
        # a 0 among positive values: as wide as can be
        widths.append(math.log(high / low) if low > 0 else math.inf)
    return max(widths, default=float("nan"))


@dataclass(frozen=True)
class Noise:
    """A point's noise for one metric: the in-run estimate and its source, the A/A floor and
    how many observations it rests on, and the multiplier the flag rule applies."""

    in_run: float
    source: str  # ROUNDS or REPETITIONS
    aa: float = float("nan")
    aa_count: int = 0
    multiplier: float = 1.0
    excess: float = 0.0  # the between-run allowance added to the in-run width
    excess_count: int = 0  # A/A observations it rests on; 0: the default
    count_floor: float = 0.0  # a counter's medians must differ by this much (COUNT_FLOOR)
    host: float = 0.0  # how far the CPU speed moved between the runs (hostspeed.shift)

    @property
    def floor(self) -> float:
        """The larger of (in run + between runs + the host's CPU speed change) and the A/A
        floor (0 when neither is known)."""
        known = [h for h in (self.in_run + self.excess + self.host, self.aa) if math.isfinite(h)]
        return max(known, default=0.0)

    @property
    def bar(self) -> float:
        """|log ratio| a change must pass to be told from noise."""
        return self.multiplier * self.floor

    def text(self) -> str:
        """ "noise ±6 % (rounds) + 7.8 % between runs (default) / ±4 % (A/A, 3 comparisons)"."""
        out = f"noise {percent(self.in_run)} ({self.source})"
        if self.excess > 0 and math.isfinite(self.in_run):
            where = f"this host's A/A, {self.excess_count}" if self.excess_count else "default"
            out += f" + {percent(self.excess)[1:]} between runs ({where})"
        if self.host >= 0.005 and math.isfinite(self.in_run):
            out += f" + {percent(self.host)[1:]} CPU speed"
        if self.aa_count:
            s = "s" if self.aa_count > 1 else ""
            out += f" / {percent(self.aa)} (A/A, {self.aa_count} comparison{s})"
        if self.multiplier != 1:
            out += f" ×{self.multiplier:g}"
        if self.count_floor:
            out += f", at least {self.count_floor:g} apart"
        return out


def run_fingerprint(started: Iterable[object], elapsed: Iterable[float]) -> str:
    """Names one run of a point (its repetitions' start times and times): a run compared with a
    copy of itself is no A/A observation, and the same pair recorded twice counts once."""
    text = json.dumps([sorted(map(str, started)), sorted(float(x) for x in elapsed)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def observation(
    ratio: float, commit: str, runs: tuple[str, str], n: tuple[int, int], source: str,
    old: str, new: str, when: datetime | None = None, in_run_width: float = float("nan"),
) -> dict:  # fmt: skip
    when = when or datetime.now(UTC)
    extra = {"in_run": round(in_run_width, 6)} if math.isfinite(in_run_width) else {}
    return {
        **extra,
        "abs_log_ratio": round(abs(math.log(ratio)), 6),
        "ratio": round(ratio, 6),
        "commit": commit,
        "runs": list(runs),
        "n": list(n),
        "rows": source,
        "old": old,
        "new": new,
        "recorded": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


@dataclass
class FloorFile:
    """The A/A observations: {host: {"engine/sweep/point": {metric: [observation, ...]}}}."""

    path: Path
    hosts: dict[str, dict[str, dict[str, list[dict]]]] = field(default_factory=dict)
    changed: bool = False

    def observations(self, host: str, point: str, metric: str) -> list[dict]:
        return self.hosts.get(host, {}).get(point, {}).get(metric, [])

    def floor(self, host: str, point: str, metric: str) -> tuple[float, int]:
        """(largest kept |log ratio|, how many observations), (NaN, 0) when none."""
        kept = self.observations(host, point, metric)
        if not kept:
            return float("nan"), 0
        return max(o["abs_log_ratio"] for o in kept), len(kept)

    def excess(self, host: str, engine: str, metric: str) -> tuple[float, int]:
        """(the between-run allowance, how many observations it rests on) for ``engine``'s
        points on ``host``: the largest amount by which an A/A change passed the point's
        in-run width; the default, with 0, until there are ``MIN_EXCESS_POINTS``."""
        seen = [
            max(0.0, o["abs_log_ratio"] - o["in_run"])
            for point, metrics in self.hosts.get(host, {}).items()
            if point.split("/", 1)[0] == engine
            for o in metrics.get(metric, [])
            if isinstance(o.get("in_run"), int | float) and math.isfinite(o["in_run"])
        ]
        if len(seen) < MIN_EXCESS_POINTS:
            return DEFAULT_EXCESS.get(metric, 0.0), 0
        return max(seen), len(seen)

    def add(self, host: str, point: str, metric: str, obs: dict) -> bool:
        """Keep ``obs`` unless the same pair of runs is there already; the last ``KEEP``
        by time of recording stay. True when it was added."""
        kept = self.hosts.setdefault(host, {}).setdefault(point, {}).setdefault(metric, [])
        pair = sorted(obs["runs"])
        if any(sorted(o["runs"]) == pair for o in kept):
            return False
        kept.append(obs)
        kept.sort(key=lambda o: o["recorded"])
        del kept[:-KEEP]
        self.changed = True
        return obs in kept

    def merge(self, other: FloorFile) -> None:
        """Take in another file's observations (a floor carried by OLD's results)."""
        for host, points in other.hosts.items():
            for point, metrics in points.items():
                for metric, kept in metrics.items():
                    for obs in kept:
                        self.add(host, point, metric, obs)

    def count(self) -> int:
        return sum(len(k) for p in self.hosts.values() for m in p.values() for k in m.values())

    def save(self) -> Path:
        data = {"format": FORMAT, "about": ABOUT, "keep": KEEP, "hosts": self.hosts}
        text = json.dumps(data, indent=1, sort_keys=True) + "\n"
        return atomic.write_bytes(self.path, text.encode())


def _key(name: str) -> str:
    return json.dumps(name)


def _check_observation(obs: object, where: str) -> None:
    if not isinstance(obs, dict):
        raise ValueError(f"{where}: must be a mapping")
    value = obs.get("abs_log_ratio")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}.abs_log_ratio: must be a number")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{where}.abs_log_ratio: must be finite and >= 0, not {value!r}")
    width = obs.get("in_run", 0.0)
    if isinstance(width, bool) or not isinstance(width, int | float) or not width >= 0:
        raise ValueError(f"{where}.in_run: must be a number >= 0, not {width!r}")
    runs = obs.get("runs")
    if not (isinstance(runs, list) and len(runs) == 2 and all(isinstance(r, str) for r in runs)):
        raise ValueError(f"{where}.runs: must be a list of two run names")
    if not isinstance(obs.get("recorded"), str):
        raise ValueError(f"{where}.recorded: must be a UTC time as text")


def _check(data: object) -> dict:
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object with format and hosts")
    if data.get("format") != FORMAT:
        raise ValueError(f"format: must be {FORMAT}, not {data.get('format')!r}")
    hosts = data.get("hosts")
    if not isinstance(hosts, dict):
        raise ValueError("hosts: must be a mapping of host names")
    for host, points in hosts.items():
        where = f"hosts[{_key(host)}]"
        if not isinstance(points, dict):
            raise ValueError(f"{where}: must be a mapping of points")
        for point, metrics in points.items():
            at = f"{where}[{_key(point)}]"
            if not isinstance(metrics, dict):
                raise ValueError(f"{at}: must be a mapping of metrics")
            for metric, kept in metrics.items():
                here = f"{at}[{_key(metric)}]"
                if not isinstance(kept, list):
                    raise ValueError(f"{here}: must be a list of observations")
                for i, obs in enumerate(kept):
                    _check_observation(obs, f"{here}[{i}]")
    return hosts


def load(path: Path) -> FloorFile:
    """The floor file at ``path``; an empty one when it does not exist yet."""
    path = Path(path)
    if not path.exists():
        return FloorFile(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise NoiseFloorError(f"{path}: larger than {MAX_BYTES // 2**20} MiB")
        data = json.loads(path.read_bytes())
    except NoiseFloorError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else f"not readable JSON ({exc})"
        raise NoiseFloorError(f"{path}: {reason}") from None
    try:
        hosts = _check(data)
    except ValueError as exc:
        raise NoiseFloorError(f"{path}: {exc}") from None
    return FloorFile(path, hosts)
