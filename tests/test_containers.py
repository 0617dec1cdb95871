"""The container lifecycle against the real Docker engine (the lab's MariaDB image, run with
plain shell commands where a database is not needed)."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from tunelab.host import containers, ownership
from tunelab.host.containers import ContainerError, ContainerSpec
from tunelab.run import recovery

pytestmark = pytest.mark.docker


@pytest.fixture
def run_id() -> str:
    rid = f"test-{uuid.uuid4().hex[:8]}"
    yield rid
    recovery.clean(rid)


def _lab_containers(run_id: str) -> list:
    return containers.client().containers.list(
        all=True, filters={"label": [f"{containers.RUN_LABEL}={run_id}"]}
    )


def _shell(image: str, script: str, **kw) -> ContainerSpec:
    return ContainerSpec(image=image, port=3306, command=["sh", "-c", script], **kw)


def _networks(run_id: str) -> list:
    name = containers.network_name(run_id)
    return [n for n in containers.client().networks.list(names=[name]) if n.name == name]


def test_generate_password_is_fresh_and_plain():
    pws = {containers.generate_password() for _ in range(50)}
    assert len(pws) == 50
    for pw in pws:
        assert pw.isalnum() and len(pw) >= 24


def test_start_labels_port_exec_remove(image, run_id, tmp_path, monkeypatch):
    monkeypatch.setenv(ownership.OWNER_PID_ENV, str(os.getppid()))  # as the workflow exports
    run_dir = tmp_path / "w" / "runs" / run_id
    spec = _shell(image, "echo up; sleep 300", ready_log="^up$")
    rc = containers.start(spec, run_id, "p1", run_dir=run_dir)
    try:
        attrs = containers.client().api.inspect_container(rc.id)
        labels = attrs["Config"]["Labels"]
        assert labels[containers.LABEL] == "1"
        assert labels[containers.RUN_LABEL] == run_id
        assert labels[containers.POINT_LABEL] == "p1"
        # The owner: the workflow's process (as it started: a reused pid is not it), the
        # host and its boot, the checkout's work directory; the same in the run directory.
        assert labels[ownership.PID_LABEL] == str(os.getppid())
        assert labels[ownership.START_LABEL] == str(ownership.start_time(os.getppid()))
        assert labels[ownership.HOST_LABEL] == socket.gethostname()
        assert labels[ownership.BOOT_LABEL] == ownership.boot_id()
        assert labels[ownership.WORKDIR_LABEL] == str((tmp_path / "w").resolve())
        assert ownership.Owner.read(run_dir) == ownership.Owner.from_labels(labels)
        assert list(attrs["NetworkSettings"]["Networks"]) == [containers.network_name(run_id)]
        bindings = attrs["NetworkSettings"]["Ports"]["3306/tcp"]
        assert bindings and all(b["HostIp"] == "127.0.0.1" for b in bindings)
        assert {int(b["HostPort"]) for b in bindings} == {rc.host_port}
        code, out = rc.exec(["sh", "-c", "echo hello; exit 4"])
        assert (code, out.strip()) == (4, "hello")
    finally:
        rc.remove()
    rc.remove()  # idempotent
    assert _lab_containers(run_id) == []
    assert _networks(run_id) == []  # the run's last container took its network along


def test_two_containers_get_different_ports(image, run_id):
    spec = _shell(image, "echo up; sleep 300", ready_log="^up$")
    a = containers.start(spec, run_id, "a")
    b = containers.start(spec, run_id, "b")
    try:
        assert a.host_port != b.host_port
    finally:
        a.remove()
        b.remove()


def test_secrets_are_scrubbed_from_logs_exec_and_errors(image, run_id):
    pw = containers.generate_password()
    spec = _shell(
        image,
        'echo "pw=$MARIADB_ROOT_PASSWORD"; echo up; sleep 300',
        env={"MARIADB_ROOT_PASSWORD": pw},
        ready_log="^up$",
    )
    rc = containers.start(spec, run_id, "p1")
    try:
        assert "pw=********" in rc.logs()
        assert pw not in rc.logs()
        assert pw not in rc.exec(["sh", "-c", "echo $MARIADB_ROOT_PASSWORD"])[1]
    finally:
        rc.remove()
    failing = _shell(
        image, 'echo "pw=$MARIADB_ROOT_PASSWORD"; exit 1', env={"DB_PASS": pw}, ready_log="never"
    )
    failing.env["MARIADB_ROOT_PASSWORD"] = pw
    with pytest.raises(ContainerError) as err:
        containers.start(failing, run_id, "p2")
    assert pw not in str(err.value) and "pw=********" in str(err.value)


def test_early_exit_reports_status_and_log_and_removes(image, run_id):
    with pytest.raises(ContainerError) as err:
        containers.start(_shell(image, "echo boom >&2; exit 3", ready_log="never"), run_id, "p1")
    text = str(err.value)
    assert "exit code 3" in text and "boom" in text
    assert _lab_containers(run_id) == []


def test_timeout_reports_and_removes(image, run_id):
    spec = _shell(image, "echo starting; sleep 300", ready_log="never", ready_timeout_s=1.5)
    t0 = time.monotonic()
    with pytest.raises(ContainerError) as err:
        containers.start(spec, run_id, "p1")
    assert time.monotonic() - t0 >= 1.5
    assert "not ready after 1.5 s" in str(err.value) and "starting" in str(err.value)
    assert _lab_containers(run_id) == []


def test_probe_readiness(image, run_id):
    spec = _shell(image, "sleep 1; touch /tmp/ok; sleep 300", ready_probe=["test", "-e", "/tmp/ok"])
    rc = containers.start(spec, run_id, "p1")
    try:
        assert rc.exec(["test", "-e", "/tmp/ok"])[0] == 0
    finally:
        rc.remove()


def test_restart_waits_for_a_new_ready_line(image, run_id):
    # PID 1 must act on SIGTERM, or the stop waits for its timeout.
    script = "trap 'exit 0' TERM; sleep 1; echo up; sleep 300 & wait"
    rc = containers.start(_shell(image, script, ready_log="^up$"), run_id, "p")
    try:
        port = rc.host_port
        t0 = time.monotonic()
        rc.restart()
        # The old "up" line must not count: the restart waits for the new one (1 s later).
        assert time.monotonic() - t0 >= 1.0
        assert rc.logs().count("up") == 2
        assert rc.host_port == port
    finally:
        rc.remove()


def test_image_missing_is_one_clear_error(run_id):
    if containers.docker_unavailable_reason():
        pytest.skip("Docker engine not reachable")
    with pytest.raises(ContainerError, match="not in the local Docker engine"):
        containers.start(ContainerSpec(image="tunelab/absent:none", port=1), run_id, "p")


_CHILD = """
import os, signal, sys, time
from tunelab.host import containers
spec = containers.ContainerSpec(image={image!r}, port=3306,
    command=["sh", "-c", "echo up; sleep 300"], ready_log="^up$")
