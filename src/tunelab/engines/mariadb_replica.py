"""A replica for the MariaDB engine, for the ``sync_mode`` and ``network_rtt_ms`` knobs: the
primary's binary log shipped to a second server, with MariaDB's semi-synchronous replication
(built into the server since 10.3: no plugin) or without it.

``sync_mode``: ``none`` (no replica, no binary log: the default), ``async`` (a replica, no
semi-sync: the commit never waits for it), ``AFTER_COMMIT`` or ``AFTER_SYNC`` (semi-sync, and
``rpl_semi_sync_master_wait_point`` that value: the commit waits for one replica's receipt of
its events, after the binary log's sync, after or before the storage engine's commit).

The replica is a second container of the point's image on the run's own network, labelled and
reaped like the primary and kept with it across a run's points (``tunelab.engines.standby``,
shared with PostgreSQL's standby), its client port published on 127.0.0.1 only, like the
primary's, so the lab reads it back. The run's network keeps containers from reaching each
other (enable_icc off), so the replica reaches the primary through the host: the lab's delay
proxy listens on the network's gateway and forwards to the primary's published port, holding
every byte half of ``network_rtt_ms`` each way (0: the proxy's own hops only). No replication
traffic leaves the run's network and the host's loopback.

The primary has a binary log (``log_bin``, ``binlog_format=ROW``, ``sync_binlog=1``: the log
a commit waits on is on disk before the replica is asked, as a durable semi-sync set-up has
it) and ``server_id`` 1; the replica ``server_id`` 2, a relay log, ``read_only`` and
``rpl_semi_sync_slave_enabled``. A new replica starts empty (the lab's database made on it)
and replicates from the primary's binary log position at that moment (GTID:
``gtid_slave_pos`` set to the primary's ``gtid_binlog_pos``, ``MASTER_USE_GTID = slave_pos``);
tables the primary kept from earlier points are forgotten, so they are built again through the
binary log. Semi-sync is switched on at the primary only once the replica runs, so no commit
waits for a replica that is not there; ``rpl_semi_sync_master_timeout`` is 30 s, far above any
round trip swept, and a point whose commits fell back to asynchronous replication meanwhile
(``Rpl_semi_sync_master_status`` OFF, ``Rpl_semi_sync_master_no_tx`` or ``_no_times`` grown)
fails. The replication login is a user of its own with REPLICATION SLAVE only, made with the
binary log off for the statement, its password the run's generated one, never printed.

Every statement is a pure function here, checked offline (tests/test_mariadb_replica.py);
``MariaDBReplica``, the part ``MariaDBEngine`` holds as its ``replica``, runs them.
"""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunelab.engines.base import EngineError
from tunelab.engines.server import ServerEngine
from tunelab.engines.standby import LINK_PINGS, Standby, median_round_trip_ms
from tunelab.engines.standby import NONE as NONE  # sync_mode without a replica
from tunelab.engines.standby import rtt_needs_standby as rtt_needs_standby
from tunelab.engines.standby import wants_standby as wants_standby
from tunelab.host import containers

ASYNC = "async"  # a replica, no semi-sync
WAIT_POINTS = ("AFTER_COMMIT", "AFTER_SYNC")  # rpl_semi_sync_master_wait_point, as spelt
MODES = (NONE, ASYNC, *WAIT_POINTS)
PRIMARY_ID, REPLICA_ID = 1, 2
REPL_USER = "tunelab_repl"
BINLOG = "mariadb-bin"  # the primary's binary log, in its data directory
RELAY_LOG = "replica-relay-bin"
SEMISYNC_TIMEOUT_MS = 30_000
CONNECT_RETRY_S = 1  # the replica's reconnect interval (MariaDB's default: 60 s)
READY_TIMEOUT_S = 60
RENEGOTIATE_AFTER_S = 3  # semi-sync not ON by then: the replica's I/O thread reconnects once
CATCH_UP_TIMEOUT_S = 120
REPLICA_DIR = "replica"  # <home>/replica: the replica's data directory and option file

