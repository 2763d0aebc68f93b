"""One URL through the crawl's own steps, for a person to look at (``trawl inspect``).

The same code a worker runs (the fetcher with the crawl's address policy and trust,
RobotsPolicy, parse_html, canonicalize + Scope, the dedup features), without Redis: the
near-duplicate index and the URL-seen filter are not consulted, so a link "admitted" here is
one the crawl would offer to the frontier (which still drops URLs it has seen).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dedup.fingerprint import content_fingerprint
from dedup.minhash import OnePermutationHasher
from dedup.service import page_features
from frontier.config import CrawlConfig
from frontier.counters import Outcome
from frontier.politeness import host_delay, retry_after
from frontier.scope import Scope
from frontier.urls import DEFAULT_MAX_LENGTH, InvalidURL, ParamStripper, canonicalize, host_of
from frontier.useragent import ROBOTS_TOKEN, user_agent
from workers.dns.policy import SETTINGS_HINT
from workers.fetch import HTML_TYPES, Fetcher, FetchResult
from workers.pipeline.parse import ParsedPage, parse_html, sniff_encoding
from workers.pipeline.robots import RobotsPolicy
from workers.pipeline.soft404 import signature_of
from workers.pipeline.steps import robots_url

#: How many MinHash values the report shows (the whole signature is num_perm long).
SIGNATURE_SHOWN = 8


@dataclass
class LinkVerdict:
    """One link of the page and what the crawl would do with it."""

    href: str
    tag: str
    url: str | None  # canonical, None when invalid
    verdict: str  # admitted / nofollow / invalid / out_of_scope
    reason: str  # the scope reason (frontier.scope REASONS), the InvalidURL reason, ...


@dataclass
class Inspection:
    """Everything ``trawl inspect`` learned of one URL (``--json`` prints it as it is)."""

    url: str
    source: str  # "network" or the --file path
    scope: str  # "admitted" or the reason the crawl would refuse the URL itself
    robots: dict[str, Any] = field(default_factory=dict)
    status: int | None = None
    reason: str = ""
    http_version: str = ""
    ip: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str | None = None
    charset: str | None = None  # what the crawl's parser decoded the page with
    header_charset: str | None = None  # the charset the Content-Type header names, if any
    bytes: int = 0
    elapsed_s: float = 0.0
    error: str | None = None
    error_detail: str | None = None
    truncated: str | None = None
    title: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    links: list[LinkVerdict] = field(default_factory=list)
    dedup: dict[str, Any] = field(default_factory=dict)
    outcome: str = ""
    outcome_reason: str = ""
    warc: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def admitted(self) -> list[LinkVerdict]:
        return [link for link in self.links if link.verdict == "admitted"]


class Inspector:
    """The crawl's components built from its config, as a worker builds them
    (workers/runtime/context.py), minus Redis."""

    def __init__(self, cfg: CrawlConfig) -> None:
        self.cfg = cfg
        self.scope = Scope.from_config(cfg)
        self.strip = ParamStripper(cfg.session_id_params)
        self.max_url_length = cfg.max_url_length or DEFAULT_MAX_LENGTH

    def canonical(self, href: str, base: str | None = None) -> str:
        """Raises InvalidURL as the crawl's link step would refuse it."""
        return canonicalize(href, base, max_length=self.max_url_length, strip=self.strip)

    def fetcher(self) -> Fetcher:
        from workers.dns.pool import worker_resolver
        from workers.runtime.context import fetcher_settings

        return Fetcher(worker_resolver(self.cfg), user_agent(self.cfg.user_agent_contact),
                       **fetcher_settings(self.cfg))

    def inspect_network(self, url: str, warc_dir: Path | None = None) -> Inspection:
        """robots.txt first, obeyed; then (after the host's delay) the page. One request at
        a time, as the crawl does per host."""
        ins = Inspection(url=url, source="network", scope=self._scope_of(url))
        with self.fetcher() as fetcher:
            robots_res = fetcher.fetch_robots(
                robots_url(url), hop_delay_s=min(self.cfg.host_delay_s, self.cfg.max_delay_s))
            if robots_res.error == "forbidden_ip":
                return _refused(ins, robots_res, "robots.txt")
            if robots_res.error == "dns" and not robots_res.redirects:
                # lease.py: no address, no robots.txt to cache; the URL fails for that reason
                ins.error, ins.error_detail = robots_res.error, robots_res.error_detail
                ins.outcome = Outcome.FAILED.value
                ins.outcome_reason = (f"dns: {robots_res.error_detail or 'no address'} (retried "
                                      f"up to {self.cfg.max_retries} times, then failed)")
                return ins
            policy = RobotsPolicy.from_fetch(robots_res)
            allowed = policy.allowed(url, ROBOTS_TOKEN)
            delay = host_delay(self.cfg, policy.crawl_delay(ROBOTS_TOKEN), robots_res.elapsed_s)
            ins.robots = {"url": robots_url(url), "status": robots_res.status,
                          "kind": policy.kind, "reason": policy.reason,
                          "crawl_delay": policy.crawl_delay(ROBOTS_TOKEN),
                          "allowed": allowed, "agent": ROBOTS_TOKEN,
                          "delay_before_page_s": round(delay, 3) if allowed else None}
            if not allowed:
                why = "disallowed by robots.txt" if policy.kind == "parsed" else policy.kind
                ins.outcome = Outcome.ROBOTS_BLOCKED.value
                ins.outcome_reason = f"{why}: {policy.reason}" if policy.reason else why
                return ins
            time.sleep(delay)  # the host's politeness delay between robots.txt and the page
            res = fetcher.fetch(url)
        if res.error == "forbidden_ip":
            return _refused(ins, res, "page")
        self._analyse(ins, res)
        self._warc(ins, [robots_res, res], warc_dir)
        return ins

    def inspect_file(self, path: Path, url: str, content_type: str | None,
                     warc_dir: Path | None = None) -> Inspection:
        """A saved page, as if it had come back 200 from ``url``: no network at all."""
        ins = Inspection(url=url, source=str(path), scope=self._scope_of(url))
        ins.robots = {"checked": False, "reason": "--file: robots.txt not fetched"}
        body = path.read_bytes()
        ctype = content_type or "text/html"
        res = FetchResult(url=url, status=200, reason="OK", body=body, content_type=ctype,
                          headers=[("Content-Type", ctype)], started_at=time.time())
        self._analyse(ins, res)
        self._warc(ins, [res], warc_dir)
        return ins

    def _scope_of(self, url: str) -> str:
        return self.scope.check(url, host_of(url), 0) or "admitted"

    def _analyse(self, ins: Inspection, res: FetchResult) -> None:
        """What the crawl's page step (workers/pipeline/lease.py ``_page_fetched``) makes of
        the response."""
        cfg = self.cfg
        ins.status, ins.reason, ins.ip = res.status, res.reason, res.ip
        ins.http_version = res.http_version
        ins.headers = list(res.headers)
        ins.content_type = res.content_type
        header = res.header("content-type") or ""
        if "charset" in header.lower():
            ins.header_charset = sniff_encoding(b"", header)
        ins.bytes, ins.elapsed_s = len(res.body), round(res.elapsed_s, 4)
        ins.error, ins.error_detail, ins.truncated = res.error, res.error_detail, res.cut_reason
        if (res.status is None or res.status in cfg.retry_http_statuses or res.network_cut):
            kind = res.error or f"http_{res.status}"
            ins.outcome = Outcome.FAILED.value
            wait = retry_after(res.header("Retry-After"), time.time()) if res.status else None
            ins.outcome_reason = (f"{kind}: {res.error_detail or kind} (retried up to "
                                  f"{cfg.max_retries} times, then recorded as failed)"
                                  + (f"; Retry-After holds the host {wait:g}s" if wait else ""))
            return
        status, cut = res.status or 0, res.cut_reason
        ins.outcome = (Outcome.TRUNCATED.value if cut not in (None, "length")
                       and 200 <= status < 300 else Outcome.FETCHED.value)
        ins.dedup["content_digest"] = (content_fingerprint(res.body) if res.body and cut is None
                                       else None)
        if res.error == "content_type_skipped":
            ins.outcome_reason = f"body not downloaded: {res.error_detail or res.error}"
        if 300 <= status < 400 and res.location:
            self._redirect(ins, res.location)
        elif 200 <= status < 300 and res.content_type in HTML_TYPES and res.body:
            # As lease.py calls it: the whole Content-Type header, its charset included.
            parsed = parse_html(res.body, res.url, res.header("content-type") or res.content_type,
                                res.header("x-robots-tag"),
                                max_links=cfg.max_links_per_page)
            self._page(ins, parsed, cut)
        elif not ins.outcome_reason:
            ins.outcome_reason = "not parsed (not a 2xx HTML page)"

    def _redirect(self, ins: Inspection, location: str) -> None:
        verdict = self._link(location, "redirect", nofollow=False, base=ins.url)
        ins.links.append(verdict)
        ins.outcome_reason = f"redirect to {verdict.url or location}: {verdict.verdict}"

    def _page(self, ins: Inspection, parsed: ParsedPage, cut: str | None) -> None:
        ins.charset, ins.title = parsed.encoding, parsed.title
        ins.meta = {"nofollow": parsed.meta_nofollow, "noindex": parsed.meta_noindex,
                    "canonical": parsed.canonical, "parse_error": parsed.error,
                    "links_dropped": parsed.dropped}
        ins.links = [self._link(link.url, link.tag, link.nofollow) for link in parsed.links]
        if parsed.tree is not None and cut is None:
            self._features(ins, parsed)
        depth_ok = not self.cfg.max_depth or self.scope.depth_allowed(1)
        n = len(ins.admitted)
        ins.outcome_reason = (f"{n} of {len(ins.links)} links offered to the frontier"
                              if depth_ok else "links not followed: too deep")

    def _features(self, ins: Inspection, parsed: ParsedPage) -> None:
        dcfg = self.cfg.dedup_config()
        feats = (page_features(parsed.tree, dcfg, OnePermutationHasher(dcfg.num_perm, dcfg.seed))
                 if dcfg.enabled else None)
        if feats is None:
            ins.dedup["near_duplicate_check"] = ("disabled" if not dcfg.enabled
                                                 else f"skipped: under {dcfg.min_tokens} tokens")
        else:
            fp, sig, tokens = feats
            ins.dedup.update(text_fingerprint=fp.hex(), tokens=tokens, num_perm=dcfg.num_perm,
                             minhash_head=[int(v) for v in sig[:SIGNATURE_SHOWN]],
                             near_duplicate_check="would be checked against the crawl's index")
        soft = signature_of(parsed.tree, ins.url)
        ins.dedup["soft404_signature_bytes"] = len(soft) if soft else 0

    def _link(self, href: str, tag: str, nofollow: bool, base: str | None = None
              ) -> LinkVerdict:
        """The crawl's link step (workers/pipeline/links.py ``add_link``), as a verdict; a
        nofollow link is set aside before it (lease.py ``_complete_page``)."""
        try:
            url: str | None = self.canonical(href, base)
        except InvalidURL as exc:
            if not nofollow:
                return LinkVerdict(href, tag, None, "invalid", exc.reason)
            url = None
        if nofollow:
            return LinkVerdict(href, tag, url, "nofollow", "rel=nofollow or robots nofollow")
        assert url is not None
        reason = self.scope.check(url, host_of(url), 1)
        if reason:
            return LinkVerdict(href, tag, url, "out_of_scope", reason)
        return LinkVerdict(href, tag, url, "admitted", "in scope")

    def _warc(self, ins: Inspection, results: list[FetchResult], warc_dir: Path | None) -> None:
        """The records the crawl would archive; written only to ``warc_dir`` when given."""
        kept = [r for r in results if r.status is not None]
        ins.warc = {"store_warc": self.cfg.store_warc,
                    "records": [{"url": r.url, "status": r.status, "payload_bytes": len(r.body)}
                                for r in kept] if self.cfg.store_warc else [],
                    "written": None}
        if warc_dir is None or not kept:
            return
        from workers.storage.warc import WarcWriter

        writer = WarcWriter(warc_dir, prefix="trawl-inspect",
                            warc_version=str(self.cfg.warc_version))
        try:
            for r in kept:
                writer.write(r)
        finally:
            writer.close()
        ins.warc["written"] = str(warc_dir)


def _refused(ins: Inspection, res: FetchResult, what: str) -> Inspection:
    """The address policy refused the host: nothing was sent (workers/pipeline/steps.py)."""
    ins.ip, ins.error, ins.error_detail = res.ip, res.error, res.error_detail
    ins.outcome = Outcome.ADDRESS_REFUSED.value
    ins.outcome_reason = (f"{what}: {res.error_detail or 'refused address'} ({SETTINGS_HINT}; "
                          f"e.g. --set allowed_networks='[\"127.0.0.0/8\"]')")
    return ins
