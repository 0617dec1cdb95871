"""The one container lifecycle every server engine uses (Docker SDK for Python).

Every container carries the label ``tunelab=1`` plus the run and point it belongs to and its
owner (host, boot, pid and start time of the run's owning process, the checkout's work
directory: see ``tunelab.host.ownership``), sits on a bridge network of its run alone
(``tunelab-<run id>``, no traffic between its containers either), publishes its engine port on
127.0.0.1 only (the lab's client goes straight to the container's address on that network
where the host is on it: ``RunningContainer.client_address``), gets its secrets through the
environment (never printed: log text shown to the user is scrubbed), waits for readiness the
engine's own way, and is removed in every outcome: by the engine's teardown, by a safety net
at interpreter exit (also after SIGTERM), and by ``tunelab recover`` (or ``tunelab clean``,
both in ``tunelab.run.recovery``) for what a killed run left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
import re
import secrets
import signal
import socket
import string
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunelab.host import ownership

LABEL = "tunelab"  # value "1" on everything the lab starts
RUN_LABEL = "tunelab.run"
RESTART_SIGNAL_LABEL = "org.tunelab.restart-signal"  # an image label: see restart()
POINT_LABEL = "tunelab.point"
# A container kept across the points of a run carries the key of the knobs that decided its
# creation (e.g. the page size); a later point with the same key attaches instead of starting.
KEY_LABEL = "tunelab.key"
NETWORK_PREFIX = "tunelab-"  # + the run id: one bridge network per run
# No traffic between containers on the run's network: even one attached by hand reaches
# nothing. Published ports still work (they enter through the host).
_NETWORK_OPTIONS = {"com.docker.network.bridge.enable_icc": "false"}

_PORT_ATTEMPTS = 5
_STOP_TIMEOUT_S = 30  # a database needs time to shut down cleanly before SIGKILL
_SECRET_KEY = re.compile(r"PASS|SECRET|TOKEN|KEY", re.I)


class ContainerError(RuntimeError):
    """A container could not be created, started or made ready; the message is for the user."""


def run_secret(run_dir: Path) -> str:
    """The password of a workflow run's kept servers: generated once, kept in a file only the
    owner may read, so the run's later points (other processes) can connect. The run's owner
    is recorded beside it first (``owner.json``), so a killed run's directory can be reaped."""
    path = Path(run_dir) / "secret"
    ownership.claim(path.parent, run_owner(run_dir))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(generate_password())
    return path.read_text().strip()


def run_owner(run_dir: Path | None) -> ownership.Owner:
    """The owner of a run whose directory is ``<workdir>/runs/<run id>``; without one, the
    work directory is ``$TUNELAB_WORKDIR``'s, if set."""
    return ownership.Owner.current(Path(run_dir).resolve().parents[1] if run_dir else None)


def network_name(run_id: str) -> str:
    return f"{NETWORK_PREFIX}{_slug(run_id, 60)}"


