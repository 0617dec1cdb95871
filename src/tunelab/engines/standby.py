"""What every server engine with a standby shares, whatever the engine: the standby's container
beside the primary's, and the delay proxy between the two (``sync_mode``, ``network_rtt_ms``).

The standby is a second container of the point's server, labelled and reaped like the primary
and kept with it across a run's points under the primary's key plus ``-standby``. The delay
proxy (``tunelab.host.delayproxy``) is a child process of the measuring process, on the engine's
CPUs of the point's placement; its port is kept in the server's home (``standby.json``), so
a later point (another process) starts its own proxy on the port the standby already uses.
Within one process (a sweep measured in rounds) a kept server's proxy is kept too, and the
next point at another round trip changes its delay in place: the standby stays connected,
where a new proxy made it reconnect at every move between points.
The round trip of the link is measured through the proxy when a point is set up
(``link_rtt_ms``: the median of trivial queries to the primary, after one that opens the
way).

All of it is ``Standby``, a part the engine holds (``ServerEngine.standby_class``, created as
the engine's ``replica``), not a base of the engine's class: it reads the engine's state
(its container, home, run and placement) through ``engine``. Each engine module subclasses it
with what is its own: how the standby is made, what the primary waits for, and how both are
read back (``postgres_standby``, ``mariadb_replica``, ``db2_hadr``: Db2's HADR has a second
proxy, to the standby, and starts its proxies anew at each point instead of parking them).
"""

from __future__ import annotations

import atexit
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunelab.engines.base import EngineError
from tunelab.host import containers, delayproxy

if TYPE_CHECKING:
    from tunelab.engines.server import ServerEngine

NONE = "none"  # sync_mode without a standby
KEY_SUFFIX = "-standby"
# Round trips timed through the proxy at each move to a point: where the points of a block
# interleave, every repetition; the report takes the median over the point's rows.
LINK_PINGS = 7
LINK_FILE = "standby.json"
# Proxies of kept servers between two points of this process, by (listen host, port).
_PARKED: dict[tuple[str, int], delayproxy.Proxy] = {}


def stop_parked() -> None:
    """The parked proxies end (at this process's end: a later process's point starts its own
    on the same port, which must be free by then)."""
    while _PARKED:
        _PARKED.popitem()[1].stop()


def wants_standby(knobs: dict[str, Any]) -> bool:
    return knobs.get("sync_mode", NONE) != NONE


