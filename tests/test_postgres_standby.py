"""PostgreSQL with a streaming standby (sync_mode, network_rtt_ms): the rules first, then a real
primary and standby of the lab's image, whose synchronous commits wait a round trip."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import time
import uuid

import pytest

from tunelab.engines import postgres_standby as standby
from tunelab.engines import standby as common
from tunelab.engines.base import EngineError, IndexPlan
from tunelab.engines.postgres import PostgresEngine, settings_text
from tunelab.engines.server import host_dir
from tunelab.host import containers, ownership
from tunelab.sweep import spec

docker = pytest.mark.docker


def test_the_standby_is_named_only_once_it_streams():
    knobs = {"sync_mode": "remote_write", "network_rtt_ms": 5}
    before = settings_text(knobs).splitlines()
    assert "synchronous_commit = remote_write" in before
    assert not any(line.startswith("synchronous_standby_names") for line in before)
    after = settings_text(knobs, standby_streams=True).splitlines()
    assert f"synchronous_standby_names = '{standby.STANDBY_NAME}'" in after
    plain = settings_text({})
    assert "synchronous_commit" not in plain and "synchronous_standby_names" not in plain


def test_a_standby_server_is_never_shared_with_points_without_one(tmp_path):
    eng = PostgresEngine(tmp_path / "e", "r")
    with_standby = eng.keep_key(PostgresEngine.knob_rules.full_knobs({"sync_mode": "on"}))
    without = eng.keep_key(PostgresEngine.knob_rules.full_knobs({}))
    assert with_standby != without
    # the mode and the round trip change in place: one server for all of them
    assert with_standby == eng.keep_key(
        PostgresEngine.knob_rules.full_knobs({"sync_mode": "local", "network_rtt_ms": 20})
    )


def test_bad_replication_knobs_are_refused_before_anything_starts(write_sweep):
    with pytest.raises(EngineError, match="network_rtt_ms.*needs a standby"):
        PostgresEngine.knob_rules.full_knobs({"network_rtt_ms": 5})
    with pytest.raises(EngineError, match="network_rtt_ms=-1 out of range"):
        PostgresEngine.knob_rules.full_knobs({"sync_mode": "on", "network_rtt_ms": -1})
    with pytest.raises(EngineError, match="sync_mode=True not allowed"):
        PostgresEngine.knob_rules.full_knobs({"sync_mode": True})  # YAML's unquoted `on`
    path = write_sweep(
        "name: bad\nengines: [postgres, sqlite]\ndataset: {rows: 1000}\n"
        "knobs: {sync_mode: ['on'], network_rtt_ms: [-2]}\n"
        "workloads: [{type: insert, rows: 10}]\n"
    )
    for engine in ("postgres", "sqlite"):  # sqlite: no replication at all
        points, errors = spec.expand(path, engine)
        assert points == [] and errors, engine
        text = "\n".join(map(str, errors))
        assert str(path) in text
        assert ("network_rtt_ms" in text) if engine == "postgres" else ("sync_mode" in text)


@pytest.fixture(scope="module")
def image() -> str:
    reason = containers.docker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from tunelab.engines.images import ensure_image

    try:
        return ensure_image("postgres", PostgresEngine.info.image)
    except containers.ContainerError as exc:
        pytest.skip(f"no PostgreSQL image: {exc}")


def _commits(eng: PostgresEngine, n: int, start: int) -> float:
    """n one-row transactions; seconds they took."""
    conn = eng.connect()
    try:
        cur = conn.cursor()
        t0 = time.perf_counter()
        for i in range(start, start + n):
            cur.execute(
                "INSERT INTO accounts (id, name, hundreds1, hundreds2, lat, balance, "
                "filler) VALUES (%s, 'n', 0, 0, 0, 0, 'x')",
                (i,),
            )
            conn.commit()
        return time.perf_counter() - t0
    finally:
        conn.close()


def _standby_count(eng: PostgresEngine) -> int:
    assert eng.replica.container is not None
    code, out = eng.replica.container.exec(
        [
            "psql",
            "-h",
            "/run/postgresql",
            "-U",
            "postgres",
            "-tAc",
            "SELECT count(*) FROM accounts",
        ],
        user="postgres",
    )
    assert code == 0, out
    return int(out.strip())


@docker
@pytest.mark.slow
def test_synchronous_commits_wait_a_round_trip_and_reach_the_standby(tmp_path, image):
    eng = PostgresEngine(tmp_path / "points" / "pt" / "engine", f"sb-{uuid.uuid4().hex[:6]}")
    eng.image = image
    n, rtt = 25, 20.0
    try:
        eng.provision({"sync_mode": "on", "network_rtt_ms": rtt, "buffer_pool": 2048})
        applied = eng.applied_knobs()
        assert (applied["sync_mode"], applied["network_rtt_ms"]) == ("on", rtt)
        assert applied["pg_synchronous_standby_names"] == standby.STANDBY_NAME
        # the link's round trip, measured through the proxy: the delay plus its hops
        assert rtt <= eng.gauges()["link_rtt_ms"] < rtt + 3, eng.replica.link_rtt_ms
        eng.create_table("accounts", IndexPlan("none", ()))
        # The lags are the standby's last reports: read while commits flow (once it is idle
        # and caught up, PostgreSQL shows NULL, a row's NaN).
        seen = []
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(_commits, eng, n, 0)
            while not running.done():
                seen.append(eng.gauges()["repl_flush_lag_ms"])
                time.sleep(0.02)
            waited = running.result()
        # every commit waited for the standby's flush across the link: at least one RTT
        assert waited >= n * rtt / 1000, waited
        lags = [x for x in seen if x == x]
        assert lags and max(lags) >= rtt * 0.9, seen
        assert _standby_count(eng) == n  # on: flushed there (replayed soon after)

        # local: the same link, no wait; a change in place (no new server, same standby)
        sid = eng.replica.container.id
        eng.provision({"sync_mode": "local", "network_rtt_ms": rtt, "buffer_pool": 2048})
        assert eng.starts == 1 and eng.replica.container.id == sid
        assert eng.applied_knobs()["sync_mode"] == "local"
        fast = _commits(eng, n, n)
        assert fast < n * rtt / 1000 / 2, fast
        # settle (before a write repetition) returns once the standby has replayed them all
        eng.settle()
        assert _standby_count(eng) == 2 * n

        # a cold restart of the primary: the standby streams again, in sync
        eng.provision({"sync_mode": "remote_write", "network_rtt_ms": 2, "buffer_pool": 2048})
        assert eng.make_cold().achieved == "cold"
        assert eng.replica.replication_state() == ("streaming", "sync")
        assert eng.applied_knobs()["network_rtt_ms"] == 2
        deadline = time.monotonic() + 10
        while _standby_count(eng) != 2 * n and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _standby_count(eng) == 2 * n
        proxy = eng.replica.proxy._process
        ids, run_id = [eng.container.id, eng.replica.container.id], eng.run_id
    finally:
        eng.teardown()
    assert proxy.poll() is not None  # the proxy ended with the point
    left = containers.client().containers.list(
        all=True, filters={"label": f"{containers.RUN_LABEL}={run_id}"}
    )
    assert left == [] and len(set(ids)) == 2


def _walsender_pid(eng: PostgresEngine) -> int:
    rows = eng.admin_query(
        "SELECT pid FROM pg_stat_replication WHERE application_name = %s", (standby.STANDBY_NAME,)
    )
    assert len(rows) == 1, rows
    return int(rows[0][0])


@docker
@pytest.mark.slow
def test_the_next_point_of_a_kept_server_keeps_its_link(tmp_path, image, monkeypatch):
    """Points of one run in one process, as a sweep measured in rounds: the proxy of the kept
    server waits for the next point, which changes its delay in place; the standby stays
    connected (the same walsender), and the link measures the new round trip."""
    run_id = f"kp-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv(ownership.OWNER_PID_ENV, str(os.getpid()))
    run_dir = tmp_path / "runs" / run_id

    made: list[PostgresEngine] = []

    def point(name: str) -> PostgresEngine:
        eng = PostgresEngine(tmp_path / "points" / name / "engine", run_id)
        eng.image, eng.run_dir = image, run_dir
        made.append(eng)
        return eng

    first = point("a")
    try:
        first.provision({"sync_mode": "on", "network_rtt_ms": 2, "buffer_pool": 2048})
        proxy, walsender = first.replica.proxy, _walsender_pid(first)
        assert proxy is not None and 2 <= first.replica.link_rtt_ms < 5
        first.teardown()
        assert proxy.alive() and first.replica.proxy is None  # parked for the next point

        second = point("b")
        second.provision({"sync_mode": "remote_write", "network_rtt_ms": 10, "buffer_pool": 2048})
        assert second.replica.proxy is proxy and proxy.delay_ms == 5
        assert _walsender_pid(second) == walsender  # no reconnection
        assert 10 <= second.replica.link_rtt_ms < 13, second.replica.link_rtt_ms
        assert second.applied_knobs()["network_rtt_ms"] == 10
        second.create_table("accounts", IndexPlan("none", ()))
        assert _commits(second, 10, 0) >= 10 * 10 / 1000  # each waits the new round trip
        second.teardown()
    finally:
        common.stop_parked()
        for eng in reversed(made):  # the kept server, its standby, the run's network
            eng.remove_container()
        shutil.rmtree(host_dir(run_dir), ignore_errors=True)
    assert not proxy.alive()