def generate_password(nbytes: int = 18) -> str:
    """A fresh random password with about ``8 * nbytes`` bits, letters and digits only (safe
    for every engine's password rules and for shell or SQL quoting)."""
    alphabet = string.ascii_letters + string.digits
    length = max(12, -(-nbytes * 8 // 5))  # 62 symbols carry a little under 6 bits each
    return "".join(secrets.choice(alphabet) for _ in range(length))


@dataclass
class ContainerSpec:
    image: str
    port: int  # container port to publish on 127.0.0.1:<free port>
    env: dict[str, str] = field(default_factory=dict)  # secrets go here; never logged
    volumes: dict[str, str] = field(default_factory=dict)  # host path -> container path
    command: list[str] | None = None
    cap_add: list[str] = field(default_factory=list)
    privileged: bool = False
    ready_log: str | None = None  # regex on the logs written since the latest start
    ready_probe: list[str] | None = None  # command run inside the container; exit 0 = ready
    ready_timeout_s: float = 120
    shm_size: str | None = None
    stop_signal: str | None = None  # what stops the server cleanly at once (docker stop/restart)
    # The command is the image's server, run by its entrypoint: where the image can restart
    # it in place (label org.tunelab.restart-signal), restart() does (not for `sh -c ...`).
    restart_in_place: bool = False
    secrets: tuple[str, ...] = ()  # values to scrub from any log text shown to the user
    # The host CPUs the container may run on ("0-2,5", Docker's cpuset_cpus); None: any. A
    # request: where the Docker engine has not those CPUs, the container runs on any.
    cpuset: str | None = None
    # In the host's network namespace instead of the run's network, publishing nothing: a
    # client of servers the lab publishes on 127.0.0.1 (a standby), itself listening on no
    # TCP port (``port`` is then unused).
    host_network: bool = False

    def secret_values(self) -> tuple[str, ...]:
        """Declared secrets plus every environment value whose name says it is one."""
        from_env = tuple(v for k, v in self.env.items() if _SECRET_KEY.search(k))
        return tuple(s for s in (*self.secrets, *from_env) if s)


def scrub(text: str, secret_values: tuple[str, ...]) -> str:
    for value in secret_values:
        text = text.replace(value, "********")
    return text


# -- Docker client -------------------------------------------------------------------------
_client_lock = threading.Lock()
_client: Any = None


def client() -> Any:
    """The shared Docker client; ContainerError (one line) when the engine is unreachable."""
    global _client
    with _client_lock:
        if _client is None:
            import docker

            try:
                c = docker.from_env()
                c.ping()
            except Exception as exc:  # DockerException, connection errors, permission denied
                raise ContainerError(f"Docker engine not reachable: {_one_line(exc)}") from None
            _client = c
        return _client


def docker_unavailable_reason() -> str | None:
    """None when the Docker engine answers, else why not (for skipping tests)."""
    try:
        client()
    except ContainerError as exc:
        return str(exc)
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# -- safety net: remove what this process started, whatever happens ---------------------
_started: dict[str, RunningContainer] = {}
_started_lock = threading.Lock()
_net_installed = False


def forget(container_id: str) -> None:
    """Not this process's to remove at exit any more: removed by other means (``clean``)."""
    with _started_lock:
        _started.pop(container_id, None)


def _remove_all_started() -> None:
    with _started_lock:
        pending = list(_started.values())
    for rc in pending:
        try:
            rc.remove()
        except Exception as exc:  # keep removing the others; tell what was left
            print(
                f"tunelab: could not remove container {rc.name}: {_one_line(exc)}", file=sys.stderr
            )


def _on_sigterm(signum: int, frame: Any) -> None:
    # Turn SIGTERM (e.g. a workflow manager stopping a job) into a normal exit, so finally
    # blocks, engine teardowns and the atexit hook all run.
    raise SystemExit(128 + signum)


def _install_safety_net() -> None:
    global _net_installed
    if _net_installed:
        return
    _net_installed = True
    atexit.register(_remove_all_started)
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_sigterm)
        except ValueError:  # not the main interpreter
            pass


# -- the running container -------------------------------------------------------------
class RunningContainer:
    """A started, ready container. ``host_port`` stays the same across ``restart()``."""

    def __init__(self, container: Any, spec: ContainerSpec, host_port: int) -> None:
        self._container = container
        self.spec = spec
        self.id: str = container.id
        self.name: str = container.name
        self.host_port = host_port
        self._secrets = spec.secret_values()
        self._removed = False
        # The container's labels and its image's (docker merges them)
        self.labels: dict[str, str] = dict(container.labels or {})
        self.run_id: str | None = self.labels.get(RUN_LABEL)
        # Timestamp (ns) of the last log line before the latest start: readiness is judged on
        # later lines only. (Not the daemon's StartedAt: a fast process logs before it.)
        self._log_mark: int | None = None
        self._address: tuple[str, int] | None = None  # client_address(), until a restart

    def client_address(self) -> tuple[str, int]:
        """Where the lab's client reaches the server: the container's own address on the run's
        network where the host is on that network (the kernel's bridge, the same path every
        time), else the published port on 127.0.0.1 (through Docker's userspace proxy, which
        adds a hop of its own, scheduled on any CPU, to every round trip)."""
        if self._address is None:
            self._address = self._direct_address() or ("127.0.0.1", self.host_port)
        return self._address

    @property
    def client_route(self) -> str:
        """How client_address() reaches the server, as the rows record it."""
        return "published port" if self.client_address()[0] == "127.0.0.1" else "run network"

    def _direct_address(self) -> tuple[str, int] | None:
        if self.spec.host_network or not self.run_id:
            return None
        try:
            self._container.reload()
            networks = self._container.attrs["NetworkSettings"]["Networks"]
            ip = (networks.get(network_name(self.run_id)) or {}).get("IPAddress")
            gateway = network_gateway(self.run_id)
        except Exception:
            return None
        # The gateway is one of this host's addresses only where the bridge is in this
        # network namespace (not under a remote or rootless daemon). Binding tells without a
        # packet to the server (a bare connect counts as a failed login on some engines).
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((gateway, 0))
            except OSError:
                return None
        return (ip, self.spec.port) if ip else None

    def __repr__(self) -> str:
        return f"RunningContainer({self.name}, 127.0.0.1:{self.host_port})"

    @property
    def cpuset(self) -> str:
        """The CPUs the container may run on, as Docker holds them ("": any)."""
        try:
            self._container.reload()
            return self._container.attrs["HostConfig"].get("CpusetCpus") or ""
        except Exception:
            return ""

    def host_pid(self) -> int | None:
        """The container's first process as the host numbers it (None: not running)."""
        try:
            self._container.reload()
            return int(self._container.attrs["State"].get("Pid") or 0) or None
        except Exception:
            return None

    def set_cpuset(self, cpuset: str | None) -> None:
        """Move a running container to these CPUs (None: any), as far as the Docker engine
        has them (else it stays where it is)."""
        from docker.errors import APIError

        if (cpuset or "") != self.cpuset:
            with contextlib.suppress(APIError):
                self._container.update(cpuset_cpus=cpuset or _all_cpus())

    @property
    def status(self) -> str:
        try:
            self._container.reload()
        except Exception:
            return "removed"
        return self._container.status

    def exec(
        self, cmd: list[str], user: str | None = None, env: dict | None = None
    ) -> tuple[int, str]:
        """Run ``cmd`` inside the container; (exit code, combined output scrubbed)."""
        result = self._container.exec_run(cmd, user=user or "", environment=env, demux=False)
        output = (result.output or b"").decode("utf-8", "replace")
        return result.exit_code, scrub(output, self._secrets)

    def logs(self, tail: int = 50) -> str:
        """The last ``tail`` lines of the container's output, scrubbed of secrets."""
        try:
            raw = self._container.logs(tail=tail)
        except Exception as exc:
            return f"(no logs: {_one_line(exc)})"
        return scrub(raw.decode("utf-8", "replace"), self._secrets)

    def restart(self, timeout_s: float | None = None) -> None:
        """Stop the server (cleanly) and start it again, then wait until ready as at the first
        start. An image whose entrypoint restarts its server in place (label
        ``org.tunelab.restart-signal``), running that server (``spec.restart_in_place``),
        gets that signal: the server process ends and starts
        anew, as cold as after docker's stop and start, without their own work (the
        container's network and mounts are set up again: about 0.3 s). Other images are
        stopped and started."""
        in_place = self.labels.get(RESTART_SIGNAL_LABEL) if self.spec.restart_in_place else None
        self._address = None  # a stopped container may come back at another address
        if in_place:
            self._log_mark = self._last_log_time()
            try:
                self._container.kill(signal=in_place)
            except Exception as exc:
                raise ContainerError(
                    f"container {self.name} did not take {in_place}: {_one_line(exc)}"
                ) from None
        else:
            self._container.stop(timeout=_STOP_TIMEOUT_S)
            self._log_mark = self._last_log_time()
            try:
                self._container.start()
            except Exception as exc:
                raise ContainerError(
                    f"container {self.name} did not start again: {_one_line(exc)}"
                ) from None
        self._wait_ready(timeout_s)

    def remove(self) -> None:
        """Force-remove the container and its anonymous volumes; safe to call twice."""
        if not self._removed:
            try:
                self._container.remove(force=True, v=True)
            except Exception as exc:
                from docker.errors import NotFound

                if not isinstance(exc, NotFound):
                    raise ContainerError(
                        f"could not remove container {self.name}: {_one_line(exc)}"
                    ) from None
            self._removed = True
        with _started_lock:
            _started.pop(self.id, None)
        if self.run_id:
            _drop_network(self.run_id)

    # -- readiness ------------------------------------------------------------------------
    def _wait_ready(self, timeout_s: float | None = None) -> None:
        spec = self.spec
        timeout = spec.ready_timeout_s if timeout_s is None else timeout_s
        pattern = re.compile(spec.ready_log, re.M) if spec.ready_log else None
        began = time.monotonic()
        deadline = began + timeout
        while True:
            self._container.reload()
            state = self._container.attrs["State"]
            if not state.get("Running"):
                raise ContainerError(
                    self._failure(f"exited before it was ready (exit code {state.get('ExitCode')})")
                )
            if self._is_ready(pattern):
                return
            if time.monotonic() > deadline:
                raise ContainerError(self._failure(f"not ready after {timeout:g} s"))
            # A restart is ready in about 0.2 s (every cold repetition waits for one): polled
            # every 10 ms for its first second (a poll is two API calls, about 2 ms), it is not
            # rounded up much; a first start, with its initialisation, more gently.
            fine = time.monotonic() - began < 1.0
            time.sleep(0.5 if spec.ready_probe else 0.01 if fine else 0.05)

    def _is_ready(self, pattern: re.Pattern | None) -> bool:
        if pattern is not None and not pattern.search(self._logs_since_mark()):
            return False
        if self.spec.ready_probe:
            code, _ = self.exec(self.spec.ready_probe)
            return code == 0
        return True

    def _timestamped(self, **kw: Any) -> list[tuple[int, str]]:
        raw = self._container.logs(timestamps=True, **kw).decode("utf-8", "replace")
        out: list[tuple[int, str]] = []
        for line in raw.split("\n"):
            stamp, _, text = line.partition(" ")
            try:
                out.append((_epoch_ns(stamp), text))
            except ValueError:  # not a timestamped line (empty tail)
                if line:
                    out.append((out[-1][0] if out else 0, line))
        return out

    def _last_log_time(self) -> int | None:
        lines = self._timestamped(tail=1)
        return lines[-1][0] if lines else None

    def _logs_since_mark(self) -> str:
        if self._log_mark is None:
            return "\n".join(text for _, text in self._timestamped())
        since = self._log_mark // 1_000_000_000  # whole seconds: the API's filter is coarse
        lines = self._timestamped(since=since)
        return "\n".join(text for stamp, text in lines if stamp > self._log_mark)

    def _failure(self, what: str) -> str:
        try:
            self._container.reload()
            state = self._container.attrs["State"]
            status = f"status={state.get('Status')} exit_code={state.get('ExitCode')}"
        except Exception:
            status = "status=unknown"
        return (
            f"container {self.name} ({self.spec.image}) {what}; {status}; "
            f"last log lines:\n{self.logs(tail=30)}"
        )


def _epoch_ns(docker_time: str) -> int:
    """Docker's RFC 3339 UTC time with nanoseconds -> integer epoch nanoseconds."""
    head, _, frac = docker_time.rstrip("Z").partition(".")
    seconds = int(dt.datetime.fromisoformat(head).replace(tzinfo=dt.UTC).timestamp())
    return seconds * 1_000_000_000 + int((frac + "000000000")[:9])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-.")
    return slug[:limit] or "x"


def _all_cpus() -> str:
    # Docker's "no restriction" on update: every CPU the Docker engine has.
    return f"0-{(client().info().get('NCPU') or 1) - 1}"


def _cpus_unavailable(exc: BaseException) -> bool:
    return "cpus are not available" in str(exc).lower() or "cpuset" in str(exc).lower()


def _port_taken(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "port is already allocated" in text or "address already in use" in text


def _network_gone(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "network" in text and "not found" in text


def _find_network(c: Any, name: str) -> Any:
    # The API's name filter matches substrings: compare whole names.
    return next((n for n in c.networks.list(names=[name]) if n.name == name), None)


def run_network(run_id: str, owner: ownership.Owner) -> Any:
    """The run's own bridge network, created (labelled like its containers) when missing;
    any container of another run found on it is disconnected."""
    from docker.errors import APIError

    c = client()
    name = network_name(run_id)
    network = _find_network(c, name)
    if network is None:
        try:
            network = c.networks.create(
                name,
                driver="bridge",
                options=_NETWORK_OPTIONS,
                labels={LABEL: "1", RUN_LABEL: run_id, **owner.labels()},
                check_duplicate=True,
            )
        except APIError as exc:
            network = _find_network(c, name)  # another point of the run made it meanwhile
            if network is None:
                raise ContainerError(
                    f"cannot create network {name}: {_one_line(exc)} "
                    "(`tunelab recover` removes what killed runs left)"
                ) from None
    _isolate(network, run_id)
    return network


def network_gateway(run_id: str) -> str:
    """The host's address on the run's network: what its containers reach the host at (the
    network keeps containers from reaching each other, enable_icc off)."""
    network = _find_network(client(), network_name(run_id))
    configs = ((network.attrs.get("IPAM") or {}).get("Config") or []) if network else []
    gateways = [c["Gateway"] for c in configs if c.get("Gateway") and ":" not in c["Gateway"]]
    if not gateways:
        raise ContainerError(f"network {network_name(run_id)}: no IPv4 gateway")
    return gateways[0]


def _isolate(network: Any, run_id: str) -> None:
    network.reload()
    for container in network.containers:
        if container.labels.get(RUN_LABEL) != run_id:
            network.disconnect(container, force=True)
            print(
                f"tunelab: disconnected container {container.name} (not of run {run_id}) "
                f"from network {network.name}",
                file=sys.stderr,
            )


def _drop_network(run_id: str) -> None:
    """Remove the run's network once the run has no container left (a kept server keeps it)."""
    from docker.errors import APIError

    c = client()
    with contextlib.suppress(APIError):
        network = _find_network(c, network_name(run_id))
        if network is None or (network.attrs.get("Labels") or {}).get(RUN_LABEL) != run_id:
            return
        of_run = [f"{LABEL}=1", f"{RUN_LABEL}={run_id}"]
        if not c.containers.list(all=True, filters={"label": of_run}):
            remove_network(network)


def remove_network(network: Any, timeout_s: float = 15) -> None:
    """Remove a network whose containers are gone. Docker releases a removed container's
    endpoint a moment after the removal returns (seconds on a busy host), and refuses to
    remove a network with an endpoint: disconnect what is still attached, and retry."""
    from docker.errors import APIError, NotFound

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            network.reload()
            for container_id in network.attrs.get("Containers") or {}:
                with contextlib.suppress(NotFound):
                    network.disconnect(container_id, force=True)
            network.remove()
            return
        except NotFound:
            return
        except APIError as exc:
            if "active endpoint" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def start(
    spec: ContainerSpec,
    run_id: str,
    point_id: str,
    keep_key: str | None = None,
    run_dir: Path | None = None,
) -> RunningContainer:
    """Create and start a labelled container on the run's network, publish ``spec.port`` on
    127.0.0.1:<free port>, and wait until it is ready. On failure (or Ctrl-C) the container
    is removed and ContainerError carries its status and last log lines, scrubbed of secrets.

    With ``keep_key`` the ready container outlives this process, for later points of the run
    to ``attach`` to; the run's end (or `tunelab clean`) removes it. ``run_dir`` (the run's
    directory under the work directory) names the checkout in the owner labels, and gets
    the owner record too."""
    from docker.errors import APIError, ImageNotFound

    c = client()
    _install_safety_net()
    owner = run_owner(run_dir)
    if run_dir is not None:
        ownership.claim(Path(run_dir), owner)
    labels = {LABEL: "1", RUN_LABEL: run_id, POINT_LABEL: point_id, **owner.labels()}
    if keep_key:
        labels[KEY_LABEL] = keep_key
    name = f"tunelab-{_slug(run_id)}-{_slug(point_id)}-{secrets.token_hex(3)}"
    binds = {host: {"bind": inside, "mode": "rw"} for host, inside in spec.volumes.items()}
    rc: RunningContainer | None = None
    cpuset = spec.cpuset
    try:
        network = run_network(run_id, owner)
        for attempt in range(_PORT_ATTEMPTS):
            port = 0 if spec.host_network else _free_port()
            where: dict[str, Any] = (
                {"network_mode": "host"}
                if spec.host_network
                else {
                    "ports": {f"{spec.port}/tcp": ("127.0.0.1", port)},
                    "network": network.name,
                }  # and no other: not the default bridge
            )
            try:
                container = c.containers.create(
                    spec.image,
                    command=spec.command,
                    name=name,
                    labels=labels,
                    environment=spec.env,
                    volumes=binds,
                    cap_add=spec.cap_add or None,
                    privileged=spec.privileged,
                    stop_signal=spec.stop_signal,
                    shm_size=spec.shm_size,
                    cpuset_cpus=cpuset,
                    detach=True,
                    **where,
                )
            except ImageNotFound:
                raise ContainerError(
                    f"image {spec.image} is not in the local Docker engine "
                    "(see containers/README.md for how to get or build it)"
                ) from None
            except APIError as exc:
                if cpuset and _cpus_unavailable(exc):
                    cpuset = None  # CPUs this host's Docker engine has not: run on any
                    continue
                if _network_gone(exc) and attempt < _PORT_ATTEMPTS - 1:
                    # The run's last container went and took the network with it meanwhile.
                    network = run_network(run_id, owner)
                    continue
                raise ContainerError(
                    f"cannot create container from {spec.image}: {_one_line(exc)}"
                ) from None
            rc = RunningContainer(container, spec, port)
            with _started_lock:
                _started[rc.id] = rc
            try:
                container.start()
                break
            except APIError as exc:
                rc.remove()
                rc = None
                if not _port_taken(exc) or attempt == _PORT_ATTEMPTS - 1:
                    raise ContainerError(
                        f"cannot start container {name}: {_one_line(exc)}"
                    ) from None
        assert rc is not None
        rc._wait_ready()
        if keep_key:
            with _started_lock:
                _started.pop(rc.id, None)  # kept for later points: not this process's to remove
        return rc
    except BaseException:
        if rc is not None:
            rc.remove()
        raise


def attach(spec: ContainerSpec, run_id: str, keep_key: str) -> RunningContainer | None:
    """The running container a previous point of ``run_id`` kept under ``keep_key``, if any."""
    labels = [f"{LABEL}=1", f"{RUN_LABEL}={run_id}", f"{KEY_LABEL}={keep_key}"]
    for container in client().containers.list(filters={"label": labels, "status": "running"}):
        if spec.host_network:
            return RunningContainer(container, spec, 0)
        bindings = container.attrs["NetworkSettings"]["Ports"].get(f"{spec.port}/tcp") or []
        if bindings:
            network = _find_network(client(), network_name(run_id))
            if network is not None:
                _isolate(network, run_id)
            rc = RunningContainer(container, spec, int(bindings[0]["HostPort"]))
            rc.set_cpuset(spec.cpuset)  # kept by a point that placed it otherwise
            return rc
    return None


def remove_kept(run_id: str, except_key: str | None = None) -> list[str]:
    """Remove the containers ``run_id`` kept under other keys (one kept engine at a time)."""
    removed = []
    labels = [f"{LABEL}=1", f"{RUN_LABEL}={run_id}", KEY_LABEL]
    for container in client().containers.list(all=True, filters={"label": labels}):
        if container.labels.get(KEY_LABEL) != except_key:
            container.remove(force=True, v=True)
            removed.append(container.name)
    return removed
