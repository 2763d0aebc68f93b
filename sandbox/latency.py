"""How long the internet-like sandbox takes to answer: a seeded, deterministic latency model.

The real web answers in hundreds of milliseconds, most of it the server's own time; a web that
answers in under a millisecond hides whether a crawler waits well. Per host a base delay (its
distance), per response a lognormal server time (median and shape configurable), a share of
slow hosts (1-3 s a response), a share of requests that fail (the connection is reset, or the
answer never comes in time), a share of bodies trickled in pauses, and (``handshake_rtts``) the
round trips of a new connection's TCP and TLS handshakes, added to its first request. Every
draw is a pure function of (seed, host, path, n-th request of that URL), so two servers with
the same seed answer alike.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist

_NORMAL = NormalDist()


class Failure(StrEnum):
    RESET = "reset"
    HANG = "hang"


@dataclass(frozen=True, slots=True)
class Answer:
    """What the model decides for one request."""

    delay_s: float
    failure: Failure | None = None
    #: send the body in this many chunks, with delay_s / chunks between them (0: at once)
    trickle_chunks: int = 0


@dataclass(frozen=True, slots=True)
class LatencyModel:
    seed: int
    median_s: float = 0.15
    shape: float = 0.7
    slow_host_share: float = 0.02
    fail_share: float = 0.01
    trickle_share: float = 0.0
    #: a host's base delay (its round-trip time) is uniform in [0, max_base_s)
    max_base_s: float = 0.05
    #: a connection's first request also pays its handshakes' round trips (handshake_s)
    handshake_rtts: bool = False

    def _u(self, *parts: object) -> float:
        """A uniform draw in (0, 1) from the seed and ``parts``."""
        digest = hashlib.blake2b(repr((self.seed, *parts)).encode(), digest_size=8).digest()
        return (struct.unpack(">Q", digest)[0] + 0.5) / 2.0 ** 64

    def host_base_s(self, host: str) -> float:
        return self.max_base_s * self._u("base", host)

    def handshake_s(self, host: str, tls: bool) -> float:
        """What opening a connection to ``host`` adds to its first request: a round trip
        (the base delay) for TCP's handshake, another for TLS 1.3's; 0 when not modelled."""
        if not self.handshake_rtts:
            return 0.0
        return self.host_base_s(host) * (2 if tls else 1)

    def slow_host(self, host: str) -> bool:
        return self._u("slow", host) < self.slow_host_share

    def server_time_s(self, host: str, path: str, n: int) -> float:
        if self.slow_host(host):
            return 1.0 + 2.0 * self._u("slow-time", host, path, n)
        z = _NORMAL.inv_cdf(self._u("time", host, path, n))
        return self.median_s * math.exp(self.shape * z)

    def answer(self, host: str, path: str, n: int) -> Answer:
        delay = self.host_base_s(host) + self.server_time_s(host, path, n)
        failure = None
        if self._u("fail", host, path, n) < self.fail_share:
            failure = Failure.RESET if self._u("how", host, path, n) < 0.5 else Failure.HANG
        chunks = 4 if self._u("trickle", host, path, n) < self.trickle_share else 0
        return Answer(delay, failure, chunks)
