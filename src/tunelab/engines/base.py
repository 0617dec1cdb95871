"""The one small interface every engine implements.

Workloads are written once against this interface; all engine-specific SQL lives in the
engine's own modules. A point's life: ``provision(knobs)`` → ``applied_knobs`` (the server's
knobs read back) → ``builds.build`` (``create_table`` → ``bulk_load`` → ``create_index``,
or the same table reused within a run: ``tunelab.engines.builds``) → ``layout.applied``
(index layout and lock granularity read back from the catalog and the lock tables) →
``explain`` of every timed statement → per repetition (the table rebuilt for writes) →
``make_cold`` or a warm-up → counters before → timed workload → counters after →
``teardown``. Engines that run a server in a container share that lifecycle in
``tunelab.engines.server``.

The SQL text of the timed statements is the engine's ``dialect`` (``tunelab.engines.dialect``):
``table_ref`` (the hint that forces the access path the ``index`` knob built), ``explain``
(the plan that really ran, normalised), ``bind`` (how arguments reach the optimizer),
``fetch`` (the driver's native row path, no per-row Python); the ``engine_time_ns`` counter
(the engine's own time) is here. What only some engines can do, page-reference traces and
the planned SQL of `tunelab plan --sql`, are protocols of their own
(``tunelab.engines.abilities``).
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tunelab.engines.builds import Builds
from tunelab.hadr.model import Mode
from tunelab.host.noise import Placement
from tunelab.store.dataset import Source


class EngineError(RuntimeError):
    """An engine refused or failed an operation; the message is meant for the user."""


@dataclass(frozen=True)
class Knob:
    """One tuning knob as a given engine expresses it.

    ``values`` lists the allowed values for enumerations; ``minimum``/``maximum`` bound
    numbers. ``restart`` is true when changing the knob needs the engine restarted (e.g. a
    pool sized at start), ``fresh`` when it needs a new data directory (e.g. a page size
    fixed when the files are created); neither: it is applied in place. ``readback`` says
    where the engine reads the applied value back from (shown by `tunelab engines`).
    """

    name: str
    type: str  # "integer" | "number" | "string" | "boolean"
    meaning: str  # how this engine realises the knob, shown by `tunelab engines`
    values: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    unit: str = ""
    restart: bool = False
    fresh: bool = False
    default: Any = None
    multiple_of: int | None = None
    power_of_two: bool = False
    readback: str = ""

    def allowed_text(self) -> str:
        if self.values is not None:
            return ", ".join(str(v) for v in self.values)
        parts = []
        if self.minimum is not None and self.maximum is not None:
            parts.append(f"{self.type} {_num(self.minimum)}..{_num(self.maximum)}")
        elif self.minimum is not None:
            parts.append(f"{self.type} >= {_num(self.minimum)}")
        else:
            parts.append(self.type)
        if self.power_of_two:
            parts.append("a power of two")
        if self.multiple_of:
            parts.append(f"a multiple of {self.multiple_of}")
        if self.unit:
            parts.append(f"in {self.unit}")
        return ", ".join(parts)

    def check(self, value: Any) -> str | None:
        """Return an error message if ``value`` is not allowed, else None."""
        if self.values is not None:
            return None if value in self.values else "not allowed"
        if self.type == "boolean":
            return None if isinstance(value, bool) else "must be true or false"
        if self.type in ("integer", "number"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"must be a{'n integer' if self.type == 'integer' else ' number'}"
            if self.type == "integer" and not isinstance(value, int):  # 1000.0 too: a count
                return "must be an integer"
            if self.minimum is not None and value < self.minimum:
                return "out of range"
            if self.maximum is not None and value > self.maximum:
                return "out of range"
            if self.power_of_two and (int(value) <= 0 or int(value) & (int(value) - 1)):
                return "must be a power of two"
            if self.multiple_of and int(value) % self.multiple_of:
                return f"must be a multiple of {self.multiple_of}"
        return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass
class CacheState:
    """What a cold/warm preparation achieved (not what was asked)."""

    requested: str  # "cold" | "warm"
    achieved: str  # "cold" | "warm" | "partial"
    method: str  # e.g. "restart+drop_caches", "close+fadvise"
    resident_pages_after: int | None = None  # OS page-cache pages of the data files
    total_pages: int | None = None

    @property
    def resident_fraction(self) -> float | None:
        if self.resident_pages_after is None or not self.total_pages:
            return None
        return self.resident_pages_after / self.total_pages


@dataclass
class IndexPlan:
    """Which index a point builds, derived from the ``index`` knob and the workload."""

    kind: str  # none | nonclustered | clustered | covering | covering_wrong_order | primary
    key: tuple[str, ...] = ()  # the predicate column(s)
    include: tuple[str, ...] = ()  # extra columns for covering indexes


ACCESS_MODES = ("optimizer", "forced")
# Distinct argument sets whose plans a point explains (a plan may depend on them); here, not
# in the workloads, because an engine's planned SQL names it too.
EXPLAIN_MAX = 20
# The alias of a batched look-up's key list (``Dialect.key_join``): each engine's plan
# normaliser leaves that list's own access out of the path, as it reads no table.
KEYS_ALIAS = "k"


@dataclass(frozen=True)
class AccessPath:
    """A timed statement's plan: ``path`` normalised as ``scan`` (full table scan),
    ``index:<name>`` (an index, then the table), ``index-only:<name>`` (a covering index),
    ``insert`` (no read access), with engine detail after a ``;``; ``raw`` as the engine
    printed it."""

    path: str
    raw: str

    @property
    def base(self) -> str:
        return self.path.split(";", 1)[0].strip()


@dataclass(frozen=True)
class ImageVersion:
    """A version of a container engine the lab can run: the Debian release whose own package
    it is (the build script builds it from there) and the official image of it, pinned."""

    version: str  # as a sweep names it (the knob ``engine_version``): "15", "10.11"
    suite: str  # the Debian release that packages it
    official: str | None = None


@dataclass(frozen=True)
class ImageSource:
    """Where a container engine's image comes from: the official image, pinned by tag, when
    the local Docker engine has it, else the image ``containers/<engine>/build.sh`` builds.
    ``versions``: the versions it can build, the default (the one ``official`` and ``local``
    are) first; empty: the one version only."""

    official: str | None  # pinned tag of the official image
    local: str | None  # tag the local build script produces (a stable alias)
    build_script: str | None  # relative to containers/
    versions: tuple[ImageVersion, ...] = ()

    def version(self, name: str) -> ImageVersion:
        """The declared version ``name``; KeyError names the allowed ones."""
        for v in self.versions:
            if v.version == name:
                return v
        raise KeyError(f"{name} (allowed: {', '.join(v.version for v in self.versions)})")


# The knob that picks which of an engine's versions (ImageSource.versions) a point runs.
VERSION_KNOB = "engine_version"


def version_text(value: Any) -> Any:
    """A version as a sweep wrote it (15, 10.11, "17") as the text the engine declares it
    in; anything else as it is, for the knob's check to refuse."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    return str(value).strip()