# SHOW GLOBAL STATUS on the primary: cumulative, recorded as deltas over a timed section
# (c_ columns) where the point has a replica.
SEMISYNC_COUNTERS = {
    "Rpl_semi_sync_master_yes_tx": "mariadb_semisync_yes_tx",
    "Rpl_semi_sync_master_no_tx": "mariadb_semisync_no_tx",
    "Rpl_semi_sync_master_tx_waits": "mariadb_semisync_tx_waits",
    "Rpl_semi_sync_master_tx_wait_time": "mariadb_semisync_tx_wait_time_us",
    "Rpl_semi_sync_master_net_waits": "mariadb_semisync_net_waits",
    "Rpl_semi_sync_master_net_wait_time": "mariadb_semisync_net_wait_time_us",
}
# ... and as read right after it (gauges): the state, and MariaDB's own averages.
SEMISYNC_GAUGES = {
    "Rpl_semi_sync_master_status": "mariadb_semisync_status",  # ON 1, OFF 0
    "Rpl_semi_sync_master_clients": "mariadb_semisync_clients",
    "Rpl_semi_sync_master_yes_tx": "mariadb_semisync_yes_tx",
    "Rpl_semi_sync_master_no_tx": "mariadb_semisync_no_tx",
    "Rpl_semi_sync_master_no_times": "mariadb_semisync_no_times",
    "Rpl_semi_sync_master_net_avg_wait_time": "mariadb_semisync_net_avg_wait_us",
    "Rpl_semi_sync_master_tx_avg_wait_time": "mariadb_semisync_tx_avg_wait_us",
}
# SHOW SLAVE STATUS on the replica, as read after a timed section.
REPLICA_GAUGES = {
    "Slave_IO_Running": "mariadb_replica_io_running",  # Yes 1, else 0
    "Slave_SQL_Running": "mariadb_replica_sql_running",
    "Seconds_Behind_Master": "mariadb_replica_seconds_behind_master",  # NULL: NaN
}
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def semisync(knobs: dict[str, Any]) -> bool:
    return knobs.get("sync_mode") in WAIT_POINTS


# -- option files ----------------------------------------------------------------------------
def primary_options(knobs: dict[str, Any], replica_runs: bool) -> dict[str, str]:
    """The primary's option-file lines for a point with a replica ({} without one). Semi-sync
    is on in the file only once the replica runs (``replica_runs``): a restart then keeps it."""
    if not wants_standby(knobs):
        return {}
    opts = {
        "server_id": str(PRIMARY_ID),
        "log_bin": BINLOG,
        "binlog_format": "ROW",
        "sync_binlog": "1",
        "rpl_semi_sync_master_timeout": str(SEMISYNC_TIMEOUT_MS),
        "rpl_semi_sync_master_wait_no_slave": "ON",
        "rpl_semi_sync_master_enabled": "OFF",
    }
    if replica_runs and semisync(knobs):
        opts["rpl_semi_sync_master_enabled"] = "ON"
        opts["rpl_semi_sync_master_wait_point"] = str(knobs["sync_mode"])
    return opts


def replica_options() -> dict[str, str]:
    return {
        "server_id": str(REPLICA_ID),
        "relay_log": RELAY_LOG,
        "rpl_semi_sync_slave_enabled": "ON",
        "read_only": "ON",
    }


def option_text(options: dict[str, str]) -> str:
    return "\n".join(["[mariadbd]", *(f"{k} = {v}" for k, v in options.items())]) + "\n"


# -- statements ------------------------------------------------------------------------------
def user_sql() -> list[tuple[str, bool]]:
    """On the primary, the replication login, kept out of the binary log: (statement, whether
    it takes the password as its one argument; a literal % is then written %%)."""
    user = f"'{REPL_USER}'@'%%'"
    return [
        ("SET SESSION sql_log_bin = 0", False),
        (f"CREATE USER IF NOT EXISTS {user} IDENTIFIED BY %s", True),
        (f"ALTER USER {user} IDENTIFIED BY %s", True),
        (f"GRANT REPLICATION SLAVE ON *.* TO '{REPL_USER}'@'%'", False),
        ("SET SESSION sql_log_bin = 1", False),
    ]


def change_master_sql(host: str, port: int) -> str:
    """On the replica: where the primary is (the proxy), as whom, and from which position (its
    ``gtid_slave_pos``). The password is the statement's one argument."""
    if not _IPV4.match(host):
        raise EngineError(f"mariadb: the replica's primary must be an IPv4 address, not {host!r}")
    return _change_master(f"'{host}'", str(int(port)))


def _change_master(host: str, port: str) -> str:
    return (
        f"CHANGE MASTER TO MASTER_HOST = {host}, MASTER_PORT = {port}, "
        f"MASTER_USER = '{REPL_USER}', MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos, "
        f"MASTER_CONNECT_RETRY = {CONNECT_RETRY_S}"
    )


