"""What the changing sandbox web serves: each page's version at the time of the request, and
each host's validators (sandbox/change_model.py decides when pages change).

A changing page carries a line "Updated <date of its last change> · <n> views" at the top of
its main text. A content change (a new version of a non-cosmetic page) renders the page's text
anew, with the same links, so the crawl's link graph stays put; a cosmetic change only alters
that line. Per host (seeded shares): a strong ETag (``"<hash of version 0>-<version>"``), a
Last-Modified (the version's start, to the second; version 0 keeps the static web's date),
both, or neither; conditional GETs are answered 304 by the server when the validators match.
A lying host sends Last-Modified "now" or a fixed old date, no ETag, and always 200.

Last-Modified has a resolution of one wall second: under time acceleration, two changes
within the same wall second share a date, so If-Modified-Since cannot tell them apart (as on
the real web); the ETag can.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from email.utils import formatdate

from .change_model import ChangeModel, PageChanges, WrongLastModified
from .layout import share_draw
from .pages import render_page
from .replies import Reply, SiteReplies

#: Under ``SandboxConfig.virtual_clock``, the request header carrying its wall time.
CLOCK_HEADER = "X-Sandbox-Clock"
#: The date a lying host of the OLD kind gives for everything (2020-09-13).
WRONG_OLD_DATE = 1_600_000_000
_STAMP_AFTER = b"<main>\n"


class ChangingReplies:
    """Turns the static web's replies into the changing web's, at a given wall time."""

    def __init__(self, replies: SiteReplies, model: ChangeModel, cache: int = 512) -> None:
        self.replies, self.model = replies, model
        #: (host, target, version) -> the text of that content version, rendered
        self._texts: OrderedDict[tuple[str, str, int], bytes] = OrderedDict()
        self._limit = cache

    def serve(self, host: str, target: str, reply: Reply, now: float) -> tuple[Reply, int | None]:
        """The reply at wall time ``now`` and the page's version (None: a page that never
        changes, or no page). Replies without validators (errors, redirects, robots.txt) pass
        as they are."""
        if reply.status != 200 or reply.etag is None:
            return reply, None
        version = None
        body, etag, lm = reply.body, reply.etag, reply.last_modified
        page = (self.model.page_at(host, target.partition("?")[0]) if reply.kind == "page"
                else None)
        if page is not None and page.changing:
            version = self.model.count_at(page, now)
            changed = self.model.time_of(page, version)
            if changed is not None:
                lm = formatdate(int(changed), usegmt=True)
            text = body if page.cosmetic or version == 0 else self._text(host, target, version)
            body = self._stamped(text, page, version, lm or "")
            etag = f'"{reply.etag.strip(chr(34))}-{version}"'
        hv = self.model.validators(host)
        if hv.wrong_lm is WrongLastModified.NOW:
            lm = formatdate(int(now), usegmt=True)
        elif hv.wrong_lm is WrongLastModified.OLD:
            lm = formatdate(WRONG_OLD_DATE, usegmt=True)
        elif not hv.last_modified:
            lm = None
        return dataclasses.replace(reply, body=body, etag=etag if hv.etag else None,
                                   last_modified=lm, conditional=hv.conditional), version

    def _stamped(self, text: bytes, page: PageChanges, version: int, date: str) -> bytes:
        views = 100 + int(9000 * share_draw(self.model.config.seed, "views", page.host,
                                            page.path)) + 17 * version
        line = f'<p class="updated">Updated {date} &middot; {views} views</p>\n'.encode()
        return text.replace(_STAMP_AFTER, _STAMP_AFTER + line, 1)

    def _text(self, host: str, target: str, version: int) -> bytes:
        key = (host, target, version)
        text = self._texts.get(key)
        if text is None:
            path, _, query = target.partition("?")
            r = self.replies
            spec = r.builder.build(host, r.layout.page_of[host][path], query)
            text = self._texts[key] = render_page(spec, r.vocab, r.config.seed, version)
            if len(self._texts) > self._limit:
                self._texts.popitem(last=False)
        else:
            self._texts.move_to_end(key)
        return text

