"""What a fetch returns (:class:`FetchResult`) and the vocabulary of its ``error`` field.

Kept apart from the fetcher so storage, parsing and the WARC writer can import the result type
without pulling in urllib3's connection machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Media types parsed as HTML (links, near-duplicates, soft-404 signatures); what is
#: downloaded at all is the crawl's ``allowed_content_types`` (frontier/config.py).
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

#: robots.txt bytes parsed (workers/pipeline/robots.py): RFC 9309 §2.5 asks parsers for at least
#: 500 KiB; what follows the last full line before the cut is dropped.
ROBOTS_MAX_BYTES = 500 * 1024
#: robots.txt bytes fetched: a little more than is parsed, so the parser sees that a longer
#: file was cut (``RobotsPolicy.truncated``) from the body alone.
ROBOTS_FETCH_BYTES = ROBOTS_MAX_BYTES + 4096
#: Redirects followed to a robots.txt (RFC 9309 §2.3.1.2: at least five).
ROBOTS_MAX_REDIRECTS = 5

#: Values of ``FetchResult.error``.
ERROR_CLASSES: dict[str, str] = {
    "invalid_url": "URL is not absolute http(s) or cannot be parsed; nothing sent",
    "dns": "host name did not resolve (resolver raised DNSError)",
    "forbidden_ip": "the address policy refused the IP (workers/dns/policy.py); nothing sent",
    "connect_error": "TCP connection refused / unreachable",
    "timeout": "connect, read (no byte for read_timeout_s) or total wall-time timeout",
    "tls_error": "TLS handshake or certificate verification failed",
    "connection_reset": "peer closed or reset the connection before the response was complete",
    "invalid_response": "not parseable as HTTP/1.x (bad status line, header, chunk framing)",
    "decoding_error": "Content-Encoding could not be decoded",
    "too_large": "decoded body exceeded max_bytes; body kept up to the cap, truncated=True",
    "content_type_skipped": "media type not in the allow list; body not downloaded",
    "too_many_redirects": "fetch_robots: still a redirect after 5 hops",
    "aborted": "the worker ended the fetch: its lease had lapsed (Redis out of reach), so "
               "another worker may be fetching the host",
    "fetch_error": "any other failure (see error_detail)",
}

#: Why a body is cut short (``FetchResult.truncation``): the reasons of WARC 1.1's
#: ``WARC-Truncated`` header, which the WARC writer copies.
TRUNCATIONS: dict[str, str] = {
    "length": "the body reached the byte cap (max_bytes): our own policy, kept as it is",
    "time": "the fetch's time ran out mid-body (total_timeout_s, or read_timeout_s between "
            "two reads)",
    "disconnect": "the peer closed or reset the connection before the body was complete "
                  "(fewer bytes than Content-Length, chunked framing cut off)",
    "unspecified": "cut for another reason (the worker ended the fetch, a body that did "
                   "not decode or parse)",
}
#: Reasons where the network is to blame, not the page nor our limits: worth another try.
NETWORK_TRUNCATIONS = frozenset({"time", "disconnect"})
#: The truncation an error that ends a body early implies (else ``unspecified``).
TRUNCATION_BY_ERROR: dict[str, str] = {
    "too_large": "length", "timeout": "time", "connection_reset": "disconnect",
    "tls_error": "disconnect",
}


def truncation_of(error: str) -> str:
    """The truncation of a body that ``error`` ended after the status line: a reset or a
    body short of its Content-Length (IncompleteRead) is ``disconnect``, the watchdog or a
    read timeout ``time``, the worker ending it (``aborted``) ``unspecified``."""
    return TRUNCATION_BY_ERROR.get(error, "unspecified")


@dataclass
class FetchResult:
    """Outcome of one fetch: everything the parser, the frontier and the WARC writer need."""

    url: str
    ip: str | None = None
    status: int | None = None
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    content_type: str | None = None
    location: str | None = None
    elapsed_s: float = 0.0
    error: str | None = None
    error_detail: str | None = None
    truncated: bool = False
    #: why the body is cut (a key of :data:`TRUNCATIONS`) when ``truncated``; see :meth:`cut`
    truncation: str | None = None
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    http_version: str = "HTTP/1.1"
    started_at: float = 0.0
    #: ``fetch_robots`` only: the URLs that redirected, in order (``url`` is the last hop).
    redirects: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """A 2xx response read completely (or truncated without an error, as robots.txt)."""
        return self.error is None and self.status is not None and 200 <= self.status < 300

    def cut(self, reason: str) -> None:
        """Mark the body as cut short for ``reason`` (a key of :data:`TRUNCATIONS`)."""
        self.truncated = True
        self.truncation = reason

    @property
    def cut_reason(self) -> str | None:
        """Why the body is cut short (a key of :data:`TRUNCATIONS`), None if it is whole:
        ``truncation`` as the fetcher set it, else (a result built by hand with only
        ``truncated``) what its error implies."""
        if not self.truncated:
            return None
        if self.truncation is not None:
            return self.truncation
        if self.error is None:
            return "length"  # a cap that is not an error (robots.txt)
        return truncation_of(self.error)

    @property
    def network_cut(self) -> bool:
        """A 2xx body the network cut short (disconnect or time): the page is incomplete
        through no fault of its own nor of our limits, so it is worth fetching again."""
        return (self.cut_reason in NETWORK_TRUNCATIONS
                and self.status is not None and 200 <= self.status < 300)

    @property
    def is_redirect(self) -> bool:
        return self.status in (301, 302, 303, 307, 308) and self.location is not None

    def header(self, name: str, default: str | None = None) -> str | None:
        """First value of response header ``name`` (case-insensitive)."""
        lname = name.lower()
        for k, v in self.headers:
            if k.lower() == lname:
                return v
        return default
