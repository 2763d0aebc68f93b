"""A scripted DNS server on loopback, for tests where a name's answer changes between queries
(DNS rebinding): real UDP, real DNS messages (dnspython), so the crawler's own name-server
lookup (``dns_servers``, workers/dns/pool.py) is what asks it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections import Counter

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset


class ScriptedDNS:
    """UDP DNS server on 127.0.0.1: the n-th A query for a name gets ``script[name][n]`` (the
    last entry repeats), always with TTL 0 (no cache may keep it); a name not scripted is
    NXDOMAIN, other query types get an empty answer. ``queries`` counts A queries per name
    (lower case, no trailing dot); :meth:`script` adds or replaces a name's answers (and
    starts its count again)."""

    def __init__(self, script: dict[str, list[str]] | None = None) -> None:
        self._script: dict[str, list[str]] = {}
        self.queries: Counter[str] = Counter()
        self._lock = threading.Lock()
        for name, answers in (script or {}).items():
            self.script(name, answers)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True, name="scripted-dns")
        self._thread.start()

    @property
    def address(self) -> str:
        """The server as a ``dns_servers`` entry."""
        return f"127.0.0.1:{self.port}"

    def script(self, name: str, answers: list[str]) -> None:
        name = name.lower().rstrip(".")
        with self._lock:
            self._script[name] = list(answers)
            self.queries.pop(name, None)

    def _answer(self, name: str) -> str | None:
        with self._lock:
            answers = self._script.get(name)
            if answers is None:
                return None
            n = self.queries[name]
            self.queries[name] += 1
            return answers[min(n, len(answers) - 1)]

    def _serve(self) -> None:
        while not self._stop:
            try:
                wire, peer = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            with contextlib.suppress(Exception):  # a malformed query gets no answer
                self.sock.sendto(self._reply(dns.message.from_wire(wire)), peer)

    def _reply(self, query: dns.message.Message) -> bytes:
        q = query.question[0]
        name = q.name.to_text().lower().rstrip(".")
        reply = dns.message.make_response(query)
        if dns.rdatatype.to_text(q.rdtype) == "A":
            ip = self._answer(name)
            if ip is None:
                reply.set_rcode(dns.rcode.NXDOMAIN)
            else:
                reply.answer.append(dns.rrset.from_text(q.name, 0, "IN", "A", ip))
        return reply.to_wire()

    def close(self) -> None:
        self._stop = True
        self._thread.join(1)
        self.sock.close()