rc = containers.start(spec, {run_id!r}, "child")
print(rc.id, flush=True)
if {how!r} == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(120)
"""


def _child(image: str, run_id: str, how: str) -> tuple[subprocess.Popen, str]:
    code = textwrap.dedent(_CHILD.format(image=image, run_id=run_id, how=how))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    cid = proc.stdout.readline().strip()
    assert cid, "the child did not start its container"
    return proc, cid


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_removes_its_container(image, run_id, sig):
    proc, cid = _child(image, run_id, "wait")
    assert [c.id for c in _lab_containers(run_id)] == [cid]
    proc.send_signal(sig)
    proc.wait(timeout=60)
    assert _lab_containers(run_id) == []
    assert _networks(run_id) == []


def test_killed_run_is_cleaned(image, run_id):
    proc, cid = _child(image, run_id, "kill")
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    left = _lab_containers(run_id)
    assert [c.id for c in left] == [cid]  # nothing could remove it
    removed = recovery.clean(run_id)
    assert removed == [left[0].name, f"network:{containers.network_name(run_id)}"]
    assert _lab_containers(run_id) == []
    assert _networks(run_id) == []


def test_clean_main_scoped_to_a_run(image, run_id, capsys):
    other = f"{run_id}-other"
    keep = containers.start(_shell(image, "echo up; sleep 300", ready_log="^up$"), other, "k")
    try:
        gone = containers.start(_shell(image, "echo up; sleep 300", ready_log="^up$"), run_id, "g")
        vol = containers.client().volumes.create(
            labels={containers.LABEL: "1", containers.RUN_LABEL: run_id}
        )
        assert recovery.clean_main(["--run", run_id]) == 0
        out = capsys.readouterr().out
        assert gone.name in out and f"volume:{vol.name}" in out
        assert _lab_containers(run_id) == []
        assert [c.id for c in _lab_containers(other)] == [keep.id]
        assert recovery.clean_main(["--run", run_id]) == 0
        assert "nothing to remove" in capsys.readouterr().out
    finally:
        keep.remove()


def test_published_port_answers_only_on_loopback(image, run_id):
    rc = containers.start(_shell(image, "echo up; exec sleep 300", ready_log="^up$"), run_id, "p")
    try:
        info = json.loads(
            subprocess.run(
                ["docker", "inspect", "-f", "{{json .HostConfig.PortBindings}}", rc.id],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        assert info["3306/tcp"] == [{"HostIp": "127.0.0.1", "HostPort": str(rc.host_port)}]
        # No listener on the host's other addresses for that port.
        other = _non_loopback_ip()
        if other:
            with socket.socket() as s:
                s.settimeout(1)
                assert s.connect_ex((other, rc.host_port)) != 0
    finally:
        rc.remove()


def _non_loopback_ip() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET address: no packet is sent
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") else ip


def test_clean_without_run_touches_only_this_checkout(image, run_id, tmp_path, capsys):
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    other = f"{run_id}-theirs"
    spec = _shell(image, "echo up; exec sleep 300", ready_log="^up$")
    keep = containers.start(spec, other, "k", keep_key="k", run_dir=theirs / "runs" / other)
    try:
        gone = containers.start(spec, run_id, "g", keep_key="k", run_dir=mine / "runs" / run_id)
        ownership.make_dir(mine / "points" / "p1")
        assert recovery.clean_main(["--workdir", str(mine)]) == 0
        out = capsys.readouterr().out
        assert gone.name in out and f"network:{containers.network_name(run_id)}" in out
        assert "removed engine data" in out
        assert _lab_containers(run_id) == [] and _networks(run_id) == []
        assert not (mine / "runs").exists() and not (mine / "points").exists()
        assert [c.id for c in _lab_containers(other)] == [keep.id]
        assert (theirs / "runs" / other / "owner.json").exists()
    finally:
        recovery.clean(other)


def test_clean_all_asks_first_and_refuses_without_a_terminal(image, run_id, monkeypatch, capsys):
    rc = containers.start(_shell(image, "echo up; exec sleep 300", ready_log="^up$"), run_id, "p")
    try:
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # not a terminal
        assert recovery.clean_main(["--all"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--yes" in err[0]

        class Terminal(io.StringIO):
            def isatty(self) -> bool:
                return True

        monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
        assert recovery.clean_main(["--all"]) == 2
        assert "every checkout on this host" in capsys.readouterr().out
        assert [c.id for c in _lab_containers(run_id)] == [rc.id]  # declined: all still there
    finally:
        rc.remove()


# socat says "listening on" once its socket listens (-d -d): ready then, not a moment before
# (an "echo up" ahead of it let a client in first, to be refused, or accepted by Docker's port
# proxy and closed with nothing said).
_LISTEN = "exec socat -d -d TCP-LISTEN:3306,fork,reuseaddr SYSTEM:'echo hello'"
_LISTENING = " listening on "


def _connects(ip: str) -> list[str]:
    return ["timeout", "2", "bash", "-c", f"exec 3<>/dev/tcp/{ip}/3306"]


def test_each_run_has_a_network_of_its_own(image, run_id):
    """A run's container is reachable on its published 127.0.0.1 port only: not from another
    run's container, nor from one outside the lab, nor from one attached to its network."""
    c = containers.client()
    other = f"{run_id}-other"
    server = containers.start(
        _shell(image, _LISTEN, ready_log=_LISTENING), run_id, "s", keep_key="k"
    )
    intruder = containers.start(
        _shell(image, "echo up; exec sleep 300", ready_log="^up$"), other, "i"
    )
    outsider = None
    try:
        attrs = c.api.inspect_container(server.id)
        name = containers.network_name(run_id)
        assert list(attrs["NetworkSettings"]["Networks"]) == [name]  # not the default bridge
        bindings = attrs["NetworkSettings"]["Ports"]["3306/tcp"]
        assert bindings == [{"HostIp": "127.0.0.1", "HostPort": str(server.host_port)}]
        (network,) = _networks(run_id)
        network.reload()
        assert [x.id for x in network.containers] == [server.id]
        assert network.attrs["Labels"][containers.RUN_LABEL] == run_id
        ip = attrs["NetworkSettings"]["Networks"][name]["IPAddress"]

        # The probe works: the server reaches itself, the host its published port.
        assert server.exec(_connects(ip))[0] == 0
        with socket.create_connection(("127.0.0.1", server.host_port), timeout=5) as s:
            assert s.recv(5) == b"hello"
        assert intruder.exec(_connects(ip))[0] != 0  # another run's container
        outsider = c.containers.run(image, _connects(ip), detach=True)  # the default bridge
        assert outsider.wait(timeout=30)["StatusCode"] != 0

        # Attached by hand, a foreign container still reaches nothing (no traffic between
        # containers on a run's network) and is disconnected when the run attaches again.
        network.connect(intruder.id)
        assert intruder.exec(_connects(ip))[0] != 0
        spec = _shell(image, _LISTEN, ready_log=_LISTENING)
        assert containers.attach(spec, run_id, "k").id == server.id
        network.reload()
        assert [x.id for x in network.containers] == [server.id]
    finally:
        if outsider is not None:
            outsider.remove(force=True)
        intruder.remove()
        recovery.clean(run_id)
    assert _networks(run_id) == [] and _networks(other) == []


