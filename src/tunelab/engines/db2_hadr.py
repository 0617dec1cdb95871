"""Db2 HADR for the ``sync_mode`` and ``network_rtt_ms`` knobs: a standby database whose log the
primary ships through the lab's delay proxy, in the HADR_SYNCMODE the point asks for.

The standby is a second container of the point's image on the run's own network, labelled and
reaped like the primary (kept with it across a run's points, under the primary's key plus
``-standby``), its client port published on 127.0.0.1 only, like the primary's. The run's
network keeps containers from reaching each other (enable_icc off), so the two meet through
the host: two delay proxies listen on the network's gateway address, one to the primary's HADR
port (the log channel, which the standby opens: IBM's HADR wiki, "Diagnosing HADR
Primary-Standby Connection"), one to the standby's (the primary's own connections to it); each
holds every byte half of ``network_rtt_ms``. Each database names itself as IBM's NAT support
says, its address and HADR port inside the network and, after a ``|``, where its partner
reaches it (the gateway and the proxy's port), and both set DB2_HADR_NO_IP_CHECK=ON (IBM, "HADR
and Network Address Translation (NAT) support"). No traffic leaves the run's network and the
host.

The standby is made as IBM's "Initializing HADR" procedure says: archive logging on the primary
(LOGARCHMETH1 DISK, LOGINDEXBUILD ON), an offline BACKUP DATABASE into a directory the standby
mounts, RESTORE DATABASE there (rollforward pending), both databases configured with
UPDATE DB CFG ... HADR_*, the socket buffers through DB2_HADR_SOSNDBUF / DB2_HADR_SORCVBUF,
then START HADR ... AS STANDBY and AS PRIMARY, standby first (a primary that finds no standby
within HADR_TIMEOUT does not start). Every command is a pure function here, checked offline
(tests/test_db2_hadr.py); ``HadrStandby``, the part ``DB2Engine`` holds as its ``replica``,
runs them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunelab.engines.base import EngineError
from tunelab.engines.db2_sql import DATA_MOUNT, DATABASE, INSTANCE, clp, ident
from tunelab.engines.server import ServerEngine
from tunelab.engines.standby import LINK_PINGS, Standby, median_round_trip_ms
from tunelab.engines.standby import NONE as NONE  # sync_mode without a standby
from tunelab.engines.standby import wants_standby as wants_standby
from tunelab.hadr.model import CALCULATOR_MODES
from tunelab.host import containers, delayproxy

MODES = tuple(CALCULATOR_MODES)  # HADR_SYNCMODE values: SYNC, NEARSYNC, ASYNC, SUPERASYNC
# Each database's HADR port inside its own container (never published: the proxies reach it on
# the run's network). IBM: hadr_local_svc may be neither SVCENAME (the image's 50000) nor
# SVCENAME + 1.
HADR_PORT = 50010
# IBM's tcpTuning page: the same size for send and receive on both sides, at least 64 KB; its
# WAN example settles on 512 KB. The proxy ends TCP at each hop, so the windows here span the
# loopback only and the size barely matters (docs/hadr.md, `tunelab probe network`).
SOCKET_BUFFER_BYTES = 512 * 1024
REGISTRY = {
    "DB2_HADR_SOSNDBUF": str(SOCKET_BUFFER_BYTES),
    "DB2_HADR_SORCVBUF": str(SOCKET_BUFFER_BYTES),
    "DB2_HADR_NO_IP_CHECK": "ON",  # each partner arrives from the gateway, through a proxy
}
# Fixed HADR settings, the same on both databases (a different HADR_TIMEOUT or HADR_PEER_WINDOW
# on the two is SQL1768N reason 7). Peer window 0: a lost standby never blocks the primary's
# log, the point fails its state check instead. Spool AUTOMATIC: IBM's default since 10.5.
FIXED_CFG = {"HADR_SPOOL_LIMIT": "AUTOMATIC", "HADR_PEER_WINDOW": "0", "HADR_TIMEOUT": "120"}
HADR_DIR = "hadr"  # below the data mount: the archived log and the backup the standby restores
ARCHIVE_DIR = f"{DATA_MOUNT}/{HADR_DIR}/archive"  # the same path on both (each its own mount)
BACKUP_DIR = f"{HADR_DIR}/backup"  # below the primary's data mount; the standby mounts it
STANDBY_BACKUP_MOUNT = "/hadr-backup"
STANDBY_DIR = "standby"  # <home>/standby: the standby's data mount on the host
# HADR_STATE a pair must show (with HADR_CONNECT_STATUS CONNECTED) before a point is measured:
# SUPERASYNC never enters peer state (IBM's HADR wiki, "Monitoring HADR").
READY_STATES = {
    "SYNC": ("PEER",),
    "NEARSYNC": ("PEER",),
    "ASYNC": ("PEER",),
    "SUPERASYNC": ("REMOTE_CATCHUP",),
}
READY_TIMEOUT_S = 300
# Read back from SYSPROC.MON_GET_HADR on the primary (one row per standby).
HADR_COLUMNS = (
    "HADR_ROLE",
    "HADR_SYNCMODE",
    "HADR_STATE",
    "HADR_CONNECT_STATUS",
    "HADR_LOG_GAP",
    "PRIMARY_LOG_TIME",
    "STANDBY_LOG_TIME",
    "STANDBY_REPLAY_LOG_TIME",
    "SOCK_SEND_BUF_REQUESTED",
    "SOCK_SEND_BUF_ACTUAL",
    "SOCK_RECV_BUF_REQUESTED",
    "SOCK_RECV_BUF_ACTUAL",
    "PEER_WINDOW",
    "STANDBY_SPOOL_LIMIT",
)


# -- CLP text ------------------------------------------------------------------------------------
def _db2(command: str) -> str:
    """One CLP command in a script: quoted for the shell; the script stops on an error (the
    CLP's exit status 4 or 8), not on a warning (2) or "no rows" (1)."""
    return f"db2 {shlex.quote(command)} || [ $? -lt 4 ] || exit 1"


def registry_script(variables: dict[str, str] = REGISTRY) -> str:
    """db2set of the HADR registry variables (read at the next instance start)."""
    return "; ".join(f"db2set {k}={v} || exit 1" for k, v in variables.items())


def restart_instance_script() -> str:
    # db2stop FORCE ends every application and deactivates the database: HADR registry
    # variables take effect only at an instance start (IBM's HADR wiki, "HADR Config").
    return "db2 force application all >/dev/null; db2stop force >/dev/null; db2start >/dev/null"


def _value(value: Any) -> str:
    """A configuration value; an internal|external pair in double quotes (IBM's NAT form)."""
    text = str(value)
    return f'"{text}"' if "|" in text else text


def update_cfg(database: str, settings: dict[str, Any]) -> str:
    pairs = " ".join(f"{k} {_value(v)}" for k, v in settings.items())
    return f"UPDATE DB CFG FOR {ident(database)} USING {pairs}"


def nat_pair(inside: Any, outside: Any) -> str:
    """IBM's NAT form of hadr_local_host / hadr_local_svc: the value inside the network, then
    the one the partner reaches."""
    return f"{inside}|{outside}"


def hadr_cfg(
    mode: str, local: tuple[Any, Any], remote: tuple[Any, Any], database: str = DATABASE
) -> str:
    """The HADR configuration of one database: (host, port) of itself (NAT pairs) and of its
    partner as it reaches it, the partner's instance, the mode and the fixed settings."""
    if mode not in MODES:
        raise EngineError(f"db2: HADR_SYNCMODE {mode!r} not allowed ({', '.join(MODES)})")
    return update_cfg(
        database,
        {
            "HADR_LOCAL_HOST": local[0],
            "HADR_LOCAL_SVC": local[1],
            "HADR_REMOTE_HOST": remote[0],
            "HADR_REMOTE_SVC": remote[1],
            "HADR_REMOTE_INST": INSTANCE,
            "HADR_SYNCMODE": mode,
            **FIXED_CFG,
        },
    )


def start_hadr(role: str, database: str = DATABASE) -> str:
    if role not in ("PRIMARY", "STANDBY"):
        raise EngineError(f"db2: START HADR AS {role!r}")
    return f"START HADR ON DATABASE {ident(database)} AS {role}"


@dataclass(frozen=True)
class Step:
    """One CLP script of the standby's set-up, and where it runs."""

    where: str  # "primary" | "standby"
    what: str
    script: str


@dataclass(frozen=True)
class Link:
    """Where each database is and how its partner reaches it: the containers' addresses on the
    run's network, the network's gateway, the proxies' ports there (``log``: to the primary,
    the standby's log channel; ``admin``: to the standby)."""

    primary_ip: str
    standby_ip: str
    gateway: str
    log_port: int
    admin_port: int


def setup_steps(mode: str, link: Link, database: str = DATABASE) -> list[Step]:
    """IBM's order: archive logging and an offline backup on the primary, the restore on the
    standby, both configured, HADR started on the standby, then on the primary."""
    db = ident(database)
    backup = f"{DATA_MOUNT}/{BACKUP_DIR}"
    primary = hadr_cfg(
        mode,
        (nat_pair(link.primary_ip, link.gateway), nat_pair(HADR_PORT, link.log_port)),
        (link.gateway, link.admin_port),
        db,
    )
    standby = hadr_cfg(
        mode,
        (nat_pair(link.standby_ip, link.gateway), nat_pair(HADR_PORT, link.admin_port)),
        (link.gateway, link.log_port),
        db,
    )
    archive = update_cfg(db, {"LOGARCHMETH1": f"DISK:{ARCHIVE_DIR}", "LOGINDEXBUILD": "ON"})
    restore = f"RESTORE DATABASE {db} FROM {STANDBY_BACKUP_MOUNT} WITHOUT PROMPTING"
    # A database the image may have made on the standby is dropped first, as IBM advises.
    drop = f"db2 {shlex.quote(f'DROP DATABASE {db}')} >/dev/null 2>&1"
    return [
        Step(
            "primary",
            "archive logging, HADR registry variables",
            f"mkdir -p {ARCHIVE_DIR} || exit 1; {registry_script()}; {_db2(archive)}",
        ),
        # Offline: the instance restart deactivated the database, and a switch from circular
        # to archive logging leaves it backup pending until an offline backup. The backup
        # directory is emptied, not removed: it is the standby's mount.
        Step(
            "primary",
            "offline backup",
            f"{restart_instance_script()}; rm -rf {backup}/*; "
            f"{_db2(f'BACKUP DATABASE {db} TO {backup}')}; chmod -R a+rX {backup}",
        ),
        Step(
            "standby",
            "HADR registry variables",
            f"{registry_script()}; {restart_instance_script()}",
        ),
        Step("standby", "restore", f"mkdir -p {ARCHIVE_DIR} || exit 1; {drop}; {_db2(restore)}"),
        Step("standby", "HADR configuration", _db2(standby)),
        Step("primary", "HADR configuration", _db2(primary)),
        Step("standby", "start as standby", _db2(start_hadr("STANDBY", db))),
        Step("primary", "start as primary", _db2(start_hadr("PRIMARY", db))),
    ]


def mode_steps(mode: str, database: str = DATABASE) -> list[Step]:
    """A kept pair switched to another HADR_SYNCMODE. HADR settings are read when HADR starts:
    the primary stops HADR (it stays online, a standard database), the standby is deactivated,
    reconfigured and activated (still a standby), and the primary starts HADR again."""
    if mode not in MODES:
        raise EngineError(f"db2: HADR_SYNCMODE {mode!r} not allowed ({', '.join(MODES)})")
    db = ident(database)
    cfg = _db2(update_cfg(db, {"HADR_SYNCMODE": mode}))
    standby = f"{_db2(f'DEACTIVATE DATABASE {db}')}; {cfg}; {_db2(f'ACTIVATE DATABASE {db}')}"
    return [
        Step("primary", "stop HADR", _db2(f"STOP HADR ON DATABASE {db}")),
        Step("standby", "new mode", standby),
        Step("primary", "new mode", f"{cfg}; {_db2(start_hadr('PRIMARY', db))}"),
    ]


def hadr_sql() -> str:
    return f"SELECT {', '.join(HADR_COLUMNS)} FROM TABLE(SYSPROC.MON_GET_HADR(-2)) AS H"


# -- reading MON_GET_HADR -------------------------------------------------------------------------
def _rows(rows: list[tuple]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        named = dict(zip(HADR_COLUMNS, row, strict=True))
        out.append({k: v.strip() if isinstance(v, str) else v for k, v in named.items()})
    return out


def state_text(rows: list[tuple]) -> str:
    if not rows:
        return "MON_GET_HADR shows no HADR pair"
    return "; ".join(
        f"HADR_ROLE {r['HADR_ROLE']}, HADR_SYNCMODE {r['HADR_SYNCMODE']}, "
        f"HADR_STATE {r['HADR_STATE']}, HADR_CONNECT_STATUS "
        f"{r['HADR_CONNECT_STATUS']}"
        for r in _rows(rows)
    )


def ready(rows: list[tuple], mode: str) -> bool:
    """The primary's one standby is connected in the state ``mode`` reaches."""
    named = _rows(rows)
    if len(named) != 1:
        return False
    r = named[0]
    return (
        r["HADR_ROLE"] == "PRIMARY"
        and r["HADR_SYNCMODE"] == mode
        and r["HADR_CONNECT_STATUS"] == "CONNECTED"
        and r["HADR_STATE"] in READY_STATES[mode]
    )


def _stamp(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value


def applied(rows: list[tuple], network_rtt_ms: Any) -> dict[str, Any]:
    """sync_mode as the primary has it (HADR_SYNCMODE; "none" when it is no HADR primary),
    network_rtt_ms as the proxy holds it, and what MON_GET_HADR says beside them as db2_hadr_*.
    EngineError when the pair is not in the state its mode reaches, or the socket buffers asked
    through the registry are not in effect."""
    named = _rows(rows)
    if not named or all(r["HADR_ROLE"] == "STANDARD" for r in named):
        return {"sync_mode": NONE, "network_rtt_ms": 0}
    if len(named) != 1:
        raise EngineError(f"db2: MON_GET_HADR shows {len(named)} standbys, the lab makes one")
    r = named[0]
    if r["HADR_ROLE"] != "PRIMARY":
        raise EngineError(f"db2: the lab's database has HADR_ROLE {r['HADR_ROLE']}, not PRIMARY")
    mode, want = r["HADR_SYNCMODE"], READY_STATES.get(r["HADR_SYNCMODE"], ("PEER",))
    if r["HADR_CONNECT_STATUS"] != "CONNECTED" or r["HADR_STATE"] not in want:
        raise EngineError(
            f"db2: the standby is not ready for {mode}: HADR_STATE {r['HADR_STATE']} (needs "
            f"{' or '.join(want)}), HADR_CONNECT_STATUS {r['HADR_CONNECT_STATUS']}"
        )
    for side in ("SEND", "RECV"):
        asked = r[f"SOCK_{side}_BUF_REQUESTED"]
        if asked is None or int(asked) != SOCKET_BUFFER_BYTES:
            raise EngineError(
                f"db2: SOCK_{side}_BUF_REQUESTED is {asked}, not {SOCKET_BUFFER_BYTES} "
                "(DB2_HADR_SOSNDBUF / DB2_HADR_SORCVBUF not in effect: no instance restart?)"
            )
    extras = {
        f"db2_hadr_{k.removeprefix('HADR_').lower()}": _stamp(v)
        for k, v in r.items()
        if k != "HADR_SYNCMODE"
    }
    return {"sync_mode": mode, "network_rtt_ms": network_rtt_ms, **extras}


def _ms(a: Any, b: Any) -> float:
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):
        return (a - b).total_seconds() * 1000
    return math.nan


def gauges(rows: list[tuple]) -> dict[str, float]:
    """The standby's distance after a timed section: HADR_LOG_GAP (bytes, IBM: a running
    average of primary minus standby log position) and how far the standby's received and
    replayed log trail the primary's in log time (PRIMARY_LOG_TIME minus STANDBY_LOG_TIME and
    STANDBY_REPLAY_LOG_TIME), in ms; NaN without a row."""
    named = _rows(rows)
    r = named[0] if len(named) == 1 else {}
    gap = r.get("HADR_LOG_GAP")
    return {
        "db2_hadr_log_gap_bytes": math.nan if gap is None else float(gap),
        "db2_hadr_log_time_lag_ms": _ms(r.get("PRIMARY_LOG_TIME"), r.get("STANDBY_LOG_TIME")),
        "db2_hadr_replay_time_lag_ms": _ms(
            r.get("PRIMARY_LOG_TIME"), r.get("STANDBY_REPLAY_LOG_TIME")
        ),
    }


_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def container_ip(hosts: str, hostname: str) -> str:
    """The address /etc/hosts gives the container's own name (Docker writes one per network):
    HADR_LOCAL_HOST must be one address the primary listens on."""
    found = [
        parts[0]
        for line in hosts.splitlines()
        if len(parts := line.split()) > 1
        and hostname.strip() in parts[1:]
        and _IPV4.match(parts[0])
        and not parts[0].startswith("127.")
    ]
    if len(found) != 1:
        raise EngineError(f"db2: no single IPv4 address for {hostname.strip()!r} in /etc/hosts")
    return found[0]


def standby_spec(primary: containers.ContainerSpec, home: Path) -> containers.ContainerSpec:
    """The standby's container: the primary's image, environment (but no database: its own is
    restored), capabilities, readiness and CPUs, on the run's network like the primary, its
    client port published on 127.0.0.1."""
    return dataclasses.replace(
        primary,
        env={**primary.env, "DBNAME": ""},
        volumes={str(home / STANDBY_DIR): DATA_MOUNT, str(home / BACKUP_DIR): STANDBY_BACKUP_MOUNT},
    )


# -- folders shared with the containers ------------------------------------------------------------
# None is writable by other local users: the lab runs as root for some knobs, and a file planted
# in a folder it shares with a container would be trusted by root on both sides.
def mount_dir(path: Path) -> Path:
    """A Db2 container's data mount (DATA_MOUNT) on the host: the lab's, mode 0755. IBM's
    documented run mounts a folder made with a plain mkdir: the image's set-up runs as root
    inside and makes the instance owner's folders below it; the instance owner only passes
    through this one."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path


def standby_dirs_script(owner: str = INSTANCE) -> str:
    """Shell run as root in the primary before a standby starts: what an earlier standby left
    goes (its instance owner's files), then the standby's data mount is made as ``mount_dir``
    makes one, and the folders the instance owner writes in itself (the archived log, the
    backup for the standby, the standby's own archive) are given to it, mode 0700: ``owner``
    by name, its uid being the image's."""
    standby = f"{DATA_MOUNT}/{STANDBY_DIR}"
    owned = [f"{DATA_MOUNT}/{HADR_DIR}", f"{DATA_MOUNT}/{BACKUP_DIR}", f"{standby}/{HADR_DIR}"]
    return (
        f"rm -rf {standby} {DATA_MOUNT}/{BACKUP_DIR}/* && mkdir -p {' '.join(owned)} && "
        f"chmod 0755 {standby} && chown {owner}: {' '.join(owned)} && chmod 0700 {' '.join(owned)}"
    )


# -- the standby at run time -----------------------------------------------------------------------
class HadrStandby(Standby):
    """A Db2 server's HADR standby: what ``DB2Engine`` (``engine``) calls from its lifecycle.
    Two proxies where the open engines have one: ``proxy`` to the primary (the log channel)
    and ``admin_proxy`` to the standby."""

    def __init__(self, engine: ServerEngine):
        super().__init__(engine)
        self.admin_proxy: delayproxy.Proxy | None = None

    def ensure_standby(self, knobs: dict[str, Any]) -> None:
        """The standby of these knobs connected in the state its mode reaches: made anew, or
        the kept one (its mode changed in place, the proxies restarted on their ports)."""
        mode, rtt = str(knobs["sync_mode"]), float(knobs["network_rtt_ms"])
        if self.container is None and not self.attach_standby(knobs):
            self.make_standby(knobs, mode, rtt)
        else:
            if self.proxy is None or self.proxy.delay_ms != rtt / 2:
                self.start_proxies(self._link(), rtt)  # the standby reconnects by itself
            rows = self.engine.query(hadr_sql())
            if not rows or _rows(rows)[0]["HADR_SYNCMODE"] != mode:
                self.run_steps(mode_steps(mode))
        self.wait_ready(mode)
        self.link_rtt_ms = self.measure_link()

    def _link(self) -> Link:
        return Link(**json.loads(self._standby_file.read_text()))

    def start_proxies(self, link: Link, rtt_ms: float) -> Link:
        """The two delay proxies on the run network's gateway, on ``link``'s ports (0: any
        free one); the link with the ports they listen on."""
        self.stop_proxy()
        cpus = self._proxy_cpus()
        try:
            self.proxy = delayproxy.Proxy(
                HADR_PORT,
                rtt_ms / 2,
                link.log_port,
                cpus,
                listen_host=link.gateway,
                target_host=link.primary_ip,
            )
            self.admin_proxy = delayproxy.Proxy(
                HADR_PORT,
                rtt_ms / 2,
                link.admin_port,
                cpus,
                listen_host=link.gateway,
                target_host=link.standby_ip,
            )
        except OSError as exc:
            self.stop_proxy()
            raise EngineError(f"db2: a delay proxy did not start: {exc}") from None
        return dataclasses.replace(link, log_port=self.proxy.port, admin_port=self.admin_proxy.port)

    def stop_proxy(self) -> None:
        for proxy in (self.proxy, self.admin_proxy):
            if proxy is not None:
                proxy.stop()
        self.proxy = self.admin_proxy = None

    def _spec(self) -> containers.ContainerSpec:
        return standby_spec(self.engine.placed_spec(), self.engine.home)

    def _address(self, rc: containers.RunningContainer) -> str:
        code, hostname = rc.exec(["cat", "/etc/hostname"])
        code2, hosts = rc.exec(["cat", "/etc/hosts"])
        if code or code2:
            raise EngineError(f"db2: cannot read {rc.name}'s /etc/hosts: {hosts.strip()}")
        return container_ip(hosts, hostname)

    def make_standby(self, knobs: dict[str, Any], mode: str, rtt: float) -> None:
        """A new standby container, the proxies between the two, then IBM's set-up steps."""
        assert self.engine.container is not None
        # Root in the primary, whose data mount holds them all, makes the folders anew.
        code, out = self.engine.container.exec(["sh", "-c", standby_dirs_script()], user="root")
        if code:
            raise EngineError(
                f"db2: cannot make the standby's folders (exit {code}): "
                f"{' '.join(out.split())[-300:]}"
            )
        self.launch_standby(self._spec(), knobs)
        assert self.container is not None
        try:
            gateway = containers.network_gateway(self.engine.run_id)
        except containers.ContainerError as exc:
            raise EngineError(f"db2: the standby did not start: {exc}") from None
        primary = self._address(self.engine.container)
        link = Link(primary, self._address(self.container), gateway, 0, 0)
        link = self.start_proxies(link, rtt)
        self._standby_file.write_text(json.dumps(dataclasses.asdict(link)))
        self.run_steps(setup_steps(mode, link))

    def attach_standby(self, knobs: dict[str, Any]) -> bool:
        """The standby kept with a kept primary; False when there is none running."""
        engine = self.engine
        if engine.container is None or engine.run_dir is None or not self._standby_file.exists():
            return False
        return self.attach_kept_standby(self._spec(), knobs)

    def run_steps(self, steps: list[Step]) -> None:
        for step in steps:
            rc = self.engine.container if step.where == "primary" else self.container
            assert rc is not None
            code, out = rc.exec(clp(step.script), user="root")
            if code != 0:
                raise EngineError(
                    f"db2: HADR set-up, {step.where} ({step.what}) failed "
                    f"(exit {code}): {' '.join(out.split())[-400:]}"
                )

    def wait_ready(self, mode: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until the primary's standby is connected in the state ``mode`` reaches (after its
        start, a proxy's restart, the primary's reactivation)."""
        deadline = time.monotonic() + timeout_s
        while not ready(rows := self.engine.query(hadr_sql()), mode):
            if time.monotonic() > deadline:
                logs = self.container.logs(tail=20) if self.container is not None else ""
                raise EngineError(
                    f"db2: the standby is not ready for {mode} after "
                    f"{timeout_s:g} s ({state_text(rows)}); its last log "
                    f"lines:\n{logs}"
                )
            time.sleep(0.5)

    def measure_link(self, pings: int = LINK_PINGS) -> float:
        """The link's round trip in ms: the median of ``pings`` ``VALUES 1`` sent to the
        primary's client port through a second proxy with the same delay (HADR's own channel
        carries no query the lab could time), after one that opens the way."""
        assert self.engine.container is not None and self.proxy is not None
        probe = delayproxy.Proxy(
            self.engine.container.host_port, self.proxy.delay_ms, 0, self._proxy_cpus()
        )
        try:
            conn = self.engine.open_at(probe.port, 10)
            try:
                cur = conn.cursor()

                def ping() -> None:
                    cur.execute("VALUES 1")
                    cur.fetchall()

                rtt_ms = median_round_trip_ms(ping, pings)
                cur.close()
            finally:
                conn.close()
        finally:
            probe.stop()
        return rtt_ms

    def hadr_gauges(self) -> dict[str, float]:
        return {**gauges(self.engine.query(hadr_sql())), "link_rtt_ms": self.link_rtt_ms}