def version_knob(image: ImageSource, meaning: str) -> Knob:
    """The ``engine_version`` knob of an engine whose image comes in several versions: each
    version a server of its own (fresh), read back from the server's own version string."""
    return Knob(
        VERSION_KNOB,
        "string",
        meaning,
        values=tuple(v.version for v in image.versions),
        fresh=True,
        readback="the server's version string: its number must be the version "
        "asked or a release of it (17.12 for 17)",
    )


def version_applied(info: EngineInfo, number: str) -> str:
    """The declared version a server's version ``number`` (17.12, 10.11.19) is a release of,
    else the number itself (a point that asked another version then fails its check)."""
    versions = info.image.versions if info.image is not None else ()
    for v in versions:
        if number == v.version or number.startswith(v.version + "."):
            return v.version
    return number


@dataclass(frozen=True)
class ReadCounter:
    """What the engine's ``physical_reads`` counter counts. ``source``: the engine's own
    counter(s) behind it and what each counts, for the report's I/O section. ``direct_knob``:
    the boolean knob under which the engine reads its files past the OS page cache (direct
    I/O), so that every read it counts reached the device; "" when its reads always go
    through the OS, which may serve them from its page cache: then they are reads from the
    OS, not physical reads."""

    source: str = ""
    direct_knob: str = ""


