"""A delay line on a TUN device: real round-trip times between the netns harness's nodes.

The kernel of these machines has no ``sch_netem``, so ``tc qdisc ... netem delay`` cannot give
a namespace a round-trip time, and the sandbox's latency model can only wait before an answer:
TCP and TLS handshakes on a veth cost nothing. ``deploy/netns-cluster rtt NODE MS`` routes every
packet NODE sends to the other nodes into a TUN device (policy routing: ``iif lo``, i.e. the
node's own packets) and starts this process on it. Each packet is read here, held for its
source address's round-trip time and written back into the device, which hands it to the
kernel as if it had arrived there; the node forwards it out of its eth0 as usual.

The whole round trip is charged on the way back (NODE -> others): a SYN-ACK, a TLS
ServerHello and every answer wait one RTT, so each exchange of a connection pays it once, as
on the internet, and TCP's own timers (slow start, retransmission) see it. A source address's
RTT is fixed (per-IP spread drawn from a seeded lognormal), so packets of one connection keep
their order. Hand-written because no library here does this: it is a few lines of TUN ioctl
and a heap.

    python -m sandbox.delayline --dev rtt0 --rtt-ms 80 [--spread 0.5] [--seed 1] [--stats F]
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import heapq
import json
import math
import os
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import NormalDist

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
#: Packets held at once, at most: past it a packet is dropped (a router's full queue).
MAX_HELD = 200_000
#: Per-IP RTTs are clipped to [rtt / CLIP, rtt * CLIP].
CLIP = 4.0


@dataclass(frozen=True)
class RttModel:
    """A round-trip time per source address: ``rtt_ms`` x exp(``spread`` x z), z a seeded
    standard normal of the address (clipped to CLIP either way); spread 0 = one RTT for all."""

    rtt_ms: float
    spread: float = 0.0
    seed: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.rtt_ms <= 10_000.0:
            raise ValueError(f"rtt_ms={self.rtt_ms}: must be in 0..10000")
        if not 0.0 <= self.spread <= 3.0:
            raise ValueError(f"spread={self.spread}: must be in 0..3")

    def rtt_s(self, ip: str) -> float:
        """The round-trip time of packets from ``ip``, in seconds."""
        if self.spread == 0.0:
            return self.rtt_ms / 1000.0
        digest = hashlib.blake2b(f"{self.seed}:{ip}".encode(), digest_size=8).digest()
        u = (int.from_bytes(digest, "big") + 0.5) / 2.0**64
        factor = min(CLIP, max(1.0 / CLIP, math.exp(self.spread * NormalDist().inv_cdf(u))))
        return self.rtt_ms * factor / 1000.0


@dataclass
class LineStats:
    """What the line did; written as JSON to ``--stats`` at exit and every few seconds."""

    packets: int = 0
    bytes: int = 0
    dropped_full: int = 0
    #: Packets that were not IPv4 (the harness turns IPv6 off; none are expected).
    dropped_not_ipv4: int = 0
    write_errors: int = 0
    max_held: int = 0
    #: How late packets left against their release time (the line's own lag: a busy machine
    #: makes the round trips longer than the model's).
    late_mean_ms: float = 0.0
    late_max_ms: float = 0.0
    #: Packets written back, and the sum of their lateness (for the mean over any window).
    released: int = 0
    late_total_ms: float = 0.0
    cpu_s: float = 0.0
    wall_s: float = 0.0


def open_tun(name: str) -> int:
    """A non-blocking fd attached to the (persistent, ``ip tuntap add mode tun``) device."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


class DeviceGone(Exception):
    """The TUN device went away (``ip link del``): the line ends."""


