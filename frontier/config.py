"""Crawl settings: one typed, commented table of defaults, validated before a crawl starts.

Units are in the names (``_s`` seconds, ``_bytes``), so no setting needs a guess. The whole
config is stored in Redis when a crawl starts, so a worker that joins later (``trawl worker``)
runs with exactly the crawl's settings.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from workers.useragent import DEFAULT_CONTACT

log = logging.getLogger(__name__)

E_BAD_VALUE = (
    "Setting {name}={value!r} is invalid: {why}. Fix it in the config or on the command line."
)
E_UNKNOWN = "Unknown setting {name!r}. Known settings: {known}."


#: Crawl orderings (front-queue priorities) a crawl may select.
ORDERINGS = ("bfs", "random", "indegree", "opic")
BLOOM_BACKENDS = ("auto", "lua", "redisbloom")


class ConfigError(ValueError):
    """A setting that cannot work; the message names the setting and the fix."""


@dataclass
class CrawlConfig:
    #: Crawl name; every Redis key of the crawl starts with it, so crawls can share a Redis.
    namespace: str = "trawl"
    #: Number of partitions P (fixed for the life of a crawl). partition = hash(host) mod P.
    partitions: int = 64

    # --- politeness --------------------------------------------------------------------
    #: Minimum delay between two requests to one host. The real web wants seconds.
    host_delay_s: float = 2.0
    #: Adaptive delay: k x the last response time (Mercator's rule), bounded by max_delay_s.
    adaptive_delay_factor: float = 2.0
    #: Upper bound on the adaptive delay and on a robots.txt Crawl-delay.
    max_delay_s: float = 60.0
    #: Requests in flight per IP address at once (0 = no per-IP limit, only per host).
    ip_concurrency: int = 1
    #: Minimum delay between two requests to one IP address (per-IP politeness).
    ip_delay_s: float = 0.0

    # --- fetching ----------------------------------------------------------------------
    user_agent_contact: str = DEFAULT_CONTACT
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 15.0
    total_timeout_s: float = 30.0
    max_body_bytes: int = 10 * 1024 * 1024
    allowed_content_types: list[str] = field(
        default_factory=lambda: ["text/html", "application/xhtml+xml", "text/plain"]
    )
    #: Fetch private, loopback and link-local addresses (off for the real web; the sandbox
    #: web turns it on).
    allow_private_ips: bool = False
    #: Static host -> IP map consulted before DNS (the sandbox web's resolver).
    static_hosts: dict[str, str] = field(default_factory=dict)
    dns_ttl_s: float = 300.0
    #: DNS servers ("ip" or "ip:port") asked directly (dnspython) instead of the system
    #: resolver; empty = getaddrinfo. Lookups never block other fetches (workers/dnspool.py).
    dns_servers: list[str] = field(default_factory=list)
    #: A name not resolved within this long counts as a DNS failure.
    dns_timeout_s: float = 5.0
    #: Extra CA certificates (a PEM file) trusted for HTTPS besides certifi's bundle: a
    #: private CA such as the sandbox web's. Verification is never turned off.
    ca_bundle: str = ""
    #: Fetches in flight at once in one worker process (workers/engine.py). Each waits on
    #: the network most of its time; threads are made only as fetches need them. 2500 keeps
    #: ~2,460 in flight on a web of 20,000 slow hosts at ~375 MB RSS (bench/inflight.py);
    #: see docs/fetch-engine.md. The worker raises its open-file limit to match
    #: (workers/fdlimit.py).
    fetch_concurrency: int = 2500

    # --- robots.txt ----------------------------------------------------------------------
    robots_ttl_s: float = 86400.0
    #: How long a 5xx/unreachable robots.txt (disallow all, RFC 9309) is kept before retrying.
    robots_error_ttl_s: float = 600.0

    # --- retries -------------------------------------------------------------------------
    max_retries: int = 2
    #: Backoff before retry n is retry_backoff_s * 2**(n-1), applied to the host's next fetch.
    retry_backoff_s: float = 1.0

    # --- scope ---------------------------------------------------------------------------
    #: Hosts or domains allowed (a domain allows its subdomains). Empty = the seeds' hosts.
    allowed_domains: list[str] = field(default_factory=list)
    #: Hosts or domains never crawled (a domain denies its subdomains); wins over allowed.
    denied_domains: list[str] = field(default_factory=list)
    #: Regular expressions (``re.search`` on the canonical URL): when any is given, a URL must
    #: match one to be admitted; a URL matching any deny pattern is never admitted.
    allow_url_patterns: list[str] = field(default_factory=list)
    deny_url_patterns: list[str] = field(default_factory=list)
    max_depth: int = 50
    #: Stop admitting new URLs once this many were admitted (0 = unlimited).
    max_pages: int = 0
    #: Admit at most this many URLs per host / per registered domain (public-suffix aware;
    #: 0 = unlimited).
    max_pages_per_host: int = 0
    max_pages_per_domain: int = 0
    max_url_length: int = 2048
    max_redirects: int = 5
    max_links_per_page: int = 5000

    # --- spider-trap defences (frontier/traps.py) -------------------------------------------
    #: A path with more segments than this is a trap (endless /a/b/c/... spaces).
    max_path_segments: int = 24
    #: A segment (or a run of segments) repeated more than this many times is a trap
    #: (``/a/b/a/b/a/b``: relative links resolved against the wrong base).
    max_segment_repeats: int = 2
    #: More query parameters than this is a trap (faceted-search explosions).
    max_query_params: int = 8
    #: Distinct query strings admitted per host path (0 = unlimited): the stateful side of the
    #: query-explosion defence, counted at admission in the host's partition.
    max_query_variants_per_path: int = 64
    #: Dates in a URL more than this many years from now are a calendar trap (0 = off).
    calendar_window_years: int = 2
    #: Query parameters removed by canonicalization: session ids that make one page endless
    #: URLs (matched case-insensitively; ``;jsessionid=`` path parameters too).
    session_id_params: list[str] = field(default_factory=lambda: [
        "jsessionid", "phpsessid", "sid", "sessionid", "session_id", "aspsessionid",
        "cfid", "cftoken", "zenid", "osCsid",
    ])
    #: Probe each host once with a random missing path; pages like the probe's answer are
    #: soft-404s (a server that answers 200 to every path): recorded, their links not followed.
    soft404_probe: bool = True
    #: IRLbot-style per-registered-domain budget of admitted URLs: base + per_linking_domain x
    #: (distinct other registered domains seen linking in). 0 = no budget.
    domain_budget_base: int = 0
    domain_budget_per_linking_domain: int = 0

    # --- crawl ordering (front queues) -------------------------------------------------------
    #: bfs (FIFO per host, hosts by due time), random, indegree (partial in-degree counted at
    #: admission) or opic (Abiteboul et al. 2003: cash over out-links).
    ordering: str = "bfs"

    # --- URL-seen Bloom filter -------------------------------------------------------------
    bloom_capacity: int = 10_000_000
    bloom_error_rate: float = 0.01
    #: auto (RedisBloom's BF.MADD where every Redis node of the crawl has it, else Lua over
    #: bitmaps), lua or redisbloom; fixed when the crawl is created (frontier/redisbloom.py).
    bloom_backend: str = "auto"

    # --- scheduling ----------------------------------------------------------------------
    #: A URL leaves its host queue only into a lease; an unfinished lease expires after this.
    lease_ttl_s: float = 300.0
    #: A member owns its partitions for this long after its last heartbeat (every 1/3 of it);
    #: a dead worker's partitions move to the others after at most this.
    partition_ttl_s: float = 15.0
    #: Deadline given to a URL lease when a worker starts fetching it (a dead worker's
    #: in-flight URLs come back after this); at least 2 x total_timeout_s + 5.
    fetch_lease_s: float = 0.0
    #: Deadline a worker's lease keeper keeps renewing on each fetch it has in progress
    #: (every third of it): a worker that dies strands its URLs for at most about this long.
    #: A fetch the keeper has renewed past fetch_lease_s is no longer renewed.
    lease_keep_s: float = 10.0
    #: Leases handed out but not finished, crawl-wide (bounds the Celery queue length; a
    #: scheduler step may go over by less than one task, to fill its last task). Each worker
    #: process keeps up to fetch_concurrency of them in flight; leases beyond what the
    #: engines hold wait in the broker queue (a few hundred bytes each).
    max_inflight: int = 8192
    #: Due URLs (of distinct hosts) carried by one Celery task; each is fetched and completed
    #: on its own by the worker's fetch engine.
    #: Celery's cost (publish, receive, ack) and a task's round trips (begin, dedup, admit)
    #: are paid per task: bench/run --quick, 8 against 4: 246-259 vs 209-232 pages/CPU-s;
    #: 16 against 8 (2 workers x 8 threads, alternating runs): 216-245 (mean 234) vs 200-239
    #: (mean 218); 12 and 32 no better than 16.
    task_batch: int = 16

    # --- near-duplicates (dedup.config.DedupConfig fields, e.g. {"threshold": 0.9}) ----------
    dedup_enabled: bool = True
    dedup_settings: dict[str, Any] = field(default_factory=dict)

    # --- output --------------------------------------------------------------------------
    output_dir: str = "trawl-out"
    warc_max_bytes: int = 1_000_000_000
    store_warc: bool = True

    def validate(self) -> CrawlConfig:
        """Raise ConfigError naming the first bad setting; warn on impolite ones."""
        positive = [
            "partitions", "max_retries", "lease_ttl_s", "max_inflight", "task_batch",
            "connect_timeout_s", "read_timeout_s", "total_timeout_s", "max_body_bytes",
            "bloom_capacity", "max_redirects", "max_links_per_page", "robots_ttl_s",
            "partition_ttl_s", "fetch_concurrency", "lease_keep_s", "dns_timeout_s",
        ]
        for name in positive:
            value = getattr(self, name)
            ok = value >= 0 if name == "max_retries" else value > 0
            if not ok or (isinstance(value, float) and math.isnan(value)):
                raise ConfigError(E_BAD_VALUE.format(name=name, value=value, why="must be > 0"))
        for name in ("host_delay_s", "ip_delay_s", "adaptive_delay_factor", "max_delay_s",
                     "retry_backoff_s", "robots_error_ttl_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise ConfigError(E_BAD_VALUE.format(name=name, value=value, why="must be >= 0"))
        if not 0 < self.bloom_error_rate < 0.5:
            raise ConfigError(E_BAD_VALUE.format(
                name="bloom_error_rate", value=self.bloom_error_rate, why="must be in (0, 0.5)"))
        if self.ip_concurrency < 0:
            raise ConfigError(E_BAD_VALUE.format(
                name="ip_concurrency", value=self.ip_concurrency, why="must be >= 0"))
        if self.fetch_lease_s <= 0:
            self.fetch_lease_s = 2 * self.total_timeout_s + 5.0
        if self.lease_ttl_s < 2 * self.total_timeout_s + 5.0:
            raise ConfigError(E_BAD_VALUE.format(
                name="lease_ttl_s", value=self.lease_ttl_s,
                why=f"must be at least 2 x total_timeout_s + 5 = "
                    f"{2 * self.total_timeout_s + 5.0:g} so a fetch fits in its lease"))
        if self.bloom_backend not in BLOOM_BACKENDS:
            raise ConfigError(E_BAD_VALUE.format(
                name="bloom_backend", value=self.bloom_backend,
                why=f"one of {', '.join(BLOOM_BACKENDS)}"))
        if self.ordering not in ORDERINGS:
            raise ConfigError(E_BAD_VALUE.format(
                name="ordering", value=self.ordering, why=f"one of {', '.join(ORDERINGS)}"))
        for name in ("max_pages_per_host", "max_pages_per_domain", "max_url_length",
                     "max_path_segments", "max_segment_repeats", "max_query_params",
                     "max_query_variants_per_path", "calendar_window_years",
                     "domain_budget_base", "domain_budget_per_linking_domain"):
            if getattr(self, name) < 0:
                raise ConfigError(E_BAD_VALUE.format(
                    name=name, value=getattr(self, name), why="must be >= 0"))
        if self.partitions > 16384:
            raise ConfigError(E_BAD_VALUE.format(
                name="partitions", value=self.partitions, why="at most 16384 (Redis slots)"))
        if not self.namespace or any(c in self.namespace for c in "{} \t\n"):
            raise ConfigError(E_BAD_VALUE.format(
                name="namespace", value=self.namespace, why="must be non-empty, no braces/spaces"))
        if not self.user_agent_contact.startswith(("http://", "https://", "mailto:")):
            raise ConfigError(E_BAD_VALUE.format(
                name="user_agent_contact", value=self.user_agent_contact,
                why="a contact URL (http(s):// or mailto:) is required so sites can reach you"))
        if self.host_delay_s < 1.0 and not self.allow_private_ips:
            log.warning("host_delay_s=%.3f is under 1 s: that is going to disturb people on the "
                        "real web", self.host_delay_s)
        return self

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CrawlConfig:
        known = {f.name for f in fields(cls)}
        for name in data:
            if name not in known:
                raise ConfigError(E_UNKNOWN.format(name=name, known=", ".join(sorted(known))))
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> CrawlConfig:
        return cls.from_dict(json.loads(text))

    def replace(self, **changes: Any) -> CrawlConfig:
        data = asdict(self)
        for name in changes:
            if name not in data:
                raise ConfigError(E_UNKNOWN.format(name=name, known=", ".join(sorted(data))))
        data.update(changes)
        return CrawlConfig(**data)
