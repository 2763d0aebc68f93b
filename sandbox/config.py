"""Configuration of the sandbox web: sizes, seed and the timing knobs of its special hosts."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .latency import LatencyModel


@dataclass(frozen=True)
class SandboxConfig:
    """Everything the generated web depends on. Same config (and port) → same web, byte for byte."""

    seed: int = 1
    hosts: int = 200
    pages_per_host: int = 100
    #: Distinct loopback addresses (127.0.x.y); hosts are spread over them so names share IPs.
    ips: int = 50
    #: ``Crawl-delay`` written by the crawl-delay robots variant (fractional keeps tests quick).
    crawl_delay_s: float = 0.5
    #: Delay before the slow robots.txt answers.
    robots_slow_s: float = 1.0
    #: Delay of slow pages.
    slow_page_s: float = 1.5
    #: How long every request to the hanging host sleeps before answering.
    hang_s: float = 30.0
    #: Size the oversized robots.txt reaches (must exceed ROBOTS_PARSE_LIMIT).
    oversized_robots_bytes: int = 600 * 1024
    #: Rendered pages kept in memory by the server.
    page_cache: int = 4096
    #: Host names are ``h{index:03d}.{domain}``.
    domain: str = "sandbox.test"
    #: Serve labelled duplicates (sandbox/duplicates.py). Off: the web is byte-identical to
    #: the one without this option.
    duplicates: bool = False
    #: Serve spider-trap hosts (sandbox/traps.py), each linked from a few normal pages. Off:
    #: the web is byte-identical to the one without this option.
    traps: bool = False
    #: Every allow-all host declares /sitemap.xml in its robots.txt, listing its pages and an
    #: orphan page no page links to (sandbox/sitemaps.py). Off: the web is byte-identical.
    sitemaps: bool = False
    #: The internet-like latency model (sandbox/latency.py); all fields below act only with it.
    #: Off: the web answers at once, byte-identical and as fast as without these options.
    latency: bool = False
    #: Median and lognormal shape (sigma) of a response's server time.
    latency_median_s: float = 0.15
    latency_shape: float = 0.7
    #: Share of hosts whose every response takes 1-3 s.
    slow_host_share: float = 0.02
    #: Share of requests whose connection is reset, or that hang for hang_s.
    fail_share: float = 0.01
    #: The server closes a kept-alive connection idle this long.
    keepalive_idle_s: float = 5.0
    #: Share of responses whose body is sent in 4 chunks, the server time spread between them.
    trickle_share: float = 0.0
    #: A host's base delay (its round-trip time) is uniform in [0, this).
    latency_max_base_s: float = 0.05
    #: A connection's first request also waits its handshakes' round trips: one host base
    #: delay for TCP, one more for TLS 1.3. ``tc netem`` would have the kernel charge them, but
    #: the machines this runs on lack sch_netem; on loopback a handshake costs no time at all.
    #: (The netns harness charges real round trips: ``deploy/netns-cluster rtt``.)
    handshake_rtts: bool = False
    #: Share of hosts served over HTTPS only (sandbox/tls.py), on a second port shared by all
    #: IPs, with a certificate per host name from a CA made at start. Independent of latency.
    https_share: float = 0.0
    #: The changing web (issue 19, sandbox/change_model.py and sandbox/changing.py): a share
    #: of the pages change as Poisson processes at known rates. Off: the web is byte-identical
    #: to the one without these options. Not with ``duplicates`` (a mirror copies its source).
    changes: bool = False
    #: Share of the pages that change; the others never do.
    change_share: float = 0.5
    #: A changing page's mean time between changes, log-uniform between these (simulated s).
    change_min_interval_s: float = 60.0
    change_max_interval_s: float = 7 * 86400.0
    #: Share of the changing pages whose changes touch only a date and counter line.
    cosmetic_share: float = 0.2
    #: Shares of hosts sending an ETag, a (true) Last-Modified, and a wrong Last-Modified
    #: (those send no ETag and ignore conditional headers).
    etag_share: float = 0.6
    last_modified_share: float = 0.6
    wrong_lm_share: float = 0.1
    #: Simulated seconds per wall second.
    time_acceleration: float = 1.0
    #: Wall time of simulated second 0; 0: when the server starts (it reports the value).
    change_epoch: float = 0.0
    #: A request's ``X-Sandbox-Clock`` header (wall seconds) is the changing web's "now" for
    #: it (versions, Last-Modified, Date): a driver that owns simulated time gets answers that
    #: do not depend on how loaded the machine is (bench/freshness_driver.py). Test webs only.
    virtual_clock: bool = False

    @classmethod
    def internet(cls, **overrides: object) -> SandboxConfig:
        """A web that answers like the internet: the latency model on, half the hosts on
        HTTPS, 2% of bodies trickled, handshakes paid in round trips; ``overrides`` win."""
        preset: dict[str, object] = {"latency": True, "https_share": 0.5, "trickle_share": 0.02,
                                     "handshake_rtts": True}
        return cls(**{**preset, **overrides})  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.hosts < 12:
            raise ValueError(f"hosts={self.hosts}: need at least 12 so every special host exists")
        # 10: every host keeps a /private/ page (i=5), the hanging host its 3 linked pages,
        # and the flagged pages (about 3%) stay a small share of each host's pages.
        if self.pages_per_host < 10:
            raise ValueError(f"pages_per_host={self.pages_per_host}: need at least 10")
        if not 1 <= self.ips <= self.hosts:
            raise ValueError(f"ips={self.ips}: must be between 1 and hosts={self.hosts}")
        for name in ("slow_host_share", "fail_share", "trickle_share", "https_share",
                     "change_share", "cosmetic_share", "etag_share", "last_modified_share",
                     "wrong_lm_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)}: must be between 0 and 1")
        if self.latency_median_s <= 0 or self.latency_shape < 0 or self.keepalive_idle_s <= 0 \
                or self.latency_max_base_s < 0:
            raise ValueError("latency_median_s and keepalive_idle_s must be > 0, "
                             "latency_shape and latency_max_base_s >= 0")
        if not 0 < self.change_min_interval_s <= self.change_max_interval_s:
            raise ValueError("need 0 < change_min_interval_s <= change_max_interval_s, got "
                             f"{self.change_min_interval_s} and {self.change_max_interval_s}")
        if not self.time_acceleration > 0 or self.change_epoch < 0:
            raise ValueError("time_acceleration must be > 0 and change_epoch >= 0")
        if self.changes and self.duplicates:
            raise ValueError("changes and duplicates cannot be combined: mirrors and duplicate "
                             "families copy pages that would change under them")
        if self.ips > 250 * 250:
            raise ValueError(f"ips={self.ips}: at most 62500 loopback addresses are generated")

    def latency_model(self) -> LatencyModel:
        """The latency model these fields describe (used only with ``latency``)."""
        return LatencyModel(self.seed, self.latency_median_s, self.latency_shape,
                            self.slow_host_share, self.fail_share, self.trickle_share,
                            self.latency_max_base_s, self.handshake_rtts)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
