"""The lifecycle every engine with a server in a container shares, written once.

A ``ServerEngine`` starts its server with ``tunelab.host.containers`` (labels, 127.0.0.1 port,
a per-run network, a generated password that is never printed), waits until it accepts
connections, and applies a point's knobs the cheapest way their ``Knob`` declares: a new
data directory for ``fresh`` knobs (e.g. InnoDB's page size), a restart for ``restart`` knobs
(the settings file it reads at start is rewritten first), in place for the rest. In a
workflow run (``run_dir`` set) the server is kept across points: the next point whose fresh
knobs agree attaches to it instead of starting one, and a point's teardown only drops what
the point created.

An engine module keeps only what is its own: the container spec, the driver's connect,
its settings file, in-place changes, DDL, counters and the cold procedure.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
import re
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from tunelab.engines import readahead
from tunelab.engines.base import VERSION_KNOB, Engine, EngineError
from tunelab.engines.builds import Builds
from tunelab.engines.images import ensure_image, version_refusal
from tunelab.engines.knob_rules import KnobRules
from tunelab.host import blockdev, containers, noise

DEVICE_DIR = "device"  # below a server's home: its os_read_ahead device's file and record


def host_dir(run_dir: Path) -> Path:
    """This host's part of a run's directory, where its kept servers' homes live. A work
    directory shared by several hosts (a cluster) keeps one record per host: a point attaches
    only to a server that this host's Docker runs, and never wipes another host's data."""
    host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "host"
    return Path(run_dir) / "hosts" / host


def _unwinding() -> BaseException | None:
    """The interrupt (Ctrl-C, SIGTERM) being handled right now, if any: a connection asked
    for while it unwinds (a teardown) gets one short try, so the interrupt is not hidden
    behind a connection error many seconds later."""
    exc = sys.exc_info()[1]
    while exc is not None and not isinstance(exc, KeyboardInterrupt | SystemExit):
        exc = exc.__context__
    return exc


def connect_with_retry(
    open_once: Callable[[float], Any],
    retry_on: tuple[type[BaseException], ...],
    what: str,
    deadline_s: float,
    pause_s: float = 0.2,
) -> Any:
    """``open_once(timeout_s)`` until it succeeds, retrying the driver's "not yet" errors
    until ``deadline_s`` has passed; EngineError names ``what`` and the last error."""
    unwinding = _unwinding()
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return open_once(2 if unwinding else 10)
        except retry_on as exc:
            if unwinding is not None:
                raise unwinding from None
            if time.monotonic() > deadline:
                text = " ".join(str(exc.args[-1] if exc.args else exc).split())
                raise EngineError(f"{what}: cannot connect: {text[:300]}") from None
            time.sleep(pause_s)


class ServerBuilds(Builds):
    """Tables kept on the run's server across its points (``run_dir`` set): a table stays
    kept while no point has written to it since it was built, and is forgotten before its
    rebuild starts, so a half-built table is never reused. The record (``kept``) lives in the
    server's home, for the next point that attaches to the server."""

    engine: ServerEngine

    def __init__(self, engine: ServerEngine):
        super().__init__(engine)
        self.kept: dict[str, str] = {}  # table -> key of the build kept for later points

    @property
    def file(self) -> Path:
        return self.engine.home / "tables.json"

    def save(self) -> None:
        if self.engine.run_dir is None:
            return
        tmp = self.file.with_name(".tables.json.tmp")
        tmp.write_text(json.dumps(self.kept, sort_keys=True))
        tmp.replace(self.file)

    def read(self) -> None:
        """The record of the server a point attaches to."""
        self.kept = json.loads(self.file.read_text()) if self.file.exists() else {}

    def clear(self) -> None:
        """Nothing kept (e.g. a new data directory holds no table)."""
        self.kept = {}
        self.save()

    def reuse(self, table: str, key: str, changes: bool = True) -> bool:
        # Kept only when no point has written to it since it was built (keep).
        if self.engine.run_dir is None or self.kept.get(table) != key:
            return False
        self.engine.tables.add(table)
        return True

    def forget(self, table: str) -> None:
        if self.kept.pop(table, None) is not None:
            self.save()  # before the rebuild starts: a half-built table is never reused

    def keep(self, table: str, key: str, changes: bool) -> None:
        if self.engine.run_dir is None or changes:
            return
        self.kept[table] = key  # not dropped at the point's end
        self.save()