def _answers(ip: str, port: int) -> list[str]:
    """Connect, read a line: exit 0 only when the other end answered."""
    return [
        "timeout",
        "5",
        "bash",
        "-c",
        f'exec 3<>/dev/tcp/{ip}/{port}; read -t 4 line <&3; [ -n "$line" ]',
    ]


def test_two_containers_of_a_run_meet_only_through_a_proxy_on_its_gateway(image, run_id):
    """The path a standby's log takes on Db2 (engines.db2_hadr): no traffic between the run's
    containers, but each reaches a delay proxy the host runs on the network's gateway, which
    forwards to the other's address on the network."""
    from tunelab.host import delayproxy

    a = containers.start(_shell(image, _LISTEN, ready_log=_LISTENING), run_id, "a")
    b = containers.start(_shell(image, _LISTEN, ready_log=_LISTENING), run_id, "b")
    gateway = containers.network_gateway(run_id)
    name = containers.network_name(run_id)
    c = containers.client()
    ip_b = c.api.inspect_container(b.id)["NetworkSettings"]["Networks"][name]["IPAddress"]
    assert gateway != ip_b and gateway.count(".") == 3
    proxy = delayproxy.Proxy(3306, 1.0, listen_host=gateway, target_host=ip_b)
    try:
        assert a.exec(_answers(ip_b, 3306))[0] != 0  # not directly
        assert a.exec(_answers(gateway, proxy.port))[0] == 0  # through the host's proxy
    finally:
        proxy.stop()
        recovery.clean(run_id)


