"""``tunelab probe network``: round trip and send rate of the path a standby's log takes.

On this lab's hosts a standby reaches its primary over 127.0.0.1 through the delay proxy
(``tunelab.host.delayproxy``) that gives the link its round trip; the probe measures that same
path: a sink and echo server in a child process, the proxy in front of it at the round trip
asked for, and this process as the sender.

- Round trip: ``pings`` one-byte messages echoed back one after another (TCP_NODELAY), the
  median and 95th percentile; as IBM's procedure takes it from ``ping``.
- Send rate: ``megabytes`` sent and acknowledged by the sink (the time less one round trip),
  per socket buffer size
  (SO_SNDBUF on the sender, SO_RCVBUF on the sink), from 64 KiB doubling until a size is
  less than 5 % faster than the one before, or 32 MiB (IBM's cap), as IBM's simulator's
  TCP-window procedure does. The best rate and the round trip are the calculator's
  ``--network RATE RTT``.

What the proxy does not emulate, and the probe shows: it reads each chunk as soon as it
arrives and holds it in a queue for the delay, so the TCP windows only span the loopback
hops and the socket buffer size does not limit the rate as it does on a long link (where a
buffer below rate x round trip caps it). The rate is the proxy's and the loopback's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tunelab.host import delayproxy

MIB = 1 << 20
FIRST_BUFFER, MAX_BUFFER = 64 << 10, 32 << 20
MIN_GAIN = 0.05  # a doubling that gains less than this ends the search
CHUNK = 1 << 20
HEADER = struct.Struct("!cQI")  # mode, bytes to sink, receive buffer


@dataclass(frozen=True)
class NetworkProbe:
    rtt_ms_asked: float
    rtt_s: list[float]  # every ping's round trip
    rates: dict[int, float]  # socket buffer bytes -> median bytes/s
    megabytes: float

    @property
    def rtt_median_s(self) -> float:
        return statistics.median(self.rtt_s)

    @property
    def best(self) -> tuple[int, float]:
        """The smallest buffer within MIN_GAIN of the fastest, and its rate."""
        top = max(self.rates.values())
        size = min(s for s, r in self.rates.items() if r >= top / (1 + MIN_GAIN))
        return size, self.rates[size]

    def lines(self) -> list[str]:
        rtt = sorted(self.rtt_s)
        p95 = rtt[min(len(rtt) - 1, int(0.95 * len(rtt)))]
        size, rate = self.best
        out = [
            f"network: 127.0.0.1 through the lab's delay proxy at {self.rtt_ms_asked:g} ms",
            f"  round trip: median {self.rtt_median_s * 1000:.3f} ms, 95th percentile "
            f"{p95 * 1000:.3f} ms ({len(rtt)} one-byte pings)",
            f"  send rate by socket buffer ({self.megabytes:g} MB of 2^20 each):",
        ]
        out += [f"    {s >> 10:>6} KiB  {r / MIB:9.1f} MB/s" for s, r in self.rates.items()]
        bdp = rate * self.rtt_median_s
        out.append(
            f"  buffer: {size >> 10} KiB is within {MIN_GAIN:.0%} of the fastest; rate x "
            f"round trip is {bdp / 1024:.0f} KiB (on a long link, without the proxy's "
            "queue, a smaller buffer caps the rate)"
        )
        out.append(f"hadr-calc option: --network {rate / MIB:.1f} {self.rtt_median_s:.6f}")
        return out


def buffer_sizes(measure: Callable[[int], float]) -> dict[int, float]:
    """Rates from FIRST_BUFFER doubling, until a doubling gains less than MIN_GAIN or the
    size passes MAX_BUFFER."""
    rates: dict[int, float] = {}
    size, last = FIRST_BUFFER, 0.0
    while size <= MAX_BUFFER:
        rates[size] = rate = measure(size)
        if last and rate < last * (1 + MIN_GAIN):
            break
        last, size = max(last, rate), size * 2
    return rates


# -- the far end: a child process, so that its reads never wait for the sender's lock --------


def _serve_one(conn: socket.socket) -> None:
    with conn:
        head = conn.recv(HEADER.size, socket.MSG_WAITALL)
        if len(head) < HEADER.size:
            return
        mode, total, rcvbuf = HEADER.unpack(head)
        if mode == b"e":
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := conn.recv(4096):
                conn.sendall(data)
            return
        if rcvbuf:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        got = 0
        while got < total and (data := conn.recv(CHUNK)):
            got += len(data)
        conn.sendall(b"k")


def serve() -> None:
    listener = delayproxy.bind("127.0.0.1", 0)
    print(f"listening 127.0.0.1:{listener.getsockname()[1]}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve_one, args=(conn,), daemon=True).start()


class _Server:
    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tunelab.probes.network",
                "--serve",
                "--parent-pid",
                str(os.getpid()),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line.startswith("listening "):
            self.stop()
            raise OSError(f"probe server did not start: {line.strip() or 'no output'}")
        self.port = int(line.split(":")[-1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


# -- the sender ------------------------------------------------------------------------------


def _connect(port: int, sndbuf: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if sndbuf:  # before connect, so the window scale is chosen for it
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.settimeout(60)
    sock.connect(("127.0.0.1", port))
    return sock


def _pings(port: int, count: int) -> list[float]:
    with contextlib.closing(_connect(port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(HEADER.pack(b"e", 0, 0))
        times = []
        for _ in range(count + 1):  # the first one opens the proxy's far connection
            t0 = time.perf_counter()
            sock.sendall(b"p")
            if sock.recv(1) != b"p":
                raise OSError("the echo server closed the connection")
            times.append(time.perf_counter() - t0)
        return times[1:]


def _send_rate(port: int, size: int, total: int, rtt_s: float) -> float:
    """Bytes per second while sending: the time to the sink's acknowledgement less one round
    trip (the last byte's way there and the acknowledgement's way back)."""
    payload = memoryview(bytes(CHUNK))
    with contextlib.closing(_connect(port, size)) as sock:
        sock.sendall(HEADER.pack(b"s", total, size))
        t0 = time.perf_counter()
        left = total
        while left:
            left -= sock.send(payload[: min(CHUNK, left)])
        if sock.recv(1) != b"k":
            raise OSError("the sink closed the connection before it had every byte")
        return total / max(time.perf_counter() - t0 - rtt_s, 1e-9)


def probe(
    rtt_ms: float = 0.0, megabytes: float = 64, pings: int = 200, repetitions: int = 3
) -> NetworkProbe:
    """Start the far end and the proxy, measure, stop both (in every outcome)."""
    if not rtt_ms >= 0:
        raise ValueError(f"--rtt-ms: must be >= 0, not {rtt_ms}")
    if not megabytes > 0:
        raise ValueError(f"--megabytes: must be > 0, not {megabytes}")
    total = int(megabytes * MIB)
    server = _Server()
    try:
        proxy = delayproxy.Proxy(server.port, rtt_ms / 2)
        try:
            rtt = _pings(proxy.port, pings)

            def measure(size: int) -> float:
                return statistics.median(
                    _send_rate(proxy.port, size, total, statistics.median(rtt))
                    for _ in range(repetitions)
                )

            rates = buffer_sizes(measure)
        finally:
            proxy.stop()
    finally:
        server.stop()
    return NetworkProbe(rtt_ms, rtt, rates, megabytes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tunelab.probes.network")
    parser.add_argument("--serve", action="store_true", required=True)
    parser.add_argument("--parent-pid", type=int)
    args = parser.parse_args(argv)
    if args.parent_pid:
        threading.Thread(
            target=delayproxy.watch_parent, args=(args.parent_pid,), daemon=True
        ).start()
    serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