@dataclass
class EngineInfo:
    """What an engine is and can do, declared (never discovered by probing methods)."""

    name: str
    summary: str
    knobs: dict[str, Knob]
    notes: dict[str, str] = field(default_factory=dict)  # knob -> why it is refused/limited
    needs_container: bool = False
    image: ImageSource | None = None  # container engines whose image the lab finds or builds
    # Which `access:` values the engine honours: 'forced' needs hints that pin the plan.
    access_modes: tuple[str, ...] = ACCESS_MODES
    # Where engine_time_ns comes from ("" when the engine exposes no statement time).
    engine_time: str = ""
    traces: bool = False  # it provides abilities.PageTraces (page-reference traces, for bpsim)
    # The steps make_cold names in its cache method ("+"-joined) besides tunelab.host.cache's
    # (cache.EVICT_STEPS), each in the words of a report's methods section.
    cold_steps: dict[str, str] = field(default_factory=dict)
    # How a cold read reaches the device here (the kernel's read-ahead, the engine's own), in
    # the words of a report's methods section.
    cold_reads: str = ""
    reads: ReadCounter = field(default_factory=ReadCounter)

    def reads_reach_device(self, knobs: dict[str, Any]) -> bool:
        """Whether every read ``physical_reads`` counts reached the device under ``knobs``
        (as applied; one not given takes its default)."""
        name = self.reads.direct_knob
        if not name:
            return False
        value = knobs.get(name, self.knobs[name].default)
        return str(value).strip().lower() in ("true", "1", "1.0")

    def defaults(self) -> dict[str, Any]:
        return {k: v.default for k, v in self.knobs.items() if v.default is not None}

    @property
    def restart_knobs(self) -> frozenset[str]:
        return frozenset(k for k, v in self.knobs.items() if v.restart or v.fresh)

    @property
    def fresh_knobs(self) -> frozenset[str]:
        return frozenset(k for k, v in self.knobs.items() if v.fresh)

    def server_order(self, knobs: dict[str, Any]) -> tuple[str, str]:
        """A sort key under which points that can share a server (same fresh knobs) come
        together, and within those, points that need no restart between them (same restart
        knobs): a run in this order starts a server once per fresh-knob combination and
        restarts it once per restart-knob combination (cold repetitions aside)."""
        fresh = {k: knobs.get(k) for k in sorted(self.fresh_knobs)}
        restart = {k: knobs.get(k) for k in sorted(self.restart_knobs - self.fresh_knobs)}
        return json.dumps(fresh, default=str), json.dumps(restart, default=str)


