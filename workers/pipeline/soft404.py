"""Soft-404 detection: hosts that answer 200 with a "not found" page for every path.

Such a host turns every broken or made-up link into a "page", and since those pages link on
(often relative links under the bad path), into an endless space. The defence, as in
Bar-Yossef et al., "Sic transit gloria telae" (WWW 2004): once per host, fetch a path that
cannot exist (:func:`probe_url`, ``/trawl-probe-<16 hex>.html``).

* If the host answers 404/410 (or any non-2xx, or non-HTML), it reports missing pages
  properly: :class:`Soft404Probe` with ``signature=None``, and nothing more is done for it.
* If it answers 2xx HTML, the probe keeps a signature of that page; a later page of the host
  whose signature matches it (estimated Jaccard >= the crawl's ``soft404_threshold``) is a
  soft 404.

Signature (:func:`signature_of`): the title plus the visible main text as the dedup module
extracts it (``dedup.text``: boilerplate-frame subtrees dropped, case folded, digit runs -> 0),
minus the page's own URL where the template echoes it ("Sorry, /some/missing-page was not
found": the token runs of the path, of its last segment and of that segment without its
extension are removed), minus every token with a digit (counters, times, request ids,
hashes: the parts of a template that change on every answer), as a *set* of tokens
(1-shingles of ``dedup.shingles``), summarized by a 64-permutation MinHash
(``dedup.minhash``, seed 1). Why a token set and not the dedup module's 4-word shingles: a
template's own text is short (often under 20 tokens), and one varying word removes up to four
4-shingles of it but only one element of the set. Measured on the 20 pages of
vectors/realpages against a "not found" template built from each page's own chrome (its
paragraphs, headings, lists, tables and articles removed: the hardest case, as the chrome is
what they share): real pages score 0.00-0.44 (median 0.02), the template under another path
with another random reference 1.00, so the default threshold 0.7 has room on both sides
(MinHash-64 estimates have a standard error of about 0.06).

Known limit: a real page that is almost only chrome (a few words of its own on a site with a
large text frame) can score above the threshold; the cost is that its links, which are
mostly the frame's links every other page of the host has, are not followed from it.

Cost: :func:`signature_of` takes ~5 ms per page on vectors/realpages (10 KB-1.1 MB pages,
mostly the dedup module's text extraction and tokenizing); the pipeline needs it only for
pages of hosts whose probe has a signature.

What the pipeline caches per host (like robots.txt): ``Soft404Probe.to_json()``, about 40
bytes for a well-behaved host and ~420 for a soft-404 host.
"""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from dedup.minhash import MinHasher, estimated_jaccard, pack, unpack
from dedup.shingles import shingle_hashes
from dedup.text import main_text, normalize_text
from frontier.config import CrawlConfig
from frontier.urls import host_of
from workers.fetch import HTML_TYPES, FetchResult
from workers.pipeline.parse import parse_html

__all__ = [
    "NUM_PERM",
    "PROBE_PREFIX",
    "Soft404Probe",
    "is_soft404",
    "page_tokens",
    "probe_of",
    "probe_url",
    "run_probe",
    "signature_of",
    "similarity",
]

# The threshold is a crawl setting (soft404_threshold); these are the signature's format.

#: MinHash permutations of a signature (4 bytes each). Not a setting: cached probes of the
#: crawl must compare with pages signed the same way.
NUM_PERM = 64
#: Path prefix of probe URLs (visible in the hosts' logs: say what it is). Not a setting: it
#: names the crawler's probe to site operators (and the tests find probes by it).
PROBE_PREFIX = "/trawl-probe-"
#: Version of the JSON form; a cached probe of another version is treated as absent.
FORMAT = 1

_HASHER = MinHasher(NUM_PERM, seed=1)


class _Rng(Protocol):
    def getrandbits(self, k: int, /) -> int: ...


class _Fetcher(Protocol):
    def fetch(self, url: str, ip: str | None = ...) -> FetchResult: ...


