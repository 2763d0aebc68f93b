"""Crawl settings: one typed, commented table of defaults, validated before a crawl starts.

Units are in the names (``_s`` seconds, ``_bytes``), so no setting needs a guess. The whole
config is stored in Redis when a crawl starts, so a worker that joins later (``trawl worker``)
runs with exactly the crawl's settings. Constants that stay in the code are implementation
details (cache sizes, retry pacing of internal loops, formats): each says there why it is not
a setting.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from dedup.config import DedupConfig
from frontier.config_checks import (
    E_BAD_VALUE,
    E_UNKNOWN,
    NON_NEGATIVE,
    POSITIVE,
    ConfigError,
    _bad,
    _check_choices,
    _check_continuous,
    _check_numbers,
)
from frontier.useragent import DEFAULT_CONTACT

__all__ = ["E_BAD_VALUE", "NON_NEGATIVE", "POSITIVE", "ConfigError", "CrawlConfig"]

log = logging.getLogger(__name__)

#: Crawl orderings (front queues' priorities) a crawl may select.
ORDERINGS = ("bfs", "random", "indegree", "opic")
#: URL-seen filter implementations (frontier/redisbloom.py).
BLOOM_BACKENDS = ("auto", "lua", "redisbloom")
#: How a worker runs its fetches (workers/runtime/engine.py, docs/fetch-engine.md).
FETCH_ENGINES = ("loop", "threads")
#: Media types a crawl downloads unless ``allowed_content_types`` says otherwise; also the
#: default of a Fetcher built without a config (workers/fetch/fetcher.py).
DEFAULT_CONTENT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")


@dataclass
class CrawlConfig:
    """Every setting of a crawl with its default; :meth:`validate` refuses what cannot work."""

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
    #: Contact URL (http(s):// or mailto:) sent in the User-Agent so that a site's operator
    #: can reach the crawl's; required (frontier/useragent.py).
    user_agent_contact: str = DEFAULT_CONTACT
    #: Seconds to open the TCP connection to the host's IP; slower counts as a timeout.
    connect_timeout_s: float = 5.0
    #: Seconds without a byte from the server (each socket read) before the fetch times out.
    read_timeout_s: float = 15.0
    #: Wall time of a whole fetch, however slowly the server trickles bytes
    #: (workers/fetch/deadline.py); leases are sized from it (fetch_lease_s, lease_ttl_s).
    total_timeout_s: float = 30.0
    #: Cap on a decoded body (10 MiB): a longer one is kept up to the cap and recorded as
    #: too_large (truncated: length; not retried, not given to near-duplicate detection),
    #: so a decompression bomb costs what an ordinary large page costs.
    max_body_bytes: int = 10 * 1024 * 1024
    #: Media types whose bodies are downloaded (``type/*`` allowed), checked on the response
    #: headers before the body; others are recorded as content_type_skipped. HTML is parsed.
    allowed_content_types: list[str] = field(
        default_factory=lambda: list(DEFAULT_CONTENT_TYPES)
    )
    #: Fetch every address. Off, only globally routable unicast ones (workers/dns/policy.py):
    #: no loopback, private, link-local (169.254.169.254, fe80::/10), unique-local, multicast,
    #: CGNAT or reserved address, nor an IPv6 form of one (::ffff:10.0.0.1), checked on the IP
    #: connected to at every fetch and redirect hop: a refused URL ends as address_refused.
    allow_private_ips: bool = False
    #: Networks fetched although the rule above refuses them, in CIDR form, IPv4 or IPv6 (an
    #: internal crawl, the sandbox web): e.g. ["10.20.0.0/16", "fd00:1::/64", "127.0.0.2/32"].
    allowed_networks: list[str] = field(default_factory=list)
    #: Static host -> IP map consulted before DNS (the sandbox web's resolver).
    static_hosts: dict[str, str] = field(default_factory=dict)
    #: Seconds a resolved address is reused before asking DNS again (failures: a minute).
    dns_ttl_s: float = 300.0
    #: DNS servers ("ip" or "ip:port") asked directly (dnspython) instead of the system
    #: resolver; empty = getaddrinfo. Lookups never block other fetches
    #: (workers/dns/pool.py).
    dns_servers: list[str] = field(default_factory=list)
    #: A name not resolved within this long counts as a DNS failure.
    dns_timeout_s: float = 5.0
    #: Extra CA certificates (a PEM file) trusted for HTTPS besides certifi's bundle: a
    #: private CA such as the sandbox web's. Verification is never turned off.
    ca_bundle: str = ""
    #: Fetches in flight at once in one worker process (workers/runtime/engine.py). Each waits on
    #: the network most of its time; threads are made only as fetches need them. 2500 keeps
    #: ~2,460 in flight on a web of 20,000 slow hosts at ~375 MB RSS (bench/inflight.py);
    #: see docs/fetch-engine.md. The worker raises its open-file limit to match
    #: (workers/runtime/fdlimit.py).
    fetch_concurrency: int = 2500
    #: "loop": the fetches on one asyncio + aiohttp event loop, planning and parsing on
    #: ``pipeline_threads`` threads; "threads": each URL on its own fetcher thread (urllib3).
    fetch_engine: str = "loop"
    #: Threads doing a "loop" engine's CPU work (plan, store, parse) and its Redis reads.
    pipeline_threads: int = 4

    # --- robots.txt ----------------------------------------------------------------------
    #: How long a fetched robots.txt is obeyed before it is fetched again (24 h: RFC 9309
    #: §2.4 says a cached copy should not be used longer). Soft-404 probes are kept as long.
    robots_ttl_s: float = 86400.0
    #: How long a 5xx/unreachable robots.txt (disallow all, RFC 9309) is kept before retrying.
    robots_error_ttl_s: float = 600.0
    #: Seconds a worker process reuses a robots.txt policy or soft-404 probe it read from
    #: Redis without reading it again (hot hosts cost no Redis read); a minute, so a policy
    #: fetched anew reaches every worker soon.
    host_cache_local_ttl_s: float = 60.0

    # --- retries -------------------------------------------------------------------------
    #: Retries of a URL whose fetch got no response, a status in retry_http_statuses or a
    #: 2xx body the network cut short (disconnect, total_timeout_s), before it is recorded
    #: as failed with its reason, or a cut body as truncated (attempts = max_retries + 1).
    max_retries: int = 2
    #: Backoff before retry n is retry_backoff_s * 2**(n-1), applied to the host's next fetch.
    retry_backoff_s: float = 1.0
    #: HTTP statuses worth another try later (a rate limit, server errors: the server may
    #: recover); any other status is the page's answer. Only 400-599.
    retry_http_statuses: list[int] = field(default_factory=lambda: [429, 500, 502, 503, 504])

    # --- scope ---------------------------------------------------------------------------
    #: Hosts or domains allowed (a domain allows its subdomains). Empty = the seeds' hosts.
    allowed_domains: list[str] = field(default_factory=list)
    #: Hosts or domains never crawled (a domain denies its subdomains); wins over allowed.
    denied_domains: list[str] = field(default_factory=list)
    #: Regular expressions (``re.search`` on the canonical URL): when any is given, a URL must
    #: match one to be admitted.
    allow_url_patterns: list[str] = field(default_factory=list)
    #: Regular expressions: a URL matching any of them is never admitted (wins over allow).
    deny_url_patterns: list[str] = field(default_factory=list)
    #: Links more than this many links away from a seed are not admitted (0 = unlimited).
    max_depth: int = 50
    #: Stop admitting new URLs once this many were admitted (0 = unlimited).
    max_pages: int = 0
    #: Admit at most this many URLs per host (0 = unlimited).
    max_pages_per_host: int = 0
    #: Admit at most this many URLs per registered domain (public-suffix aware; 0 = unlimited).
    max_pages_per_domain: int = 0
    #: Canonical URLs longer than this are invalid links (0 = the canonicalizer's own cap).
    max_url_length: int = 2048
    #: Redirect hops followed from one URL (each hop is a polite fetch of its own); a longer
    #: chain is cut and counted as redirects_too_long.
    max_redirects: int = 5
    #: Links taken from one page; the rest are dropped, so a page of millions of links
    #: cannot flood the frontier.
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
    #: Estimated Jaccard (of token sets, in (0, 1]) at or above which a page is its host's
    #: soft-404 template. 0.7: real pages scored 0.00-0.44 and templates 1.00 on
    #: vectors/realpages (workers/pipeline/soft404.py); raise it if real pages are caught.
    soft404_threshold: float = 0.7
    #: IRLbot-style per-registered-domain budget of admitted URLs: base + per_linking_domain x
    #: (distinct other registered domains seen linking in). 0 = no budget.
    domain_budget_base: int = 0
    #: Budget added per distinct other registered domain linking in (see domain_budget_base).
    domain_budget_per_linking_domain: int = 0

    # --- crawl ordering (front queues) -------------------------------------------------------
    #: bfs (FIFO per host, hosts by due time), random, indegree (partial in-degree counted at
    #: admission) or opic (Abiteboul et al. 2003: cash over out-links).
    ordering: str = "bfs"

    # --- URL-seen Bloom filter -------------------------------------------------------------
    #: URLs the URL-seen filter is sized for, crawl-wide (split over the partitions); past it
    #: a partition's filter grows a layer instead of saturating.
    bloom_capacity: int = 10_000_000
    #: False-positive rate at bloom_capacity: a URL wrongly taken as seen is never fetched.
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
    #: Leases per worker waiting ahead of the network (in the broker queue, or for the
    #: worker's CPU) before the schedulers lease more hosts (0: no such limit). Leased faster
    #: than the workers take them, hosts idle in queues and their kept-alive connections go
    #: cold; left in Redis, the due ones are taken warmest first (workers/cluster/backlog.py).
    #: With fetch_affinity a member counts its own worker's engine alone.
    cpu_backlog: int = 200
    #: A worker that schedules (a member) fetches its own partitions' hosts: its tasks go to
    #: its own queue, so a host's fetches come from one process and reuse its kept-alive
    #: connections (StormCrawler's URLPartitioner, Nutch's fetcher partitions). Off: every
    #: task goes to the shared queue and any worker fetches it. Internet-like web, 60 s runs:
    #: new connections 17% of requests instead of 41%, +21% pages/s (docs/benchmarks.md).
    fetch_affinity: bool = True
    #: Due URLs (of distinct hosts) carried by one Celery task; each is fetched and completed
    #: on its own by the worker's fetch engine.
    #: Celery's cost (publish, receive, ack) and a task's round trips (begin, dedup, admit)
    #: are paid per task: bench/run --quick, 8 against 4: 246-259 vs 209-232 pages/CPU-s;
    #: 16 against 8 (2 workers x 8 threads, alternating runs): 216-245 (mean 234) vs 200-239
    #: (mean 218); 12 and 32 no better than 16.
    task_batch: int = 16
    #: A scheduler step's last task, if short of task_batch while at least two tasks' worth
    #: is in flight, waits up to this long for the next steps' leases (its hosts wait that
    #: much longer; 0 = until the next step). 50 ms is short against host delays of seconds.
    task_linger_s: float = 0.05
    #: Every owned partition is asked for due hosts at least this often, hinted or not (a
    #: lost due-hint, a partition just taken over, costs at most this); between sweeps only
    #: the partitions known or hinted to have a due host are (workers/cluster/scheduler.py).
    partition_sweep_s: float = 1.0

    # --- worker processes ------------------------------------------------------------------
    #: Redis connections of one worker process, shared by its fetcher threads (robots.txt
    #: and soft-404 caches), the completer and the lease keeper. Lower it when many workers
    #: meet Redis's maxclients.
    worker_redis_connections: int = 64

    # --- near-duplicates (dedup/) ------------------------------------------------------------
    #: Detect exact and near-duplicate pages (MinHash LSH in Redis): recorded as such, and by
    #: default their links are not followed.
    dedup_enabled: bool = True
    #: Fields of dedup.config.DedupConfig to change, e.g. {"threshold": 0.9}; checked when the
    #: crawl starts (all workers must use the same).
    dedup_settings: dict[str, Any] = field(default_factory=dict)

    # --- continuous crawling (freshness/) ----------------------------------------------
    #: Keep the crawl alive: every page fetched comes back for revisits (a per-partition
    #: schedule in Redis), conditional GETs, change detection (docs/freshness.md).
    continuous: bool = False
    #: How revisit intervals are chosen: fixed (revisit_fixed_interval_s), or a policy of
    #: freshness/policies.py over the URLs' estimated change rates (uniform, proportional,
    #: sqrt, freshness, age) or Nutch's adaptive rule (adaptive).
    revisit_policy: str = "fixed"
    #: Revisits per second, crawl-wide; each partition may promote its share
    #: (budget / partitions) through a token bucket in Redis. New URLs use the rest of the
    #: politeness capacity.
    revisit_budget_pages_s: float = 10.0
    #: Shortest revisit interval of any URL.
    revisit_min_interval_s: float = 60.0
    #: Longest revisit interval (a page a policy never visits, a failed revisit, gets it).
    revisit_max_interval_s: float = 30 * 86400.0
    #: The interval of the fixed policy, and the adaptive rule's first interval. Before
    #: their partition's first replan, the other policies share the budget uniformly over
    #: revisit_expected_urls.
    revisit_fixed_interval_s: float = 86400.0
    #: Estimated Jaccard similarity of a page's main text to its last version at or above
    #: which a page whose bytes changed counts as unchanged (a date or counter line).
    revisit_similarity_threshold: float = 0.8
    #: URLs the per-URL histories are sized for, crawl-wide (their Redis hashes stay small;
    #: fixed for the life of the crawl: it places each URL's record).
    revisit_expected_urls: int = 1_000_000
    #: Each partition owner replans its revisit intervals this often.
    revisit_replan_s: float = 60.0
    #: Seconds of its budget a partition's token bucket may save up (bursts).
    revisit_burst_s: float = 2.0

    # --- output --------------------------------------------------------------------------
    #: Directory of the WARC files (warc/) and JSONL records (records/), on each worker's host.
    output_dir: str = "trawl-out"
    #: A worker starts a new WARC file once its current one reaches this size (1 GB, the
    #: customary WARC file size).
    warc_max_bytes: int = 1_000_000_000
    #: Write every response to WARC; off, only the JSONL records are written.
    store_warc: bool = True
    #: WARC version of the files written, "1.1" or "1.0" (docs/archive.md: also their index).
    warc_version: str = "1.1"

    # --- components (workers/components/, docs/components.md) ---------------------------
    #: URL filters, in order: class paths ("package.module.ClassName") of
    #: workers.components.UrlFilter subclasses. A link the scope admits must pass each one;
    #: a refusal is counted as links_filter_<reason>. Checked when the crawl starts.
    url_filters: list[str] = field(default_factory=list)
    #: Link extractors of HTML pages, in order (class paths of LinkExtractor subclasses); their
    #: links are followed together. The built-in lxml one is listed: leave it out to replace it.
    extractors: list[str] = field(
        default_factory=lambda: ["workers.components.builtin.LxmlLinks"])
    #: What happens to each fetched page's record, in order (class paths of PagePipeline
    #: subclasses): the built-in near-duplicate check, WARC writer and JSONL writer are entries
    #: a config can reorder or leave out; a stage may change the record or drop it.
    pipelines: list[str] = field(default_factory=lambda: [
        "workers.components.builtin.Dedup", "workers.components.builtin.WarcStore",
        "workers.components.builtin.JsonlRecords"])
    #: Each component's own settings: class path -> JSON object, read by its from_setup.
    component_settings: dict[str, dict[str, Any]] = field(default_factory=dict)

    def validate(self) -> CrawlConfig:
        """Raise ConfigError naming the first bad setting; warn on impolite ones."""
        _check_numbers(self)
        if self.fetch_lease_s <= 0:
            self.fetch_lease_s = 2 * self.total_timeout_s + 5.0
        _check_choices(self)
        _check_continuous(self)
        self.dedup_config()
        if self.host_delay_s < 1.0 and not self.allow_private_ips:
            log.warning("host_delay_s=%.3f is under 1 s: that is going to disturb people on the "
                        "real web", self.host_delay_s)
        return self

    def dedup_config(self) -> DedupConfig:
        """The crawl's near-duplicate settings (dedup_enabled plus dedup_settings), checked."""
        known = {f.name for f in fields(DedupConfig)}
        if not isinstance(self.dedup_settings, dict):
            raise _bad("dedup_settings", self.dedup_settings, "a JSON object of dedup fields")
        for name in self.dedup_settings:
            if name not in known:
                raise _bad("dedup_settings", self.dedup_settings,
                           f"unknown key {name!r}; known: {', '.join(sorted(known))}")
        try:
            return DedupConfig(**{"enabled": self.dedup_enabled, **self.dedup_settings})
        except (TypeError, ValueError) as exc:
            raise _bad("dedup_settings", self.dedup_settings, str(exc)) from None

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