def replica_setup_sql(database: str) -> list[str]:
    """On a new (empty) replica, before CHANGE MASTER: the lab's database, and the position
    (the statement's argument: the primary's ``gtid_binlog_pos``) it starts from."""
    return [
        f"CREATE DATABASE IF NOT EXISTS {database}",
        "SET GLOBAL gtid_slave_pos = %s",
    ]


def mode_sql(knobs: dict[str, Any]) -> list[str]:
    """On the primary: semi-sync as the point's sync_mode has it (in place)."""
    if not semisync(knobs):
        return ["SET GLOBAL rpl_semi_sync_master_enabled = OFF"]
    return [
        f"SET GLOBAL rpl_semi_sync_master_timeout = {SEMISYNC_TIMEOUT_MS}",
        "SET GLOBAL rpl_semi_sync_master_wait_no_slave = ON",
        f"SET GLOBAL rpl_semi_sync_master_wait_point = {knobs['sync_mode']}",
        "SET GLOBAL rpl_semi_sync_master_enabled = ON",
    ]


def catch_up_sql() -> str:
    """On the replica: wait until it has applied the primary's ``gtid_binlog_pos`` (the
    first argument), at most the second's seconds; 0 once it has, -1 after the timeout."""
    return "SELECT MASTER_GTID_WAIT(%s, %s) AS applied"


def planned_sql(knobs: dict[str, Any], database: str) -> list[str]:
    """What a point with a replica runs for it, for `tunelab plan --sql` (the password and
    the positions shown as placeholders)."""
    if not wants_standby(knobs):
        return []
    opts = " ".join(f"--{k}={v}" for k, v in replica_options().items())
    secret = "'<the run's generated password>'"
    out = [
        f"-- a replica: a second container of the image on the run's network, {opts}; a delay "
        f"proxy on the network's gateway to the primary's published port, "
        f"{knobs.get('network_rtt_ms', 0)} ms round trip",
        *(
            sql.replace("%s", secret).replace("%%", "%") + "  -- on the primary"
            for sql, _ in user_sql()
        ),
        "SELECT @@GLOBAL.gtid_binlog_pos  -- on the primary: where the new replica starts",
        *(
            sql.replace("%s", "'<that position>'") + "  -- on the replica"
            for sql in replica_setup_sql(database)
        ),
        _change_master("'<the gateway>'", "<the proxy's port>").replace("%s", secret)
        + "  -- on the replica",
        "START SLAVE  -- on the replica",
        *(f"{sql}  -- on the primary, once the replica replicates" for sql in mode_sql(knobs)),
        catch_up_sql()
        .replace("%s", "'<the primary's gtid_binlog_pos>'", 1)
        .replace("%s", str(CATCH_UP_TIMEOUT_S))
        + "  -- on the replica, before each warm-up or cold start",
    ]
    return out


# -- reading the state back ----------------------------------------------------------------------
def _number(value: Any) -> float:
    if value is None:
        return math.nan
    text = str(value)
    if text in ("ON", "Yes"):
        return 1.0
    if text in ("OFF", "No", "Connecting", "Preparing"):
        return 0.0
    try:
        return float(text)
    except ValueError:
        return math.nan


def semisync_gauges(status: dict[str, Any]) -> dict[str, float]:
    return {name: _number(status.get(var)) for var, name in SEMISYNC_GAUGES.items()}


def replica_gauges(slave: dict[str, Any]) -> dict[str, float]:
    return {name: _number(slave.get(col)) for col, name in REPLICA_GAUGES.items()}


def replica_running(slave: dict[str, Any]) -> bool:
    return slave.get("Slave_IO_Running") == "Yes" and slave.get("Slave_SQL_Running") == "Yes"


def slave_text(slave: dict[str, Any]) -> str:
    if not slave:
        return "SHOW SLAVE STATUS shows no primary"
    keys = (
        "Slave_IO_Running",
        "Slave_SQL_Running",
        "Slave_IO_State",
        "Last_IO_Error",
        "Last_SQL_Error",
    )
    return ", ".join(f"{k} {slave.get(k)!r}" for k in keys if slave.get(k) not in (None, ""))


def semisync_ready(status: dict[str, Any]) -> bool:
    """The primary waits for its one replica: semi-sync ON with one client."""
    return (
        status.get("Rpl_semi_sync_master_status") == "ON"
        and _number(status.get("Rpl_semi_sync_master_clients")) == 1
    )