def _greeting(address: tuple[str, int]) -> str:
    """The first line the listener at ``address`` sends, asked once: a server handed out as
    ready must answer (on its own address and through Docker's port proxy alike)."""
    with socket.create_connection(address, timeout=5) as s:
        return s.makefile().readline().strip()


def test_the_client_reaches_a_server_at_its_address_on_the_run_network(image, run_id, monkeypatch):
    """Straight to the container's address where the host is on the run's network (no port
    proxy in the round trip); the published port where it is not; a restart asks again."""
    rc = containers.start(_shell(image, _LISTEN, ready_log=_LISTENING), run_id, "route")
    try:
        name = containers.network_name(run_id)
        ip = containers.client().api.inspect_container(rc.id)["NetworkSettings"]["Networks"][name][
            "IPAddress"
        ]
        assert rc.client_address() == (ip, 3306)
        assert rc.client_route == "run network"
        assert _greeting(rc.client_address()) == "hello"
        # A gateway that is not this host's address: a daemon whose bridge is elsewhere.
        monkeypatch.setattr(containers, "network_gateway", lambda run_id: "192.0.2.1")
        assert rc.client_address() == (ip, 3306)  # kept until the server restarts
        rc.restart()
        assert rc.client_address() == ("127.0.0.1", rc.host_port)
        assert rc.client_route == "published port"
        assert _greeting(rc.client_address()) == "hello"
    finally:
        rc.remove()
