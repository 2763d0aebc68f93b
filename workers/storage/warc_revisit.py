"""WARC ``revisit`` records: what a revisit that found nothing new archives instead of a second
full copy (WARC 1.1 section 6.7; continuous crawling, workers/pipeline/revisit.py).

Two profiles: *server-not-modified* for a 304 answer to a conditional GET (the record's block
is the 304's HTTP head), and *identical-payload-digest* for a 200 whose body has the bytes of
the last copy (the block is the response's HTTP head; the payload is left out and named by
``WARC-Payload-Digest``). Both name the full copy they stand for with
``WARC-Refers-To-Target-URI`` (the same URL) and ``WARC-Refers-To-Date`` (when the last full
copy was archived, to the second). The request record follows, ``WARC-Concurrent-To`` it, as
for a response.
"""

from __future__ import annotations

import enum
import hashlib
import time
from dataclasses import dataclass

from workers.fetch import FetchResult
from workers.storage.warc_records import (
    WARC_END,
    FetchRecords,
    http_head,
    record_ids,
    request_record,
    sha1_label,
    stored_headers,
    warc_date,
    warc_value,
)

#: The media type an index gives a revisit record (pywb's).
REVISIT_MIME = "warc/revisit"


class RevisitProfile(enum.Enum):
    """The two revisit profiles (the URI's last segment; the version goes in front)."""

    SERVER_NOT_MODIFIED = "server-not-modified"
    IDENTICAL_PAYLOAD = "identical-payload-digest"

    def uri(self, version: str) -> str:
        return f"http://netpreserve.org/warc/{version}/revisit/{self.value}"


@dataclass(frozen=True, slots=True)
class WarcRevisit:
    """Archive this fetch as a revisit record of ``profile``, referring to the full copy
    archived at ``refers_to_s`` (0: unknown), instead of a whole response."""

    profile: RevisitProfile
    refers_to_s: float


def revisit_records(result: FetchResult, warcinfo_id: str, version: str,
                    profile: RevisitProfile, refers_to_s: float) -> FetchRecords:
    """The revisit and request records of one fetch (uncompressed). ``refers_to_s``: when
    the full copy was archived (0: unknown, the header is left out)."""
    date = warc_date(result.started_at or time.time(), micros=version != "1.0")
    rev_id, req_id = record_ids()
    proto = result.http_version
    status_line = f"{result.status} {result.reason}".rstrip()
    headers = stored_headers(result)
    head = http_head(f"{proto} {status_line}" if proto else status_line, headers)
    url = result.url
    uri = warc_value(url)
    ip_line = f"WARC-IP-Address: {warc_value(result.ip)}\r\n" if result.ip else ""
    payload = (sha1_label(hashlib.sha1(result.body).digest())
               if profile is RevisitProfile.IDENTICAL_PAYLOAD else "")
    payload_line = f"WARC-Payload-Digest: {payload}\r\n" if payload else ""
    refers = (f"WARC-Refers-To-Date: {warc_date(refers_to_s, micros=False)}\r\n"
              if refers_to_s else "")
    rev_head = (
        f"WARC/{version}\r\nWARC-Date: {date}\r\nWARC-Warcinfo-ID: {warcinfo_id}\r\n"
        f"{ip_line}WARC-Type: revisit\r\nWARC-Record-ID: {rev_id}\r\n"
        f"WARC-Target-URI: {uri}\r\nWARC-Profile: {profile.uri(version)}\r\n"
        f"WARC-Refers-To-Target-URI: {uri}\r\n{refers}{payload_line}"
        f"WARC-Block-Digest: {sha1_label(hashlib.sha1(head).digest())}\r\n"
        f"Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(head)}\r\n\r\n"
    ).encode("utf-8", "backslashreplace")
    request = request_record(result, version, date, warcinfo_id, req_id, rev_id, ip_line,
                             f"WARC-Target-URI: {uri}\r\n")
    return FetchRecords((rev_head + head, b"", WARC_END), request, date, payload or "-",
                        [("Content-Type", REVISIT_MIME)])
