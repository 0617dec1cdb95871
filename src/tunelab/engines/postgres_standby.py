"""A streaming standby for the PostgreSQL engine, for the ``sync_mode`` and
``network_rtt_ms`` knobs: the primary's commits wait for it as ``synchronous_commit`` says.

The standby is a second container of the point's server, from the same image, labelled and
reaped like the primary (kept with it across a run's points, under the primary's key plus
``-standby``: ``tunelab.engines.standby``, which the MariaDB replica shares); it is
``PostgresStandby``, the part ``PostgresEngine`` holds as its ``replica``. It runs in the
host's network namespace and listens on no TCP port: it is a client of the primary's port,
which the lab publishes on 127.0.0.1 only, so replication never leaves the host's loopback.
Between the two runs the lab's delay proxy (``tunelab.host.delayproxy``, a child process of the
measuring process, on the engine's CPUs): its one-way delay is half of ``network_rtt_ms``
(0: the proxy's own hop only, tens of microseconds a round trip). The standby is made with
``pg_basebackup`` straight from the primary's port (no delay for the copy), then streams
through the proxy; the primary names it in ``synchronous_standby_names`` only once it
streams, so no commit waits for a standby that is not there.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

from tunelab.engines.base import EngineError
from tunelab.engines.standby import LINK_PINGS, Standby, median_round_trip_ms
from tunelab.engines.standby import NONE as NONE  # sync_mode without a standby
from tunelab.engines.standby import wants_standby as wants_standby
from tunelab.host import containers
from tunelab.store import results

STANDBY_NAME = "tunelab_standby"  # its application_name, as synchronous_standby_names names it
DATADIR = "/var/lib/postgresql/data"
READY_LOG = r"started streaming WAL from primary"
# synchronous_commit values that wait for the standby, and what sync_state it must show.
WAITS = ("remote_write", "on", "remote_apply")
SYNC_TIMEOUT_S = 60
HBA_LINE = "host replication postgres all scram-sha-256"


def standby_spec(
    image: str,
    password: str,
    home: Path,
    primary_port: int,
    proxy_port: int,
    cpuset: str | None,
) -> containers.ContainerSpec:
    """The standby's container: base backup from the primary's port when its data directory
    is empty, then the server, streaming through the proxy's port."""
    postgres = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
    conninfo = f"host=127.0.0.1 port={proxy_port} user=postgres application_name={STANDBY_NAME}"
    backup = [
        *postgres,
        "pg_basebackup",
        "-h",
        "127.0.0.1",
        "-p",
        str(primary_port),
        "-U",
        "postgres",
        "-D",
        DATADIR,
        "-X",
        "stream",
        "-c",
        "fast",
    ]
    server = [
        *postgres,
        "postgres",
        "-D",
        DATADIR,
        "-c",
        "listen_addresses=",
        "-c",
        f"primary_conninfo={conninfo}",
        "-c",
        "wal_retrieve_retry_interval=100ms",
        "-c",
        "hot_standby=on",
    ]
    script = "; ".join(
        [
            "set -euo pipefail",
            f"mkdir -p {DATADIR} /run/postgresql",
            f"chown postgres:postgres {DATADIR} /run/postgresql",
            f"chmod 0700 {DATADIR}",
            f"if [ ! -s {DATADIR}/PG_VERSION ]; then {shlex.join(backup)}; fi",
            f"touch {DATADIR}/standby.signal",
            f"chown postgres:postgres {DATADIR}/standby.signal",
            f"exec {shlex.join(server)}",
        ]
    )
    return containers.ContainerSpec(
        image=image,
        port=0,
        # libpq (pg_basebackup, then the walreceiver) reads the password from here
        env={"PGPASSWORD": password},
        volumes={str(home / "standby"): DATADIR},
        command=["bash", "-c", script],
        ready_log=READY_LOG,
        ready_timeout_s=120,
        stop_signal="SIGINT",
        secrets=(password,),
        cpuset=cpuset,
        host_network=True,
    )