def fallback(mark: dict[str, Any], status: dict[str, Any]) -> str | None:
    """Why the primary's commits did not all wait for the replica since ``mark`` (the status
    when the point was set up), or None: semi-sync OFF, or commits or switches to
    asynchronous replication counted."""
    problems = []
    if status.get("Rpl_semi_sync_master_status") != "ON":
        problems.append(f"Rpl_semi_sync_master_status {status.get('Rpl_semi_sync_master_status')}")
    for var in ("Rpl_semi_sync_master_no_tx", "Rpl_semi_sync_master_no_times"):
        grown = _number(status.get(var)) - _number(mark.get(var))
        if not grown <= 0:
            problems.append(f"{var} +{grown:g}")
    return ", ".join(problems) or None


def applied(
    variables: dict[str, str], status: dict[str, str], slave: dict[str, Any], network_rtt_ms: Any
) -> dict[str, Any]:
    """sync_mode as the primary has it ("none" without a binary log; the wait point when
    semi-sync is on, else "async"), network_rtt_ms as the proxy holds it, and what the two
    servers say beside them as mariadb_*. EngineError when the replica does not run, or
    semi-sync is on without its one client."""
    if variables.get("log_bin") != "ON":
        return {"sync_mode": NONE, "network_rtt_ms": 0}
    if not replica_running(slave):
        raise EngineError(f"mariadb: the replica does not replicate ({slave_text(slave)})")
    on = variables.get("rpl_semi_sync_master_enabled") == "ON"
    if on and not semisync_ready(status):
        raise EngineError(
            "mariadb: semi-sync is enabled but the primary does not wait for its replica "
            f"(Rpl_semi_sync_master_status {status.get('Rpl_semi_sync_master_status')}, "
            f"Rpl_semi_sync_master_clients {status.get('Rpl_semi_sync_master_clients')})"
        )
    return {
        "sync_mode": variables.get("rpl_semi_sync_master_wait_point") if on else ASYNC,
        "network_rtt_ms": network_rtt_ms,
        "mariadb_binlog_format": variables.get("binlog_format"),
        "mariadb_sync_binlog": variables.get("sync_binlog"),
        "mariadb_rpl_semi_sync_master_timeout": variables.get("rpl_semi_sync_master_timeout"),
        "mariadb_semisync_status": status.get("Rpl_semi_sync_master_status"),
        "mariadb_semisync_clients": status.get("Rpl_semi_sync_master_clients"),
        "mariadb_replica_semisync_status": slave.get("_semisync_slave_status"),
        "mariadb_replica_using_gtid": slave.get("Using_Gtid"),
    }


def replica_spec(primary: containers.ContainerSpec, home: Path) -> containers.ContainerSpec:
    """The replica's container: the primary's image, environment (the root password),
    command, readiness and CPUs, on the run's network, its client port published on 127.0.0.1;
    its own data directory and option file below ``<home>/replica``."""
    return dataclasses.replace(
        primary,
        volumes={
            str(home / REPLICA_DIR / Path(host).name): inside
            for host, inside in primary.volumes.items()
        },
    )


