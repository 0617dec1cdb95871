"""`tunelab probe disk` (real fio writes) and `tunelab probe network` (a real sink, echo server
and delay proxy on 127.0.0.1): the figures they read, the buffer search's stopping rule, and
the command line's errors."""

from __future__ import annotations

import os
import shutil

import pytest

from tunelab.probes import cli, disk, network

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


def _children() -> set[str]:
    path = f"/proc/{os.getpid()}/task/{os.getpid()}/children"
    return set(open(path).read().split()) if os.path.exists(path) else set()


def test_disk_readings_follow_ibms_procedure():
    """Overhead from the 1-page write, rate from the 1000-page write, the line through both."""
    rate = 100 * 2**20  # bytes/s
    small = 0.0005 + 4096 / rate
    big = 0.0005 + 1000 * 4096 / rate
    p = disk.DiskProbe("/x", "ext4", True, [small, small * 2, small], [big, big, big * 3])
    assert p.overhead_s == pytest.approx(small)
    assert p.rate_bytes_s == pytest.approx(1000 * 4096 / big)
    overhead, line_rate = p.line
    assert overhead == pytest.approx(0.0005) and line_rate == pytest.approx(rate)
    assert p.lines()[-1] == f"hadr-calc option: --disk {1000 * 4096 / big / 2**20:.3f} {small:.6f}"
    flat = disk.DiskProbe("/x", "tmpfs", False, [0.001], [0.0009])
    assert flat.line[1] is None
    assert any("no transfer cost" in line for line in flat.lines())


@needs_fio
def test_disk_probe_writes_for_real(tmp_path):
    p = disk.probe(tmp_path, seconds=0.2, repetitions=2)
    assert len(p.small_s) == len(p.big_s) == 2
    assert 0 < p.overhead_s < min(p.big_s)  # 1000 pages take longer than one
    assert p.rate_bytes_s > 0
    assert list(tmp_path.iterdir()) == []  # fio's file is gone


def test_buffer_search_stops_when_doubling_stops_helping():
    seen = []

    def levelling(size: int) -> float:
        seen.append(size)
        return float(min(size, 1 << 20))  # rises until 1 MiB, flat after

    rates = network.buffer_sizes(levelling)
    assert list(rates) == [64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20]
    assert seen == list(rates)
    assert list(network.buffer_sizes(float))[-1] == network.MAX_BUFFER  # always rising: the cap
    probe = network.NetworkProbe(
        0, [0.001], {64 << 10: 100.0, 128 << 10: 104.0, 256 << 10: 90.0}, 1
    )
    assert probe.best == (64 << 10, 100.0)  # within 5 % of the fastest, the smaller buffer


@pytest.mark.parametrize("rtt_ms", [0.0, 10.0])
def test_network_probe_measures_the_proxys_round_trip(rtt_ms):
    before = _children()
    p = network.probe(rtt_ms=rtt_ms, megabytes=2, pings=20, repetitions=1)
    assert len(p.rtt_s) == 20
    assert rtt_ms / 1000 <= p.rtt_median_s < rtt_ms / 1000 + 0.003
    assert next(iter(p.rates)) == network.FIRST_BUFFER and all(r > 0 for r in p.rates.values())
    assert p.lines()[-1].startswith("hadr-calc option: --network ")
    assert _children() <= before  # the server and the proxy are gone


@pytest.mark.parametrize(
    "argv, says",
    [
        (["disk", "/no/such/dir"], "/no/such/dir: no such directory"),
        (["disk"], "required: dir"),
        (["network", "--rtt-ms", "-1"], "--rtt-ms: must be >= 0, not -1"),
        (["network", "--megabytes", "0"], "--megabytes: must be > 0, not 0"),
        (["network", "--pings", "3"], "--pings: must be a whole number 10..10000, not 3"),
        (["disk", ".", "--repetitions", "x"], "--repetitions: must be a whole number"),
        (["ping"], "invalid choice: 'ping'"),
    ],
)
def test_bad_arguments_get_one_line_and_exit_2(argv, says, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tunelab probe: error: ") and says in err