class ServerKnobRules(KnobRules):
    """The knob rules every engine with a server in a container shares: a version runs only
    where its image is or can be built, and ``os_read_ahead`` needs a device of its own."""

    def version_refusal(self, version: str) -> str | None:
        assert self.info.image is not None
        return version_refusal(self.info.name, self.info.image, version)

    def host_refusals(self, knobs: dict[str, Any]) -> list[tuple[str, str]]:
        if readahead.NAME not in self.info.knobs:
            return []
        return readahead.refusals(self.info.name, knobs)


class ServerEngine(Engine):
    """An engine whose server runs in a container (see the module's docstring)."""

    builds_class: ClassVar[type[Builds]] = ServerBuilds
    builds: ServerBuilds
    # Where the engine has a standby (``sync_mode``): its part, a subclass of
    # ``tunelab.engines.standby.Standby``, created as ``self.replica``.
    standby_class: ClassVar[Callable[[ServerEngine], Any] | None] = None
    port: int  # the engine's port inside the container
    connect_deadline_s: float = 15  # how long a started server may refuse connections
    connect_pause_s: float = 0.2  # between two tries

    def __init__(self, workdir: Path, run_id: str):
        super().__init__(workdir, run_id)
        # The runner gives each point <points>/<point id>/engine; the label names the point.
        self.point_id = (
            self.workdir.parent.name if self.workdir.name == "engine" else (self.workdir.name)
        )
        self.image: str | None = None
        self.container: containers.RunningContainer | None = None
        self.password = containers.generate_password()
        self.home = self.workdir / f"{self.info.name}-data" / secrets.token_hex(4)
        self._admin_conn: Any = None
        self.tables: set[str] = set()  # the point's tables (those not kept: dropped at its end)
        self._pid: int | None = None  # the container's first process, looked up once per start
        self._pid_of: tuple[str, int] | None = None
        self.disk: readahead.LabDisk | None = None  # the data directory's device (os_read_ahead)
        if self.standby_class is not None:
            self.replica = self.standby_class(self)

    @classmethod
    def preflight(cls) -> None:
        reason = containers.docker_unavailable_reason()
        if reason:
            raise EngineError(f"{cls.info.name} runs in a container: {reason}")

    # -- what each engine says -------------------------------------------------------------
    @abc.abstractmethod
    def container_spec(self) -> containers.ContainerSpec:
        """Image, environment, volumes (below ``self.home``) and readiness of the server."""

    @abc.abstractmethod
    def open_connection(self, database: str | None, autocommit: bool, timeout_s: float) -> Any:
        """One driver connection over TCP to the published port (no retry here)."""

    def placed_spec(self) -> containers.ContainerSpec:
        """The container spec with the engine's CPUs of the placement (if any) as its cpuset."""
        spec = self.container_spec()
        spec.cpuset = self.placement.engine_cpuset if self.placement is not None else None
        return spec

    def pids(self) -> list[int]:
        """The container's first process and its descendants, as far as this host's /proc
        shows them (its threads' ``children`` lists); [] when the container's processes are
        in a PID namespace this process cannot see."""
        if self.container is None:
            return []
        if self._pid_of != (self.container.id, self.starts) or not noise.alive(self._pid):
            self._pid, self._pid_of = self.container.host_pid(), (self.container.id, self.starts)
        if self._pid is None or not noise.in_cgroup_of(self._pid, self.container.id):
            return []
        return noise.descendants(self._pid)

    def cpu_columns(self) -> dict[str, str]:
        if self.container is None:
            return {"cpus_engine": "", "client_route": ""}
        return {"cpus_engine": self.container.cpuset, "client_route": self.container.client_route}

    #: The driver's errors that mean "not accepting connections yet".
    connect_errors: tuple[type[BaseException], ...] = (OSError,)
    database: str | None = None  # the lab's database (``after_start`` may create it)
    admin_database: str | None = None  # where the admin connection goes (it may predate it)

    def write_settings(self, knobs: dict[str, Any]) -> None:
        """Write the settings file the server reads at start (before a start or restart, and
        for in-place changes too, so that a later restart keeps them)."""

    def apply_in_place(self, knobs: dict[str, Any], changed: set[str]) -> None:
        """Apply knobs that need no restart on the running server."""

    def after_start(self) -> None:
        """Once per new server (fresh data directory), once it accepts connections: e.g.
        create the lab's database."""

    def prepare_point(self, knobs: dict[str, Any]) -> None:
        """Every point, after its knobs are applied (e.g. a per-point pool and table space)."""

    def release_point(self) -> None:
        """What a point leaves on a kept server is dropped here (default: its tables but those
        kept for later points)."""
        for table in sorted(self.tables - set(self.builds.kept)):
            self.admin_execute(self.drop_table_sql(table))

    def drop_table_sql(self, table: str) -> str:
        return f"DROP TABLE IF EXISTS {table}"

    def wipe_home(self) -> None:
        """Remove the server's files on the host (the lab runs as root, or owns them); first
        its data directory's device, if it has one (the container is gone by now)."""
        self.disk = None
        try:
            blockdev.release(self.home / DEVICE_DIR)
        except blockdev.BlockDeviceError as exc:
            raise EngineError(
                f"{self.info.name}: removing its {readahead.NAME} device: {exc}"
            ) from None
        shutil.rmtree(self.home, ignore_errors=True)

    # -- the data directory on a device of its own (os_read_ahead) ---------------------------
    @property
    def data_mount(self) -> Path:
        """The host directory mounted as the server's data directory."""
        return self.home / "datadir"

    def _new_disk(self) -> readahead.LabDisk:
        return readahead.LabDisk(
            self.info.name, self.home / DEVICE_DIR, self.data_mount, readahead.SERVER_BYTES
        )

    def disk_applied(self) -> dict[str, Any]:
        """``os_read_ahead`` as the kernel has it, and how it was applied ({}: no device)."""
        return self.disk.applied() if self.disk is not None else {}

    def disk_counters(self) -> dict[str, float]:
        """The device's read requests, bytes and milliseconds ({}: no device)."""
        return self.disk.counters() if self.disk is not None else {}

    def image_tag(self, knobs: dict[str, Any] | None = None) -> str:
        """The image of the engine's version the knobs ask (``engine_version``; else its
        default), built first where the lab builds it."""
        version = (knobs or {}).get(VERSION_KNOB)
        return ensure_image(
            self.info.name, self.info.image, version=None if version is None else str(version)
        )

    # -- the lifecycle ----------------------------------------------------------------------
    def keep_key(self, knobs: dict[str, Any]) -> str:
        """Points of a run whose fresh knobs agree share one server (and data directory)."""
        fresh, _ = self.info.server_order(knobs)
        key = hashlib.sha1(fresh.encode()).hexdigest()[:10]
        # Its data directory on a device of its own, or on the host's disk: another server.
        return key + "d" if readahead.wanted(knobs) else key

    def provision(self, knobs: dict[str, Any]) -> None:
        full = self.knob_rules.full_knobs(knobs)
        if self.run_dir is not None and self.container is None:
            self._attach_kept(full)
        changed = {k for k in full if full[k] != self.knobs.get(k)}
        moved = readahead.wanted(full) != (self.disk is not None)  # onto a device, or off it
        if self.container is None or changed & self.info.fresh_knobs or moved:
            self._start_fresh(full)
        elif changed & self.info.restart_knobs or readahead.NAME in changed:
            if self.disk is not None:
                self.disk.apply(full[readahead.NAME])
            self.write_settings(full)
            # A file keeps the read-ahead it was opened with: a new value needs the server to
            # open its files anew (a cold repetition restarts it anyway).
            self.restart()
        else:
            self.write_settings(full)
            self.apply_in_place(full, changed)
        self.knobs = full
        self.prepare_point(full)

    def _attach_kept(self, full: dict[str, Any]) -> None:
        """Reuse the server an earlier point of the run kept for these fresh knobs (its last
        knobs are read back from its home), or set up this point's home to keep."""
        assert self.run_dir is not None
        key = self.keep_key(full)
        self.home = host_dir(self.run_dir) / f"{self.info.name}-{key}"
        self.password = containers.run_secret(self.run_dir)
        self.image = self.image or self.image_tag(full)
        found = containers.attach(self.placed_spec(), self.run_id, key)
        disk = self._new_disk() if readahead.wanted(full) else None
        if (
            found is not None
            and (self.home / "knobs.json").exists()
            and (disk is None or disk.reopen())
        ):
            self.container, self.disk = found, disk
            self.knobs = json.loads((self.home / "knobs.json").read_text())
            self.tables.clear()
            self.builds.read()
            return
        containers.remove_kept(self.run_id)  # one kept server per run at a time
        self.wipe_home()

    def _start_fresh(self, full: dict[str, Any]) -> None:
        self.remove_container()
        self.wipe_home()
        self.home.mkdir(parents=True, exist_ok=True)
        if readahead.wanted(full):
            self.disk = self._new_disk()
            self.disk.create()  # mounted where the data directory goes, before the server
            self.disk.apply(full[readahead.NAME])  # before the server opens any file
        self.write_settings(full)
        try:
            self.image = self.image or self.image_tag(full)
            keep = self.keep_key(full) if self.run_dir is not None else None
            self.container = containers.start(
                self.placed_spec(),
                self.run_id,
                self.point_id,
                keep_key=keep,
                run_dir=self.run_dir,
            )
        except containers.ContainerError as exc:
            raise EngineError(f"{self.info.name} did not start: {exc}") from None
        self.starts += 1
        self.tables.clear()
        self.builds.clear()  # a new data directory holds no table
        self.wait_connectable()
        self.after_start()

    def restart(self) -> None:
        """Restart the server in its container (a cold start, or new restart knobs)."""
        assert self.container is not None
        self.close_admin()
        try:
            self.container.restart()
        except containers.ContainerError as exc:
            raise EngineError(f"{self.info.name} did not restart: {exc}") from None
        self.starts += 1
        self.wait_connectable()

    def wait_connectable(self) -> None:
        """Return once the server accepts connections (the readiness log line may come from
        an init server, or before the port is open)."""
        self.admin()

    def remove_container(self) -> None:
        self.close_admin()
        if self.container is not None:
            self.container.remove()
            self.container = None

    def teardown(self) -> None:
        if self.run_dir is not None and self.container is not None:
            try:
                self.release_point()
                (self.home / "knobs.json").write_text(json.dumps(self.knobs))
                self.close_admin()
                return
            except Exception:
                pass  # a server in an unknown state is not kept: removed below
        try:
            self.remove_container()
        finally:
            self.wipe_home()

    # -- connections --------------------------------------------------------------------------
    def connection(self, database: str | None, autocommit: bool) -> Any:
        if self.container is None:
            raise EngineError(f"{self.info.name}: not provisioned")
        return connect_with_retry(
            lambda timeout: self.open_connection(database, autocommit, timeout),
            self.connect_errors,
            self.info.name,
            self.connect_deadline_s,
            self.connect_pause_s,
        )

    def connect(self) -> Any:
        return self.connection(self.database, autocommit=False)

    def admin(self) -> Any:
        """A private autocommit connection for settings, DDL and counters."""
        if self._admin_conn is None:
            self._admin_conn = self.connection(self.admin_database, autocommit=True)
        return self._admin_conn

    def close_admin(self) -> None:
        if self._admin_conn is not None:
            with contextlib.suppress(Exception):  # the server may already be gone
                self._admin_conn.close()
            self._admin_conn = None

    def admin_query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        cur = self.admin().cursor()
        cur.execute(sql, tuple(args) or None)
        rows = [tuple(r) for r in cur.fetchall()] if cur.description else []
        cur.close()
        return rows

    def admin_execute(self, sql: str, args: Sequence[Any] = ()) -> None:
        cur = self.admin().cursor()
        cur.execute(sql, tuple(args) or None)
        cur.close()
