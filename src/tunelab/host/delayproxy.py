"""A TCP proxy that delays every byte by a fixed time each way: a network round trip between a
primary and its standby on one host, where the kernel has no netem.

    python -m tunelab.host.delayproxy --listen 127.0.0.1:PORT --target 127.0.0.1:PORT --delay-ms D

Each direction of each connection has a reader thread, which stamps every chunk it receives
with its arrival time, and a writer thread, which sends the chunks in order, each no earlier
than ``delay`` after its arrival: the delay adds latency without limiting the rate (the chunks
in flight overlap, as on a long link). A round trip through the proxy takes twice the delay
plus the proxy's own hops and the wake-ups of idle CPUs: 0.06-0.27 ms measured on one 2-core
VM at delays of 0 to 10 ms, 0.2-0.8 ms on another, where the cost grew with the delay (threads
sleep with the kernel's timer slack at 1 ns; with the default 50 us a sleep
overshot by up to 0.5 ms, and asyncio's event loop keeps only whole milliseconds). Nothing
spins: a spinning proxy took CPU time from the engine (local commits, which never wait for
the standby, ran 25 % slower with a delay than without). The proxy prints
``listening HOST:PORT`` once bound, and ends when its parent does (``--parent-pid``), or on
SIGTERM/SIGINT. A line on its standard input sets a new one-way delay in ms for the bytes that
arrive from then on, on every connection, open or not (answered by ``delay MS``): a move to
another round trip keeps the standby's connection, which a new proxy would break.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

CHUNK = 256 * 1024


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r}: must be HOST:PORT")
    return host, int(port)


class Delay:
    """The one-way delay in seconds, shared by every connection and changed in place."""

    def __init__(self, seconds: float) -> None:
        self.s = seconds


def _pipe(src: socket.socket, dst: socket.socket, delay: Delay) -> None:
    """Copy ``src`` to ``dst``, each chunk the delay after it arrived (the delay as it was
    then); EOF is passed on (as a half close) after the delay too."""
    chunks: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

    def read() -> None:
        try:
            while data := src.recv(CHUNK):
                chunks.put((time.monotonic() + delay.s, data))
        except OSError:
            pass
        chunks.put((time.monotonic() + delay.s, b""))

    threading.Thread(target=read, daemon=True).start()
    try:
        while True:
            due, data = chunks.get()
            if (wait := due - time.monotonic()) > 0:
                time.sleep(wait)
            if not data:
                dst.shutdown(socket.SHUT_WR)
                return
            dst.sendall(data)
    except OSError:
        with contextlib.suppress(OSError):
            src.shutdown(socket.SHUT_RDWR)


def _serve(client: socket.socket, target: tuple[str, int], delay: Delay) -> None:
    try:
        upstream = socket.create_connection(target, timeout=10)
    except OSError:
        client.close()
        return
    upstream.settimeout(None)
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    both = [
        threading.Thread(target=_pipe, args=(client, upstream, delay), daemon=True),
        threading.Thread(target=_pipe, args=(upstream, client, delay), daemon=True),
    ]
    for t in both:
        t.start()
    for t in both:
        t.join()
    for s in (client, upstream):
        s.close()


def serve(listener: socket.socket, target: tuple[str, int], delay: Delay) -> None:
    """Accept connections on ``listener`` for ever, each proxied to ``target``."""
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_serve, args=(client, target, delay), daemon=True).start()


def take_delays(lines: Iterable[str], delay: Delay) -> None:
    """Each line a new one-way delay in ms (>= 0), answered on stdout; other lines are
    answered with ``error``."""
    for line in lines:
        try:
            ms = float(line)
        except ValueError:
            ms = -1.0
        if ms >= 0:
            delay.s = ms / 1000
            print(f"delay {ms!r}", flush=True)
        else:
            print(f"error: {line.strip()!r} is not a delay in ms >= 0", flush=True)


def bind(host: str, port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(16)
    return listener


def _tight_timers() -> None:
    """Sleeps end as close to their time as the kernel can (timer slack 1 ns instead of 50 us;
    threads started later inherit it). No spinning: that would take the CPU the engine or the
    client runs on."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK


def watch_parent(pid: int) -> None:
    """End this process once ``pid`` has ended."""
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(0)
        time.sleep(0.5)


class Proxy:
    """The proxy as a child process of this one (its own interpreter: its threads never wait
    for this process's lock), optionally on given CPUs; ``port`` is where it listens, on
    ``listen_host`` (127.0.0.1, or the run network's gateway for a container on it)."""

    def __init__(
        self,
        target_port: int,
        delay_ms: float,
        port: int = 0,
        cpus: Iterable[int] | None = None,
        listen_host: str = "127.0.0.1",
        target_host: str = "127.0.0.1",
    ) -> None:
        self.delay_ms = delay_ms
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        cpu_list = sorted(cpus or ())
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tunelab.host.delayproxy",
                "--listen",
                f"{listen_host}:{port}",
                "--target",
                f"{target_host}:{target_port}",
                "--delay-ms",
                repr(float(delay_ms)),
                "--parent-pid",
                str(os.getpid()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        if cpu_list:  # before it starts a connection's threads, which inherit it
            with contextlib.suppress(OSError):
                os.sched_setaffinity(self._process.pid, cpu_list)
        line = self._process.stdout.readline() if self._process.stdout else ""
        if not line.startswith("listening "):
            self.stop()
            err = self._process.stderr.read() if self._process.stderr else ""
            raise OSError(f"delay proxy did not start: {(err or line).strip() or 'no output'}")
        self.port = int(line.split(":")[-1])
        self.listen_host, self.target = listen_host, (target_host, target_port)

    def alive(self) -> bool:
        return self._process.poll() is None

    def set_delay(self, delay_ms: float) -> None:
        """A new one-way delay, for every byte that arrives once this returns."""
        assert self._process.stdin is not None and self._process.stdout is not None
        try:
            self._process.stdin.write(f"{float(delay_ms)!r}\n")
            self._process.stdin.flush()
            answer = self._process.stdout.readline()
        except (OSError, ValueError) as exc:  # ended: a broken pipe, or closed pipes
            raise OSError(f"delay proxy: {exc}") from None
        if not answer.startswith("delay "):
            raise OSError(f"delay proxy: {answer.strip() or 'ended'}")
        self.delay_ms = delay_ms

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for pipe in (self._process.stdin, self._process.stdout, self._process.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):  # stdin's flush, when the proxy had ended
                    pipe.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tunelab.host.delayproxy", description=__doc__)
    parser.add_argument("--listen", type=_address, required=True, metavar="HOST:PORT")
    parser.add_argument("--target", type=_address, required=True, metavar="HOST:PORT")
    parser.add_argument("--delay-ms", type=float, required=True, help="one way, >= 0")
    parser.add_argument("--parent-pid", type=int, help="end when this process has ended")
    args = parser.parse_args(argv)
    if not args.delay_ms >= 0:
        parser.error(f"--delay-ms: must be >= 0, not {args.delay_ms}")
    try:
        listener = bind(*args.listen)
    except OSError as exc:
        print(
            f"delayproxy: cannot listen on {args.listen[0]}:{args.listen[1]}: {exc.strerror}",
            file=sys.stderr,
        )
        return 1
    _tight_timers()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: os._exit(0))
    if args.parent_pid:
        threading.Thread(target=watch_parent, args=(args.parent_pid,), daemon=True).start()
    host, port = listener.getsockname()[:2]
    delay = Delay(args.delay_ms / 1000)
    threading.Thread(target=take_delays, args=(sys.stdin, delay), daemon=True).start()
    print(f"listening {host}:{port}", flush=True)
    serve(listener, args.target, delay)
    return 0


if __name__ == "__main__":
    sys.exit(main())