def rtt_needs_standby(knobs: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The cross-knob rule of every engine with a standby: a round trip needs one."""
    rtt = knobs.get("network_rtt_ms") or 0
    if rtt and not wants_standby(knobs):
        return [
            (
                "network_rtt_ms",
                f"{rtt} ms needs a standby: sync_mode is none",
                "0, or a sync_mode other than none",
            )
        ]
    return []


def median_round_trip_ms(ping: Callable[[], Any], pings: int = LINK_PINGS) -> float:
    """The median of ``pings`` calls of ``ping`` in ms, after one that opens the way."""
    times = []
    for _ in range(pings + 1):
        t0 = time.perf_counter()
        ping()
        times.append(time.perf_counter() - t0)
    times = sorted(times[1:])
    return times[len(times) // 2] * 1000


class Standby:
    """The standby's container and the delay proxy: a part of a ``ServerEngine`` with a
    standby (its ``replica``), serving ``engine``, the primary's. Each engine's subclass adds
    how its standby is made, what the primary waits for, and how both are read back."""

    def __init__(self, engine: ServerEngine):
        self.engine = engine
        self.container: containers.RunningContainer | None = None  # the standby's
        self.proxy: delayproxy.Proxy | None = None
        self.link_rtt_ms = float("nan")

    @property
    def _standby_file(self) -> Path:
        return self.engine.home / LINK_FILE

    def saved_link(self) -> dict[str, Any]:
        """What the server's home keeps of the link ({} when it has no standby)."""
        if not self._standby_file.exists():
            return {}
        return dict(json.loads(self._standby_file.read_text()))

    def save_link(self, **values: Any) -> None:
        self.engine.home.mkdir(parents=True, exist_ok=True)
        tmp = self._standby_file.with_name(f".{LINK_FILE}.tmp")
        tmp.write_text(json.dumps({**self.saved_link(), **values}, sort_keys=True))
        tmp.replace(self._standby_file)

    def forget_link(self) -> None:
        self._standby_file.unlink(missing_ok=True)

    def _proxy_cpus(self) -> list[int]:
        placement = self.engine.placement
        cpus = getattr(placement, "engine", None) if placement is not None else None
        return list(cpus or ())

    def open_proxy(
        self,
        rtt_ms: float,
        target_port: int,
        listen_host: str = "127.0.0.1",
        target_host: str = "127.0.0.1",
    ) -> delayproxy.Proxy:
        """The delay proxy to the primary's ``target_port``, on the port the standby uses (the
        one the server's home keeps, else a free one, then kept): half of ``rtt_ms`` each way.
        The one ``proxy_in_place`` finds is kept, with its delay changed."""
        if self.proxy_in_place(rtt_ms, target_port, listen_host, target_host):
            assert self.proxy is not None
            return self.proxy
        port = int(self.saved_link().get("proxy_port", 0))
        try:
            self.proxy = delayproxy.Proxy(
                target_port,
                rtt_ms / 2,
                port,
                self._proxy_cpus(),
                listen_host=listen_host,
                target_host=target_host,
            )
        except OSError as exc:
            raise EngineError(f"{self.engine.info.name}: {exc}") from None
        self.save_link(proxy_port=self.proxy.port)
        return self.proxy

    def proxy_in_place(
        self,
        rtt_ms: float,
        target_port: int,
        listen_host: str = "127.0.0.1",
        target_host: str = "127.0.0.1",
    ) -> bool:
        """Whether this point's proxy, or the one an earlier point of this process parked for
        the server, runs between the same ends on the port the standby uses: then its delay
        is now half of ``rtt_ms`` and the standby's connection stayed up. Else none is left
        (a new one is needed, and the standby reconnects to it)."""
        port = int(self.saved_link().get("proxy_port", 0))
        if self.proxy is None and port:
            self.proxy = _PARKED.pop((listen_host, port), None)
        proxy = self.proxy
        if (
            proxy is not None
            and (proxy.listen_host, proxy.port) == (listen_host, port)
            and (proxy.target == (target_host, target_port) and proxy.alive())
        ):
            try:
                proxy.set_delay(rtt_ms / 2)
                return True
            except OSError:
                pass  # it ended meanwhile
        self.stop_proxy()
        return False

    def stop_proxy(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None

    def park_proxy(self) -> None:
        """At a point's end: the proxy of a server kept for later points waits for the next
        point of this process (see ``open_proxy``); any other ends."""
        proxy, self.proxy = self.proxy, None
        if proxy is None:
            return
        if self.engine.run_dir is None or self.engine.container is None or self.container is None:
            proxy.stop()
            return
        earlier = _PARKED.pop((proxy.listen_host, proxy.port), None)
        if earlier is not None and earlier is not proxy:
            earlier.stop()
        if not _PARKED:
            atexit.register(stop_parked)  # once is enough; a second call finds none
        _PARKED[(proxy.listen_host, proxy.port)] = proxy

    def launch_standby(self, spec: containers.ContainerSpec, knobs: dict[str, Any]) -> None:
        """Start the standby's container (kept with the primary in a run)."""
        engine = self.engine
        keep = engine.keep_key(knobs) + KEY_SUFFIX if engine.run_dir is not None else None
        try:
            self.container = containers.start(
                spec,
                engine.run_id,
                engine.point_id + KEY_SUFFIX,
                keep_key=keep,
                run_dir=engine.run_dir,
            )
        except containers.ContainerError as exc:
            raise EngineError(f"{engine.info.name}: the standby did not start: {exc}") from None

    def attach_kept_standby(self, spec: containers.ContainerSpec, knobs: dict[str, Any]) -> bool:
        """The standby kept with a kept primary; False when there is none running."""
        engine = self.engine
        if engine.container is None or not self._standby_file.exists():
            return False
        self.container = containers.attach(spec, engine.run_id, engine.keep_key(knobs) + KEY_SUFFIX)
        return self.container is not None

    def remove_standby(self) -> None:
        self.stop_proxy()
        self.link_rtt_ms = float("nan")
        if self.container is not None:
            self.container.remove()
            self.container = None

    def standby_logs(self, tail: int = 20) -> str:
        """The standby's last log lines (scrubbed of secrets), for a failed point's message."""
        return self.container.logs(tail=tail) if self.container is not None else "(no standby)"