# -- the replica at run time ------------------------------------------------------------------
class MariaDBReplica(Standby):
    """A MariaDB server's replica: what ``MariaDBEngine`` (``engine``) calls from its
    lifecycle."""

    def __init__(self, engine: ServerEngine):
        super().__init__(engine)
        self._semisync_mark: dict[str, Any] | None = None  # the primary's status once set

    @property
    def replica_home(self) -> Path:
        return self.engine.home / REPLICA_DIR

    def _replica_spec(self) -> containers.ContainerSpec:
        return replica_spec(self.engine.placed_spec(), self.engine.home)

    # -- the two servers' state -------------------------------------------------------------
    def _guarded(self, what: str, run: Callable[[], Any]) -> Any:
        """``run()``, a driver error turned into one line without the password."""
        import MySQLdb

        try:
            return run()
        except MySQLdb.Error as exc:
            text = containers.scrub(" ".join(str(exc).split()), (self.engine.password,))
            raise EngineError(f"mariadb: {what}: {text}") from None

    def replica_query(self, sql: str, args: Any = ()) -> list[dict[str, Any]]:
        """Rows as dicts from a new connection to the replica's published port."""
        assert self.container is not None
        conn = self.engine.connection_at(self.container.host_port)
        try:
            cur = conn.cursor()
            cur.execute(sql, tuple(args) or None)
            names = [d[0] for d in cur.description] if cur.description else []
            rows = [dict(zip(names, r)) for r in cur.fetchall()] if names else []
            cur.close()
            return rows
        finally:
            conn.close()

    def slave_status(self) -> dict[str, Any]:
        """The replica's SHOW SLAVE STATUS, and its Rpl_semi_sync_slave_status beside it."""
        rows = self.replica_query("SHOW SLAVE STATUS")
        if not rows:
            return {}
        status = self.replica_query("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_slave_status'")
        return {**rows[0], "_semisync_slave_status": status[0]["Value"] if status else None}

    def semisync_status(self) -> dict[str, str]:
        return {
            str(k): str(v)
            for k, v in self.engine.admin_query("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_%'")
        }

    def _variable(self, name: str) -> str:
        rows = self.engine.admin_query("SHOW GLOBAL VARIABLES WHERE Variable_name = %s", (name,))
        return str(rows[0][1]) if rows else ""

    # -- set-up ----------------------------------------------------------------------------------
    def ensure_replica(self, knobs: dict[str, Any]) -> None:
        """The replica of these knobs replicating, semi-sync as the mode says: made anew, or
        the kept one (the mode changed in place; the proxy's delay too, or a new proxy on
        the replica's port)."""
        rtt = float(knobs["network_rtt_ms"])
        if self.container is None and not self.attach_kept_standby(self._replica_spec(), knobs):
            self.make_replica(knobs, rtt)
        elif (self.proxy is None or self.proxy.delay_ms != rtt / 2) and not (
            self.proxy_in_place(rtt, self.engine.container.host_port, listen_host=self._gateway())
        ):
            # The replica reconnects at once to the new proxy, on the port it knows.
            self._guarded(
                "STOP SLAVE IO_THREAD", lambda: self.replica_query("STOP SLAVE IO_THREAD")
            )
            self._open_link(rtt)
            self._guarded(
                "START SLAVE IO_THREAD", lambda: self.replica_query("START SLAVE IO_THREAD")
            )
        self.apply_mode(knobs)
        self.wait_replica()
        self.link_rtt_ms = self.measure_link()

    def _gateway(self) -> str:
        """Where the replica's traffic to the proxy arrives: the run network's gateway."""
        gateway = str(self.saved_link().get("gateway") or "")
        if not gateway:
            try:
                gateway = containers.network_gateway(self.engine.run_id)
            except containers.ContainerError as exc:
                raise EngineError(f"mariadb: {exc}") from None
            self.save_link(gateway=gateway)
        return gateway

    def _open_link(self, rtt_ms: float) -> None:
        assert self.engine.container is not None
        self.open_proxy(rtt_ms, self.engine.container.host_port, listen_host=self._gateway())

    def make_replica(self, knobs: dict[str, Any], rtt: float) -> None:
        """A new replica: the replication login and the position on the primary, the replica's
        container, the proxy, then CHANGE MASTER and START SLAVE on the replica."""

        assert self.engine.container is not None
        shutil.rmtree(self.replica_home, ignore_errors=True)
        self.forget_link()
        for sub in ("datadir", "conf"):
            (self.replica_home / sub).mkdir(parents=True, exist_ok=True)
        (self.replica_home / "conf" / "knobs.cnf").write_text(option_text(replica_options()))
        # The primary's tables from earlier points are not on the new replica: built again.
        if self.engine.builds.kept:
            self.engine.builds.clear()
        for sql, takes_password in user_sql():
            args = (self.engine.password,) if takes_password else ()
            self._guarded(
                "the replication login",
                lambda sql=sql, args=args: self.engine.admin_execute(sql, args),
            )
        position = self._variable("gtid_binlog_pos")
        self.launch_standby(self._replica_spec(), knobs)
        self._open_link(rtt)
        assert self.proxy is not None
        gateway = str(self.saved_link()["gateway"])
        setup = replica_setup_sql(self.engine.database or "")
        for sql in setup:
            args = (position,) if "%s" in sql else ()
            self._guarded(
                f"the replica's {sql.split(' =')[0]}",
                lambda sql=sql, args=args: self.replica_query(sql, args),
            )
        self._guarded(
            "CHANGE MASTER",
            lambda: self.replica_query(
                change_master_sql(gateway, self.proxy.port), (self.engine.password,)
            ),
        )
        self._guarded("START SLAVE", lambda: self.replica_query("START SLAVE"))

    def apply_mode(self, knobs: dict[str, Any]) -> None:
        """Semi-sync on the primary as ``sync_mode`` says, in place and in its option file."""
        for sql in mode_sql(knobs):
            self.engine.admin_execute(sql)
        self.engine.write_settings(knobs)

    def wait_replica(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until the replica's I/O and SQL threads run and, where the primary has semi-sync on,
        the primary waits for it (ON, one client): after its start, a proxy's restart, a mode
        change or the primary's restart. Where semi-sync is not ON a few seconds after the
        replica connected, its I/O thread reconnects once (the primary counts a semi-sync
        client as its dump starts)."""
        deadline = time.monotonic() + timeout_s
        began = time.monotonic()
        renegotiated = False
        on = self._variable("rpl_semi_sync_master_enabled") == "ON"
        while True:
            slave = self.slave_status()
            status = self.semisync_status()
            if replica_running(slave) and (not on or semisync_ready(status)):
                self._semisync_mark = status
                return
            if time.monotonic() > deadline:
                raise EngineError(
                    f"mariadb: the replica is not {'in semi-sync' if on else 'replicating'} "
                    f"after {timeout_s:g} s ({slave_text(slave)}; Rpl_semi_sync_master_status "
                    f"{status.get('Rpl_semi_sync_master_status')}, clients "
                    f"{status.get('Rpl_semi_sync_master_clients')}); its last log lines:\n"
                    f"{self.standby_logs()}"
                )
            if (
                on
                and not renegotiated
                and replica_running(slave)
                and time.monotonic() - began > RENEGOTIATE_AFTER_S
            ):
                self.replica_query("STOP SLAVE IO_THREAD")
                self.replica_query("START SLAVE IO_THREAD")
                renegotiated = True
            time.sleep(0.05)

    def catch_up(self, timeout_s: float = CATCH_UP_TIMEOUT_S) -> None:
        """Until the replica has applied everything the primary's binary log holds (its SQL
        thread idle before a timed section)."""
        position = self._variable("gtid_binlog_pos")
        rows = self.replica_query(catch_up_sql(), (position, int(timeout_s)))
        if not rows or rows[0]["applied"] != 0:
            raise EngineError(
                f"mariadb: the replica has not applied {position!r} after "
                f"{timeout_s:g} s ({slave_text(self.slave_status())})"
            )

    def measure_link(self, pings: int = LINK_PINGS) -> float:
        """The link's round trip in ms, as the replica's traffic has it: the median of
        ``pings`` ``SELECT 1`` sent through the proxy (on the gateway) to the primary, after
        one that opens the way; the proxy's hops and the published port's forwarding count."""
        assert self.proxy is not None
        gateway = str(self.saved_link()["gateway"])
        conn = self.engine.connection_at(self.proxy.port, host=gateway)
        try:
            cur = conn.cursor()

            def ping() -> None:
                cur.execute("SELECT 1")
                cur.fetchall()

            return median_round_trip_ms(ping, pings)
        finally:
            conn.close()

    # -- reading back ------------------------------------------------------------------------
    def applied_replication(self) -> dict[str, Any]:
        names = (
            "log_bin",
            "binlog_format",
            "sync_binlog",
            "rpl_semi_sync_master_enabled",
            "rpl_semi_sync_master_wait_point",
            "rpl_semi_sync_master_timeout",
        )
        marks = ", ".join(["%s"] * len(names))
        variables = {
            str(k): str(v)
            for k, v in self.engine.admin_query(
                f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", names
            )
        }
        if variables.get("log_bin") != "ON":
            return applied(variables, {}, {}, 0)
        if self.container is None:
            raise EngineError("mariadb: the primary has a binary log but no replica")
        rtt = 2 * self.proxy.delay_ms if self.proxy is not None else None
        return applied(variables, self.semisync_status(), self.slave_status(), rtt)

    def replication_gauges(self) -> dict[str, float]:
        """The two servers right after a timed section; EngineError when the primary's commits
        fell back to asynchronous replication during it (semi-sync modes)."""
        status = self.semisync_status()
        slave = self.slave_status()
        if self._variable("rpl_semi_sync_master_enabled") == "ON":
            problem = fallback(self._semisync_mark or status, status)
            if problem is not None:
                raise EngineError(
                    "mariadb: commits did not all wait for the replica (semi-sync fell back to "
                    f"asynchronous replication: {problem}); the replica: {slave_text(slave)}; "
                    f"its last log lines:\n{self.standby_logs()}"
                )
        return {**semisync_gauges(status), **replica_gauges(slave), "link_rtt_ms": self.link_rtt_ms}

    def semisync_counters(self) -> dict[str, float]:
        status = self.semisync_status()
        return {name: _number(status.get(var)) for var, name in SEMISYNC_COUNTERS.items()}
