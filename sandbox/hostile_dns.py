"""The hostile web's name server: UDP DNS on loopback that fails in the ways DNS fails.

Each name it knows has one behaviour: ``nxdomain``, ``servfail``, ``hang`` (the query is
read and never answered: the crawl's ``dns_timeout_s`` must end the wait), or an IPv4
address to answer (a private one, for the address policy). Any other name: REFUSED.
dnspython makes and reads the packets; the server is a plain socket loop on a thread.
"""

from __future__ import annotations

import contextlib
import socket
import threading

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset

FAILURES = ("nxdomain", "servfail", "hang")


class HostileDNS:
    """Answers ``names`` (host name -> behaviour) on 127.0.0.1:``port``; counts queries."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = {n.lower().rstrip("."): b for n, b in names.items()}
        self.queries: dict[str, int] = {}
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="hostile-dns")

    def start(self) -> HostileDNS:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._sock.close()

    def __enter__(self) -> HostileDNS:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def count(self, name: str) -> int:
        with self._lock:
            return self.queries.get(name.lower(), 0)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                wire, peer = self._sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                query = dns.message.from_wire(wire)
                question = query.question[0]
            except Exception:
                continue  # not DNS: nothing to answer
            name = question.name.to_text().lower().rstrip(".")
            with self._lock:
                self.queries[name] = self.queries.get(name, 0) + 1
            behaviour = self.names.get(name)
            if behaviour == "hang":
                continue
            reply = dns.message.make_response(query)
            if behaviour is None:
                reply.set_rcode(dns.rcode.REFUSED)
            elif behaviour == "nxdomain":
                reply.set_rcode(dns.rcode.NXDOMAIN)
            elif behaviour == "servfail":
                reply.set_rcode(dns.rcode.SERVFAIL)
            elif question.rdtype == dns.rdatatype.A:
                reply.answer.append(dns.rrset.from_text(question.name, 60, "IN", "A",
                                                        behaviour))
            with contextlib.suppress(OSError):
                self._sock.sendto(reply.to_wire(), peer)