@dataclass(frozen=True)
class Soft404Probe:
    """What one probe of a host found. ``signature`` is None when the host answers missing
    paths properly (or the answer could not be signed); ``status`` is None when the probe
    fetch failed (network error): then cache it briefly and probe again later."""

    host: str
    status: int | None
    signature: bytes | None = None

    @property
    def soft404_host(self) -> bool:
        """True when pages of this host must be compared with the probe."""
        return self.signature is not None

    def to_json(self) -> str:
        sig = base64.b64encode(self.signature).decode("ascii") if self.signature else None
        return json.dumps({"v": FORMAT, "host": self.host, "status": self.status, "sig": sig},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Soft404Probe | None:
        """The probe, or None for a cached value of another format version (probe again)."""
        data = json.loads(text)
        if data.get("v") != FORMAT:
            return None
        sig = data.get("sig")
        return cls(host=data["host"], status=data.get("status"),
                   signature=base64.b64decode(sig) if sig else None)


def probe_url(origin: str, rng: _Rng | None = None) -> str:
    """A URL of ``origin`` (``scheme://host[:port]``) that no site has: 64 random bits."""
    bits = rng.getrandbits(64) if rng is not None else secrets.randbits(64)
    return f"{origin.rstrip('/')}{PROBE_PREFIX}{bits:016x}.html"


def _remove_run(tokens: list[bytes], run: list[bytes]) -> list[bytes]:
    """``tokens`` without the non-overlapping occurrences of the sequence ``run``."""
    k = len(run)
    if not k or k > len(tokens):
        return tokens
    first = run[0]
    out: list[bytes] = []
    i = 0
    while True:
        try:
            j = tokens.index(first, i)  # C-speed scan to the next candidate
        except ValueError:
            break
        if tokens[j : j + k] == run:
            out.extend(tokens[i:j])
            i = j + k
        else:
            out.extend(tokens[i : j + 1])
            i = j + 1
    if not i:
        return tokens
    out.extend(tokens[i:])
    return out


def _root(tree_or_html: Any, url: str | None) -> Any:
    if isinstance(tree_or_html, str):
        tree_or_html = tree_or_html.encode("utf-8")
    if isinstance(tree_or_html, bytes):
        return parse_html(tree_or_html, url or "http://localhost/", "text/html").tree
    if hasattr(tree_or_html, "getroot"):
        return tree_or_html.getroot()
    return tree_or_html


def page_tokens(tree_or_html: Any, url: str | None = None) -> list[bytes]:
    """Normalized tokens of the title and main text, minus the echo of ``url``'s path and
    minus every token with a digit (counters, dates, request ids, hashes)."""
    root = _root(tree_or_html, url)
    if root is None or not isinstance(getattr(root, "tag", None), str):
        return []
    title = root.findtext(".//title") or ""
    tokens = normalize_text(title + " " + main_text(root))
    if url:
        parts = urlsplit(url)
        path = unquote(parts.path)
        last = path.rstrip("/").rsplit("/", 1)[-1]
        stem = last.rsplit(".", 1)[0]
        pieces = [path + ("?" + unquote(parts.query) if parts.query else ""), path, last, stem]
        for piece in pieces:
            if piece:
                tokens = _remove_run(tokens, normalize_text(piece))
    # Digits are "0" by now: drop numbers and ids/hashes that mix them with letters.
    return [t for t in tokens if b"0" not in t]


def signature_of(tree_or_html: Any, url: str | None = None) -> bytes | None:
    """Packed MinHash of a page (lxml root as parsed by the pipeline, or HTML bytes/str), or
    None when it has no text. Pass the page's ``url`` so that its echoed path is ignored."""
    tokens = page_tokens(tree_or_html, url)
    if not tokens:
        return None
    return pack(_HASHER.signature(shingle_hashes(tokens, 1)))


def similarity(probe: Soft404Probe, page_signature: bytes | None) -> float | None:
    """Estimated Jaccard of the page and the probe's answer (None: nothing to compare)."""
    if probe.signature is None or page_signature is None:
        return None
    a, b = unpack(probe.signature), unpack(page_signature)
    if len(a) != len(b):
        return None
    return estimated_jaccard(a, b)


def is_soft404(probe: Soft404Probe, page_signature: bytes | None,
               threshold: float = CrawlConfig.soft404_threshold) -> bool:
    """Is a page with this signature the host's "not found" template?"""
    sim = similarity(probe, page_signature)
    return sim is not None and sim >= threshold


def run_probe(fetcher: _Fetcher, origin: str, ip: str | None = None,
              rng: _Rng | None = None, url: str | None = None) -> Soft404Probe:
    """Fetch one probe URL of ``origin`` through the crawl's fetcher (pinned to ``ip``).

    ``url`` overrides :func:`probe_url` (so the caller can check robots.txt for it first).
    A redirect is not followed: a host that redirects missing paths (often to its home
    page) gives ``signature=None``; its redirect targets are ordinary links.
    """
    url = url or probe_url(origin, rng)
    return probe_of(fetcher.fetch(url, ip=ip))


def probe_of(res: FetchResult) -> Soft404Probe:
    """What the fetch of a probe URL says of its host (the fetch engine fetches it apart)."""
    url = res.url
    host = host_of(url)
    status = res.status
    if status is None or not 200 <= status < 300 or res.error is not None:
        return Soft404Probe(host, status)
    if res.content_type not in HTML_TYPES or not res.body:
        return Soft404Probe(host, status)
    page = parse_html(res.body, url, res.content_type)
    if page.tree is None:
        return Soft404Probe(host, status)
    return Soft404Probe(host, status, signature_of(page.tree, url))