class DelayLine:
    """Reads IPv4 packets from ``fd`` and writes each back after its source's RTT."""

    def __init__(self, fd: int, model: RttModel, max_held: int = MAX_HELD) -> None:
        self.fd = fd
        self.model = model
        self.max_held = max_held
        self.stats = LineStats()
        self._held: list[tuple[float, int, bytes]] = []
        self._seq = 0
        self._rtt_of: dict[bytes, float] = {}  # 4-byte source address -> seconds
        self._late_sum = 0.0
        self._released = 0

    def _delay(self, packet: bytes) -> float:
        src = packet[12:16]
        rtt = self._rtt_of.get(src)
        if rtt is None:
            rtt = self._rtt_of[src] = self.model.rtt_s(socket.inet_ntoa(src))
        return rtt

    def take(self, now: float) -> None:
        """Every packet waiting in the device, queued for its release time."""
        while True:
            try:
                packet = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            except OSError as exc:  # EBADFD: the device was deleted under us
                raise DeviceGone(str(exc)) from exc
            if len(packet) < 20 or packet[0] >> 4 != 4:
                self.stats.dropped_not_ipv4 += 1  # the harness disables IPv6
                continue
            if len(self._held) >= self.max_held:
                self.stats.dropped_full += 1
                continue
            self._seq += 1
            heapq.heappush(self._held, (now + self._delay(packet), self._seq, packet))
            self.stats.packets += 1
            self.stats.bytes += len(packet)

    def release(self, now: float) -> float | None:
        """Writes back every packet due by ``now``; seconds until the next one (None: none)."""
        held = self._held
        self.stats.max_held = max(self.stats.max_held, len(held))
        while held and held[0][0] <= now:
            due, _, packet = heapq.heappop(held)
            late = now - due
            self._late_sum += late
            self._released += 1
            if late * 1000.0 > self.stats.late_max_ms:
                self.stats.late_max_ms = late * 1000.0
            try:
                os.write(self.fd, packet)
            except OSError:
                self.stats.write_errors += 1
        return held[0][0] - now if held else None

    def run(self, stop: list[bool], stats_path: Path | None = None,
            stats_every_s: float = 2.0) -> LineStats:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        t0, cpu0 = time.monotonic(), time.process_time()
        next_stats = t0 + stats_every_s
        wait: float | None = None
        while not stop[0]:
            timeout_ms = 500 if wait is None else min(500, max(0, math.ceil(wait * 1000)))
            if poller.poll(timeout_ms):
                try:
                    self.take(time.monotonic())
                except DeviceGone:
                    break
            now = time.monotonic()
            wait = self.release(now)
            if stats_path is not None and now >= next_stats:
                self._write_stats(stats_path, t0, cpu0)
                next_stats = now + stats_every_s
        if stats_path is not None:
            self._write_stats(stats_path, t0, cpu0)
        return self.stats

    def _write_stats(self, path: Path, t0: float, cpu0: float) -> None:
        self.stats.cpu_s = round(time.process_time() - cpu0, 3)
        self.stats.released = self._released
        self.stats.late_total_ms = round(1000.0 * self._late_sum, 3)
        if self._released:
            self.stats.late_mean_ms = round(1000.0 * self._late_sum / self._released, 3)
        self.stats.late_max_ms = round(self.stats.late_max_ms, 3)
        self.stats.wall_s = round(time.monotonic() - t0, 3)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self.stats)))
        os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sandbox.delayline", description=__doc__)
    ap.add_argument("--dev", required=True, help="TUN device (made by `ip tuntap add mode tun`)")
    ap.add_argument("--rtt-ms", type=float, required=True)
    ap.add_argument("--spread", type=float, default=0.0,
                    help="lognormal sigma of the per-source-IP RTT (0: the same for all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stats", type=Path, help="JSON file of counters, rewritten every 2 s")
    args = ap.parse_args(argv)
    try:
        model = RttModel(args.rtt_ms, args.spread, args.seed)
        fd = open_tun(args.dev)
    except (ValueError, OSError) as exc:
        print(f"delayline: {exc}", file=sys.stderr)
        return 2
    stop = [False]

    def on_signal(_sig: int, _frame: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(json.dumps({"dev": args.dev, **asdict(model)}), flush=True)
    DelayLine(fd, model).run(stop, args.stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