class PostgresStandby(Standby):
    """A PostgreSQL server's standby: what ``PostgresEngine`` (``engine``) calls from its
    lifecycle."""

    def start_proxy(self, rtt_ms: float) -> None:
        """The delay proxy to the primary's port, on the port the standby streams from (a new
        one for a new standby); the standby reconnects by itself."""
        assert self.engine.container is not None
        self.open_proxy(rtt_ms, self.engine.container.host_port)

    def allow_replication(self) -> None:
        """A replication connection may log in from where the published port's traffic
        arrives (the run network's gateway), as the lab's own connections do: the image's
        pg_hba.conf (the official one's too) allows only ordinary ones from there."""
        hba = self.engine.datadir / "pg_hba.conf"
        text = hba.read_text()
        if HBA_LINE not in text.splitlines():
            hba.write_text(text.rstrip("\n") + "\n" + HBA_LINE + "\n")
            self.engine.admin_query("SELECT pg_reload_conf()")

    def _spec(self, proxy_port: int) -> containers.ContainerSpec:
        engine = self.engine
        assert engine.container is not None
        return standby_spec(
            engine.image or "",
            engine.password,
            engine.home,
            engine.container.host_port,
            proxy_port,
            engine.placed_spec().cpuset,
        )

    def start_standby(self, knobs: dict[str, Any]) -> None:
        """A new standby for the running primary (its data directory made anew)."""
        assert self.engine.container is not None and self.proxy is not None
        self.allow_replication()
        spec = self._spec(self.proxy.port)
        (self.engine.home / "standby").mkdir(parents=True, exist_ok=True)
        self.launch_standby(spec, knobs)

    def attach_standby(self, knobs: dict[str, Any]) -> bool:
        """The standby kept with a kept primary; False when there is none running."""
        if self.engine.container is None:
            return False
        return self.attach_kept_standby(self._spec(0), knobs)

    def replication_state(self) -> tuple[str, str] | None:
        """(state, sync_state) of the standby as the primary sees it; None: not connected."""
        rows = self.engine.admin_query(
            "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s",
            (STANDBY_NAME,),
        )
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def wait_streaming(self, sync: bool, timeout_s: float = SYNC_TIMEOUT_S) -> None:
        """Until the standby streams (and, when the primary names it, is the synchronous
        one): after its start, a proxy's restart or the primary's."""
        deadline = time.monotonic() + timeout_s
        want = ("streaming", "sync" if sync else None)
        while True:
            state = self.replication_state()
            if state is not None and state[0] == want[0] and (want[1] in (None, state[1])):
                return
            if time.monotonic() > deadline:
                raise EngineError(
                    f"postgres: the standby is not {'in sync' if sync else 'streaming'} after "
                    f"{timeout_s:g} s (pg_stat_replication: {state or 'no standby connected'}); "
                    f"its last log lines:\n{self.standby_logs()}"
                )
            time.sleep(0.02)

    def catch_up(self, timeout_s: float = SYNC_TIMEOUT_S) -> None:
        """Until the standby has replayed every WAL record the primary has written: a table
        built just before is shipped and applied before the timed commits, not during them
        (a synchronous commit would wait for the build's WAL first)."""
        target = self.engine.admin_query("SELECT pg_current_wal_lsn()::text")[0][0]
        deadline = time.monotonic() + timeout_s
        while True:
            rows = self.engine.admin_query(
                "SELECT replay_lsn >= %s::pg_lsn, replay_lsn::text FROM pg_stat_replication "
                "WHERE application_name = %s",
                (target, STANDBY_NAME),
            )
            if rows and rows[0][0]:
                return
            if time.monotonic() > deadline:
                where = f"replayed to {rows[0][1]}" if rows else "not connected"
                raise EngineError(
                    f"postgres: the standby has not replayed the primary's WAL to {target} "
                    f"after {timeout_s:g} s ({where}); its last log lines:\n{self.standby_logs()}"
                )
            time.sleep(0.005)

    def measure_link(self, pings: int = LINK_PINGS) -> float:
        """The link's round trip in ms, as the standby's traffic has it: the median of
        ``pings`` trivial queries sent through the proxy to the primary (the proxy's two hops,
        its delays, the published port's forwarding, and the query's own few microseconds),
        after one that opens the way. IBM's procedure takes the round trip from ``ping``;
        the model's RTT is this, not the delay asked for."""
        assert self.proxy is not None
        conn = self.engine.open_admin(self.proxy.port)
        try:
            with conn.cursor() as cur:

                def ping() -> None:
                    cur.execute("SELECT 1")
                    cur.fetchall()

                return median_round_trip_ms(ping, pings)
        finally:
            conn.close()

    def replication_lags(self) -> dict[str, float]:
        """The standby's last reported lags (ms): the time from a local flush to the
        standby's write, flush and replay of that WAL, round trip included; NaN when it has
        reported none (idle)."""
        rows = self.engine.admin_query(
            "SELECT EXTRACT(EPOCH FROM write_lag) * 1000, EXTRACT(EPOCH FROM flush_lag) * 1000, "
            "EXTRACT(EPOCH FROM replay_lag) * 1000 FROM pg_stat_replication "
            "WHERE application_name = %s",
            (STANDBY_NAME,),
        )
        values = (*(rows[0] if rows else (None, None, None)), self.link_rtt_ms)
        names = results.REPLICATION_GAUGES
        return {
            n: float("nan") if v is None else float(v) for n, v in zip(names, values, strict=True)
        }
