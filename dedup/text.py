"""Text normalization for shingling: visible main text → a list of normalized tokens.

Choices (docs/dedup.md explains them):

* Markup, ``script``/``style``/``noscript``/``template``/``svg`` and form controls are dropped.
* Boilerplate is reduced *structurally*: whole ``head``, ``nav``, ``header``, ``footer``,
  ``aside`` subtrees and elements with an ARIA landmark role of the same meaning are skipped.
  We do not learn per-host repeated lines online: that makes a page's signature depend on
  which pages of its host were seen before it (and on which worker), so the same page could
  hash differently over time, and the first pages of every host would keep their boilerplate.
* Case is folded, every run of digits becomes ``0`` (dates, counters and view counts make
  otherwise identical copies look different), tokens are Unicode words; Chinese/Japanese/Korean
  characters count as one token each, since those scripts do not separate words by spaces.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
from lxml import etree

#: Subtrees whose text never counts.
DROP_TAGS = frozenset({
    "head", "script", "style", "noscript", "template", "svg", "math", "select", "option",
    "button", "textarea", "iframe", "object", "canvas",
    # boilerplate frame
    "nav", "header", "footer", "aside", "menu",
})
DROP_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "menu",
                        "search"})

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_TOKEN = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")
_DIGITS = re.compile(r"\d+")
_ZEROS = re.compile(rb"00+")
#: _TOKEN, or a newline: marks where one text of a batch ends (see _mixed_token_string).
_TOKEN_OR_NL = re.compile(_TOKEN.pattern + "|\n")
#: str.lower() maps every character on its own except capital sigma, whose lower case depends
#: on the letters around it (final sigma); tests/dedup/test_dedup_fastpath.py checks this claim.
_SIGMA = "\u03a3"


def _ascii_table() -> bytes:
    """ASCII letters lowercased, digits → '0', everything else → space; bytes ≥ 128 kept."""
    table = bytearray(range(256))
    for c in range(128):
        ch = chr(c)
        table[c] = ord("0") if ch.isdigit() else ord(ch.lower()) if ch.isalpha() else 32
    return bytes(table)


_ASCII = _ascii_table()
_PARSER = etree.HTMLParser(recover=True, no_network=True, remove_comments=True,
                           remove_pis=True)


def parse(body: bytes | str) -> Any:
    """An lxml root for raw bytes (UTF-8, else cp1252) or text; None when nothing parses."""
    if isinstance(body, bytes):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text = body.decode("cp1252", errors="replace")
    else:
        text = body
    if not text.strip():
        return None
    try:
        return etree.fromstring(text, _PARSER)
    except (etree.ParserError, ValueError):
        return None


#: What a child node's tag means for _collect, cached per distinct tag (a str, or lxml's Comment,
#: ProcessingInstruction or Entity factory for those nodes).
_KEEP, _DROP, _NOT_ELEMENT = 0, 1, 2
_tag_kinds: dict[Any, int] = {}
_TAG_KINDS_MAX = 4096  # tags are page-controlled: bound the cache


def _tag_kind(tag: Any) -> int:
    """_KEEP, _DROP (local name in DROP_TAGS, any case or namespace) or _NOT_ELEMENT."""
    if isinstance(tag, str):
        local = tag.rpartition("}")[2].lower() if "}" in tag else tag.lower()
        kind = _DROP if local in DROP_TAGS else _KEEP
    else:
        kind = _NOT_ELEMENT
    if len(_tag_kinds) < _TAG_KINDS_MAX:
        _tag_kinds[tag] = kind
    return kind


# The walk stays in Python. Measured on the sandbox pages (~160 elements, ~280 text nodes, this
# walk ~0.1 ms), the C-level alternatives in lxml were no faster or not the same text:
# * XPath ``.//text()[not(ancestor::*[drop test])]``: libxml2 spends ~1.5 us per predicate
#   evaluation, 2-20 ms a page; even a bare ``.//text()`` is 0.06 ms. It would also differ:
#   text() splits the adjacent text nodes that .text/.tail join (CDATA, strip_tags), and
#   local-name() is the whole name where libxml2's HTML parser makes tags like "x}nav".
# * XSLT with a template per dropped tag: ~0.04 ms fixed cost a transform, 0.1 ms in all.
# * itertext() on a copy with the dropped subtrees removed: itertext alone is ~0.08 ms.
def _collect(el: Any, append: Callable[[str], None]) -> None:
    """Text of ``el``'s kept descendants, in document order (tails are added by the parent).

    Each .text/.tail/.get is one lxml call that builds a new str, so each is read once, the
    tag test is a dict lookup and el[:] lists the children in one call: ~20% less than the
    loop that tested each tag afresh (bench/dedup_cost.py).
    """
    text = el.text
    if text:
        append(text)
    for child in el[:]:  # every child node, comments and PIs included, as `for child in el`
        tag = child.tag
        kind = _tag_kinds.get(tag)
        if kind is None:
            kind = _tag_kind(tag)
        if kind == _KEEP:
            role = child.get("role")
            if not role or role.lower() not in DROP_ROLES:
                _collect(child, append)
        tail = child.tail
        if tail:
            append(tail)


def main_text(doc: Any) -> str:
    """Visible text outside the boilerplate frame. ``doc``: lxml root, bytes or str."""
    root = parse(doc) if isinstance(doc, bytes | str) else doc
    if root is None:
        return ""
    if hasattr(root, "getroot"):  # an ElementTree rather than an element
        root = root.getroot()
    if not isinstance(root.tag, str):
        return ""
    parts: list[str] = []
    _collect(root, parts.append)
    return " ".join(parts)


def normalize_text(text: str) -> list[bytes]:
    """Case-folded, digit-normalized tokens of plain text, as UTF-8 bytes.

    ASCII text takes a bytes.translate + split path (~5x faster than the regex); any other
    text the Unicode regex, which gives the same tokens on ASCII input (and only where it
    is needed: see :func:`_mixed_token_string`).
    """
    if text.isascii():
        data = text.encode("ascii").translate(_ASCII)
        if b"00" in data:
            data = _ZEROS.sub(b"0", data)
        return data.split()
    joined = _unicode_token_string(text)
    return joined.split(b" ") if joined else []


def token_string(text: str) -> bytes:
    """``b" ".join(normalize_text(text))`` (the input of the exact fingerprint), made without
    a bytes object per token."""
    if text.isascii():
        return _squeeze(text.encode("ascii").translate(_ASCII))
    return _unicode_token_string(text)


#: Below this many bytes the bytes-method versions of the numpy steps are cheaper.
_NUMPY_MIN = 1000


def _squeeze(data: bytes) -> bytes:
    """``b" ".join(_ZEROS.sub(b"0", data).split())`` for ``data`` whose only whitespace byte
    is the space (bytes.translate(_ASCII) output, and UTF-8 tokens between spaces).

    In numpy for long data: 25 us against 130 us for sub + split + join on a 28 KB sandbox
    page, which makes a bytes object per token.
    """
    if len(data) < _NUMPY_MIN:
        if b"00" in data:
            data = _ZEROS.sub(b"0", data)
        return b" ".join(data.split())
    arr = np.frombuffer(data, dtype=np.uint8)
    cur = arr[1:]
    repeat = cur == arr[:-1]
    repeat &= (cur | 16) == 48  # the byte is b" " (32) or b"0" (48)
    keep = np.empty(len(arr), dtype=bool)
    keep[0] = True
    np.logical_not(repeat, out=keep[1:])
    return arr[keep].tobytes().strip(b" ")


def _regex_token_string(text: str) -> bytes:
    """The Unicode regex path on the whole text, tokens joined by spaces."""
    return " ".join(_TOKEN.findall(_DIGITS.sub("0", text.lower()))).encode("utf-8")


def _unicode_token_string(text: str) -> bytes:
    """token_string of non-ASCII text."""
    if len(text) < _NUMPY_MIN or _SIGMA in text:
        return _regex_token_string(text)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (never in tokens; the regex skips them)
        return _regex_token_string(text)
    return _mixed_token_string(data.translate(_ASCII))


#: Up to this many non-ASCII bytes, _non_ascii_chunks finds their chunks with bytes.rfind/find.
_FEW_NON_ASCII = 500


def _non_ascii_chunks(data: bytes) -> tuple[list[int], list[int]]:
    """Start and end offsets of the space-separated chunks of ``data`` that hold a byte >= 0x80."""
    arr = np.frombuffer(data, dtype=np.uint8)
    high = np.flatnonzero(arr >= 0x80)
    if len(high) <= _FEW_NON_ASCII:  # a few accents or quotes in Latin text
        starts, ends, end = [], [], -1
        for p in high.tolist():
            if p < end:  # in the chunk found last
                continue
            starts.append(data.rfind(b" ", 0, p) + 1)
            end = data.find(b" ", p)
            if end < 0:
                end = len(data)
            ends.append(end)
        return starts, ends
    spaces = np.flatnonzero(arr == 32)
    chunk = np.searchsorted(spaces, high)  # chunk k lies between spaces k-1 and k
    chunk = chunk[np.concatenate(([True], chunk[1:] != chunk[:-1]))]
    bounds = np.concatenate(([-1], spaces, [len(data)]))
    return (bounds[chunk] + 1).tolist(), bounds[chunk + 1].tolist()


def _mixed_token_string(data: bytes) -> bytes:
    """token_string of non-ASCII text from its UTF-8 ``data`` after translate(_ASCII).

    The ASCII characters the table turns into spaces are separators for the regex as well
    (not word characters, "_" excluded), so the tokens of the whole text are the tokens of
    its space-separated chunks in order; lower() maps characters one by one (capital sigma
    aside, kept off this path) and a digit run never crosses a space. An ASCII chunk is
    already normalized (up to runs of "0", squeezed at the end), so only the chunks with
    non-ASCII bytes go through the regex, in one batch joined by newlines. On the real
    pages (19 of 20 not ASCII, mostly Latin script with a few accented letters, quotes or
    no-break spaces): 0.3 ms a page against 1.5 ms for the regex over the whole text.
    """
    starts, ends = _non_ascii_chunks(data)
    if not starts:  # no byte >= 0x80 (not reached from token_string: the text is not ASCII)
        return _squeeze(data)
    batch = b"\n".join([data[s:e] for s, e in zip(starts, ends, strict=True)]).decode("utf-8")
    words = _TOKEN_OR_NL.findall(_DIGITS.sub("0", batch.lower()))
    replaced = " ".join(words).encode("utf-8").split(b"\n")  # one per chunk
    pieces = []
    prev = 0
    for s, e, rep in zip(starts, ends, replaced, strict=True):
        pieces.append(data[prev:s])  # ends with a space (or is the start)
        pieces.append(rep)
        prev = e
    pieces.append(data[prev:])
    return _squeeze(b"".join(pieces))


def tokens(doc: Any) -> list[bytes]:
    """Normalized tokens of a page (lxml root, bytes or str)."""
    return normalize_text(main_text(doc))


def page_token_string(doc: Any) -> bytes:
    """``b" ".join(tokens(doc))``: what page_features fingerprints and shingles."""
    return token_string(main_text(doc))
