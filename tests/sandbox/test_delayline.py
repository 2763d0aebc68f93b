"""sandbox/delayline.py on its own: the per-address RTT model, and the line's hold-and-release
on a packet socket pair (the TUN device's read/write semantics: one packet a call). The line
inside the netns harness is tested by tests/test_netns_rtt.py."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from sandbox.delayline import CLIP, DelayLine, RttModel


def ipv4(src: str, n: int) -> bytes:
    """A minimal IPv4 header from ``src`` with ``n`` in its identification field."""
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20, n, 0, 64, 6, 0, socket.inet_aton(src),
                       socket.inet_aton("10.0.0.9"))


def test_rtt_model_is_seeded_spread_and_clipped() -> None:
    flat = RttModel(80.0)
    assert {flat.rtt_s(f"10.0.0.{i}") for i in range(50)} == {0.08}
    model = RttModel(80.0, spread=0.5, seed=3)
    rtts = [model.rtt_s(f"10.0.{i // 250}.{i % 250}") for i in range(2000)]
    assert rtts == [RttModel(80.0, 0.5, 3).rtt_s(f"10.0.{i // 250}.{i % 250}")
                    for i in range(2000)]  # the same on every run and process
    assert rtts != [RttModel(80.0, 0.5, 4).rtt_s(f"10.0.{i // 250}.{i % 250}")
                    for i in range(2000)]
    median = sorted(rtts)[len(rtts) // 2]
    assert 0.072 < median < 0.088  # lognormal around the given RTT
    wide = [RttModel(80.0, spread=3.0).rtt_s(f"10.1.0.{i}") for i in range(250)]
    assert min(wide) >= 0.08 / CLIP - 1e-12 and max(wide) <= 0.08 * CLIP + 1e-12
    assert min(wide) == pytest.approx(0.08 / CLIP) and max(wide) == pytest.approx(0.08 * CLIP)


@pytest.mark.parametrize("bad", [{"rtt_ms": -1.0}, {"rtt_ms": 20_000.0},
                                 {"rtt_ms": 10.0, "spread": -0.1}])
def test_rtt_model_refuses_bad_values(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RttModel(**bad)


def test_line_holds_each_packet_for_its_sources_rtt_in_order() -> None:
    inside, outside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    inside.setblocking(False)
    model = RttModel(100.0, spread=1.0, seed=7)
    fast, slow = sorted(("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"), key=model.rtt_s)[::3]
    assert model.rtt_s(slow) - model.rtt_s(fast) > 0.03
    line = DelayLine(inside.fileno(), model)
    stop = [False]
    runner = threading.Thread(target=line.run, args=(stop,), daemon=True)
    runner.start()
    sent: dict[bytes, float] = {}
    for n in range(20):
        for src in (slow, fast):
            packet = ipv4(src, n)
            sent[packet] = time.monotonic()
            outside.send(packet)
        time.sleep(0.002)
    outside.send(b"\x60" + bytes(39))  # IPv6: not routed back
    got: list[tuple[bytes, float]] = []
    outside.settimeout(2.0)
    while len(got) < 40:
        packet = outside.recv(65536)
        got.append((packet, time.monotonic()))
    stop[0] = True
    runner.join(2.0)
    for packet, at in got:
        src = socket.inet_ntoa(packet[12:16])
        assert model.rtt_s(src) <= at - sent[packet] <= model.rtt_s(src) + 0.03, src
    for src in (slow, fast):  # each source's packets come back in the order they went in
        ids = [struct.unpack("!H", p[4:6])[0] for p, _ in got if p[12:16] == socket.inet_aton(src)]
        assert ids == list(range(20))
    # the fast source's packets overtake the slow one's: the delay is per address
    assert socket.inet_ntoa(got[0][0][12:16]) == fast
    assert line.stats.packets == 40 and line.stats.dropped_full == 0
    assert line.stats.dropped_not_ipv4 == 1
    assert 0.0 <= line.stats.late_max_ms < 30.0
    inside.close()
    outside.close()


def test_a_full_line_drops_and_counts() -> None:
    inside, outside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    inside.setblocking(False)
    line = DelayLine(inside.fileno(), RttModel(1000.0), max_held=5)
    for n in range(8):
        outside.send(ipv4("10.0.0.1", n))
    line.take(time.monotonic())
    assert line.stats.packets == 5 and line.stats.dropped_full == 3
    assert line.release(time.monotonic()) == pytest.approx(1.0, abs=0.05)
    inside.close()
    outside.close()