class Engine(abc.ABC):
    """One database engine. Instances are single-use: one point, then ``teardown``."""

    info: EngineInfo
    # The engine's dialect (a ``tunelab.engines.dialect.Dialect`` made with the engine): the
    # SQL text of its timed statements. Each engine's SQL module has its own.
    dialect_class: ClassVar[Callable[[Engine], Any]]
    # What a point's knobs may be here (``engines.knob_rules.KnobRules``, built with ``info``):
    # a class attribute, as the sweep validator asks it before any engine exists.
    knob_rules: ClassVar[Any]
    # The read-back of the built table's index layout and lock granularity
    # (``engines.layout.Layout`` or the engine's own subclass), created as ``self.layout``.
    layout_class: ClassVar[type]
    # The driver's exceptions that mean the engine's files met a full disk (or quota): the
    # CLI then says "disk full" and where, as for an OSError ENOSPC, not an engine failure.
    full_errors: tuple[type[BaseException], ...] = ()
    # The engine's replication modes (setting value -> what its commit waits for), for the
    # HADR calculator (`tunelab hadr-calc --engine`, docs/hadr.md); empty: none modelled.
    replication: ClassVar[dict[str, Mode]] = {}
    # The setting (a key of ``replication``) whose commit waits for the local flush alone while
    # a standby runs: the log-shipping report predicts the others from its measured time.
    # None: the engine has none.
    replication_baseline: ClassVar[str | None] = None
    # What the engine keeps of the tables it builds (``Engine.builds``): by default, nothing.
    builds_class: ClassVar[type[Builds]] = Builds

    def __init__(self, workdir: Path, run_id: str):
        self.workdir = Path(workdir)
        self.run_id = run_id
        self.knobs: dict[str, Any] = {}
        self.starts = 0  # how many engine starts this point needed
        # When set (by the runner, for a workflow run), a server engine may keep its server
        # running here across the points of the run, restarting only when a knob needs it.
        self.run_dir: Path | None = None
        # When set (by the runner), the CPUs the engine's own processes run on, apart from the
        # client's (``noise.plan_cpus``); None: wherever the host puts them.
        self.placement: Placement | None = None
        self.builds = self.builds_class(self)  # the point's table, built once and reused
        self.dialect = self.dialect_class(self)
        self.layout = self.layout_class(self)

    @classmethod
    def preflight(cls) -> None:
        """Raise EngineError, before anything starts, if this host cannot run the engine."""

    # -- processes and CPUs ------------------------------------------------------------------
    def pids(self) -> list[int]:
        """The host's PIDs of the engine's own processes, for counting what preempted them;
        [] for an engine that runs in the client's process."""
        return []

    def cpu_columns(self) -> dict[str, str]:
        """``cpus_engine``: the CPUs the engine's processes may run on, as applied ("client":
        it runs in the measuring process, on the client's CPUs); ``client_route``: how the
        client reaches the engine."""
        return {"cpus_engine": "client", "client_route": "in process"}

    # -- lifecycle -------------------------------------------------------------------
    @abc.abstractmethod
    def provision(self, knobs: dict[str, Any]) -> None:
        """Start (or create) the engine with these knobs applied."""

    @abc.abstractmethod
    def connect(self) -> Any:
        """A new DB-API connection, autocommit off."""

    @abc.abstractmethod
    def teardown(self) -> None:
        """Stop the engine and remove what it started, in every outcome."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    # -- schema and data ---------------------------------------------------------------
    @abc.abstractmethod
    def create_table(self, table: str, index: IndexPlan) -> None:
        """Create the accounts-like table (dropping any old one) with the physical layout
        the index plan needs (e.g. clustered on the key)."""

    @abc.abstractmethod
    def create_index(self, table: str, index: IndexPlan) -> None:
        """Build the secondary structures of the plan after the load (no-op for none)."""

    def bulk_load(self, table: str, source: Source) -> None:
        """Load the data set the engine's fastest way (its bulk path: a file the server or
        the driver reads whole); by default, its dialect's ``load`` of the rows."""
        self.dialect.load(table, source.rows)

    # -- cache and counters --------------------------------------------------------------
    def settle(self) -> None:
        """Wait for the background work that earlier statements left (a purge of old row
        versions), so that it runs before a warm point's warm-up, not in its timed
        repetitions. Engines with no such work leave it empty."""

    @abc.abstractmethod
    def make_cold(self) -> CacheState:
        """Empty the engine's pool and evict its data files from the OS page cache,
        then check residency. Every connection must be closed before calling."""

    @abc.abstractmethod
    def counters(self, conns: Sequence[Any]) -> dict[str, float]:
        """Cumulative engine counters (take deltas around the timed section). Where the
        engine exposes it, ``engine_time_ns`` is its own time for the statements run on
        ``conns`` (the runner reports it as engine_elapsed_s beside the client's clock)."""

    def gauges(self) -> dict[str, float]:
        """Engine state right after a timed section, recorded as read (not as a delta):
        e.g. a standby's replication lags."""
        return {}

    @abc.abstractmethod
    def applied_knobs(self) -> dict[str, Any]:
        """Read the server's knobs back from the running engine (stored and checked); the
        table's knobs come from ``layout.applied`` once the table is built."""

    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def data_files(self) -> list[Path]:
        """Host paths of the files that hold the table's data (for eviction/residency)."""

    def data_bytes(self, table: str) -> int | None:
        """Bytes of table (and index) pages, for MB/s figures; None if unknown."""
        return None
