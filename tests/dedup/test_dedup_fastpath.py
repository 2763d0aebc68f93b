"""The fast dedup path (dedup.text, dedup.shingles, dedup.service.page_features) against a
verbatim copy of the implementation it replaced (``ref_*`` below, also timed by
bench/dedup_cost.py): the same main text, tokens, fingerprints and signatures on the real pages,
generated sandbox pages, handmade edge cases and random text. Fingerprints and signatures are
stored and compared across workers and versions, so "the same" means byte for byte."""

from __future__ import annotations

import contextlib
import os
import random
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import lxml.html
import numpy as np
import pytest
import xxhash
from lxml import etree

from dedup import shingles as sh
from dedup import text as tx
from dedup.config import DedupConfig
from dedup.minhash import MinHasher, OnePermutationHasher
from dedup.service import page_features
from sandbox import SandboxConfig, SandboxSite

# ---- reference: the implementation before the fast path, copied unchanged ----------------

REF_DROP_TAGS = frozenset({
    "head", "script", "style", "noscript", "template", "svg", "math", "select", "option",
    "button", "textarea", "iframe", "object", "canvas",
    # boilerplate frame
    "nav", "header", "footer", "aside", "menu",
})
REF_DROP_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "menu",
                            "search"})
_REF_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_REF_TOKEN = re.compile(f"[{_REF_CJK}]|[^\\W_{_REF_CJK}]+")
_REF_DIGITS = re.compile(r"\d+")
_REF_ZEROS = re.compile(rb"00+")


def _ref_ascii_table() -> bytes:
    table = bytearray(range(256))
    for c in range(128):
        ch = chr(c)
        table[c] = ord("0") if ch.isdigit() else ord(ch.lower()) if ch.isalpha() else 32
    return bytes(table)


_REF_ASCII = _ref_ascii_table()


def _ref_collect(el: Any, out: list[str]) -> None:
    if el.text:
        out.append(el.text)
    for child in el:
        tag = child.tag
        if isinstance(tag, str):
            local = tag.rpartition("}")[2].lower() if "}" in tag else tag.lower()
            role = child.get("role")
            if local not in REF_DROP_TAGS and not (role and role.lower() in REF_DROP_ROLES):
                _ref_collect(child, out)
        if child.tail:
            out.append(child.tail)


def ref_main_text(doc: Any) -> str:
    root = tx.parse(doc) if isinstance(doc, bytes | str) else doc
    if root is None:
        return ""
    if hasattr(root, "getroot"):
        root = root.getroot()
    if not isinstance(root.tag, str):
        return ""
    parts: list[str] = []
    _ref_collect(root, parts)
    return " ".join(parts)


def ref_normalize_text(text: str) -> list[bytes]:
    if text.isascii():
        data = text.encode("ascii").translate(_REF_ASCII)
        if b"00" in data:
            data = _REF_ZEROS.sub(b"0", data)
        return data.split()
    return [t.encode("utf-8") for t in _REF_TOKEN.findall(_REF_DIGITS.sub("0", text.lower()))]


def ref_tokens(doc: Any) -> list[bytes]:
    return ref_normalize_text(ref_main_text(doc))


def ref_token_hashes(tokens: list[bytes]) -> np.ndarray:
    return np.fromiter(map(xxhash.xxh3_64_intdigest, tokens), dtype=np.uint64,
                       count=len(tokens))


def ref_shingle_hashes(tokens: list[bytes], w: int = 4, unique: bool = True) -> np.ndarray:
    k, mix = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)
    if w < 1:
        raise ValueError(f"shingle width w={w} must be >= 1")
    n = len(tokens)
    if n == 0:
        return np.empty(0, dtype=np.uint32)
    h = ref_token_hashes(tokens)
    if n < w:
        w = n
    m = n - w + 1
    with np.errstate(over="ignore"):
        acc = h[:m].copy()
        for j in range(1, w):
            acc *= k
            acc += h[j : j + m]
        acc ^= acc >> np.uint64(29)
        acc *= mix
        acc >>= np.uint64(32)
    out = acc.astype(np.uint32)
    return np.unique(out) if unique else out


def ref_page_features(doc: Any, config: DedupConfig,
                      hasher: MinHasher | OnePermutationHasher
                      ) -> tuple[bytes, np.ndarray, int] | None:
    toks = ref_tokens(doc)
    if len(toks) < config.min_tokens or not toks:
        return None
    fp = xxhash.xxh3_128_digest(b" ".join(toks))
    sig = hasher.signature(ref_shingle_hashes(toks, config.shingle_w, unique=False))
    return fp, sig, len(toks)


# ---- inputs --------------------------------------------------------------------------------

REALPAGES = Path(os.environ.get("TRAWL_VECTORS", "/work/shared/vectors")) / "realpages"


def real_pages() -> list[tuple[str, bytes]]:
    return [(p.stem, p.read_bytes()) for p in sorted(REALPAGES.glob("*.html"))]


def sandbox_pages(limit: int | None = None, seed: int = 5) -> list[tuple[str, bytes]]:
    """Generated pages (labelled duplicates and trap hosts on) and the HTML special pages."""
    site = SandboxSite(SandboxConfig(seed=seed, hosts=40, pages_per_host=20, ips=20,
                                     duplicates=True, traps=True), 8080)
    out = []
    for url in site.page_urls() + site.special_urls():
        p = urlsplit(url)
        reply = site.respond(p.hostname or "", p.path + (f"?{p.query}" if p.query else ""))
        if reply.status == 200 and reply.content_type.startswith("text/html"):
            out.append((url, reply.body))
        if limit and len(out) >= limit:
            break
    return out


_LONG_MIXED = " ".join(
    f"Word{i} naïve café {i * 7919} Ελλάδα 東京{i % 10} ＡＢＣ１２ ٣٤ x_y-z {'q' * (i % 40)}"
    for i in range(300))

#: Handmade documents (bytes or str, through dedup.text.parse like a raw body).
TRICKY: list[bytes | str] = [
    b"", "", b"   \n", b"<html></html>", "<html>only text, 42 words</html>",
    b"<!-- just a comment -->", b"<?pi only?>", "plain text, no markup at all",
    b"<html><body><div><nav><p>a<footer>b</footer>c</p></nav>d</div>e</body></html>",
    b"<p>x<script>s</script>y<style>z</style>w<noscript>n</noscript>v</p>tail",
    b"<div role='NaVigation'>n1</div><div role='Navigation '>kept1</div><div role=''>e</div>"
    b"<div role='main'>m</div><div role='navigation banner'>kept2</div><span ROLE=MENU>m2</span>"
    b"<section role=contentInfo>ci</section><b role='search'>s</b>after",
    b"<p>a<!-- c -->b<?php echo 1 ?>c<![CDATA[d]]>e</p>",
    b"<p>&amp; &nbsp;x&#169;y &unknown; &#x4e2d;&#x6587; &lt;tag&gt;</p>",
    "<p>Příliš žluťoučký kůň úpěl ďábelské ódy, ΣΊΣΥΦΟΣ ΟΔΟΣ, 中文字符 日本語のテキスト "
    "한국어 텍스트 ٠١٢٣ ０１２ İstanbul Kelvin \u212a ﬁne ß</p>",
    b"<p>a<b>b<i>c</p>d</div></span>e<table><tr><td>x</table>f<scr<script>ipt>g",
    b"\x00\x01binary\xff\xfe junk \x80\x81 <p>caf\xe9 cp1252</p>",
    "<HTML><BODY><SCRIPT>x</SCRIPT>y<Nav>n</Nav><HeAdEr>h</HeAdEr>z</BODY></HTML>",
    b"<p>a<x}nav>b</x}nav>c<Foo:Nav>d</Foo:Nav>e<svg:rect>f</svg:rect>g</p>",
    "<div>" * 150 + "deep" + "</div>" * 150,
    f"<main><p>{_LONG_MIXED}</p><aside>{_LONG_MIXED}</aside></main>",
    "<p>" + " ".join("ΣΟΦΙΑ ΣΟΦΟΣ" for _ in range(400)) + "</p>",
    # final sigma: lower() looks past case-ignorable "." and "'" (separators here) for letters
    "<p>" + "ΟΔΟΣ.Α ΣΟΦΟΣ'Β ΑΣ:b x" * 200 + "</p>",
    "<p>" + " ".join(["a" * 300, "b" * 17, "c" * 255, "d" * 256, "0123456789" * 40] * 30)
    + "</p>",
    "<p>" + "abc " * 2000 + "</p>",
    "<p>" + "z\u00a0" * 1500 + "</p>",
    "<p>" + "word " * 500 + "ending in café</p>",
    "<p>lone surrogate \ud800 in a str body</p>",
]

XHTML = (b'<?xml version="1.0"?>\n<html xmlns="http://www.w3.org/1999/xhtml" '
         b'xmlns:svg="http://www.w3.org/2000/svg"><head><title>t</title></head><body>'
         b'<NAV>upper nav</NAV><nav>x</nav>kept<svg:svg><svg:text>s</svg:text></svg:svg>tail'
         b'<!-- comment --><?pi data?>after<p role="Banner">b</p><p>para 12</p>'
         b'<p>a<![CDATA[cd]]>b</p></body></html>')
XML_ENTITIES = (b'<!DOCTYPE html [<!ENTITY e "entity text">]>'
                b'<html><body><p>a&e;b<span>c</span>&e;</p></body></html>')


def _modified_trees() -> Iterator[Any]:
    """Trees edited through lxml: adjacent text nodes, empty texts, a tail on the root."""
    root = lxml.html.fromstring(b"<div><p>a<b>x</b>c<i>y</i>d</p><nav>n</nav>e</div>")
    etree.strip_tags(root, "b")  # leaves "a", "x", "c" as separate, adjacent text nodes
    yield root
    root = lxml.html.fromstring(b"<div><p>a</p><p>b</p></div>")
    root[0].text = ""
    root[1].tail = ""
    root.tail = "root tail is not collected"
    yield root
    root = etree.Element("root")
    etree.SubElement(root, "{urn:x}HEAD").text = "namespaced head"
    etree.SubElement(root, "{urn:x}Para").text = "namespaced para"
    root[-1].tail = "t"
    root.append(etree.Comment("comment"))
    root[-1].tail = "after comment"
    root.append(etree.ProcessingInstruction("pi", "x"))
    root[-1].tail = "after pi"
    root.append(etree.Entity("amp"))
    root[-1].tail = "after entity"
    yield root


def doc_forms(body: bytes | str) -> Iterator[Any]:
    """``body`` as raw input and as the trees a caller may hand over."""
    yield body
    root = tx.parse(body)
    if root is None:
        return
    yield root  # dedup.text.parse: comments and PIs removed (as the worker's parser)
    yield root.getroottree()
    yield root.find(".//body") if root.find(".//body") is not None else root
    if root.find(".//head") is not None:
        yield root.find(".//head")  # an element of a dropped tag given as the root
    with contextlib.suppress(etree.ParserError, ValueError):
        yield lxml.html.fromstring(body)  # keeps comments and PIs


def all_docs() -> Iterator[tuple[str, Any]]:
    for i, body in enumerate(TRICKY):
        for j, doc in enumerate(doc_forms(body)):
            yield f"tricky{i}.{j}", doc
    for name, raw in [("xhtml", XHTML), ("entities", XML_ENTITIES)]:
        yield name, etree.fromstring(raw)
        yield name + "-unresolved", etree.fromstring(
            raw, etree.XMLParser(resolve_entities=False))
        yield name + "-html", raw
    for i, root in enumerate(_modified_trees()):
        yield f"modified{i}", root
    yield "comment-node", etree.Comment("a comment node given as the root")


CONFIGS = [DedupConfig(), DedupConfig(min_tokens=0, shingle_w=1),
           DedupConfig(min_tokens=30, shingle_w=8)]
HASHERS = [OnePermutationHasher(128, 1), MinHasher(16, 3)]


def assert_same(doc: Any, label: str) -> None:
    text = ref_main_text(doc)
    assert tx.main_text(doc) == text, label
    toks = ref_normalize_text(text)
    assert tx.normalize_text(text) == toks, label
    assert tx.token_string(text) == b" ".join(toks), label
    assert tx.tokens(doc) == toks, label
    assert tx.page_token_string(doc) == b" ".join(toks), label
    for config in CONFIGS:
        for hasher in HASHERS:
            want = ref_page_features(doc, config, hasher)
            got = page_features(doc, config, hasher)
            if want is None:
                assert got is None, label
                continue
            assert got is not None, label
            assert got[0] == want[0] and got[2] == want[2], label
            assert got[1].dtype == want[1].dtype and np.array_equal(got[1], want[1]), label


# ---- tests ----------------------------------------------------------------------------------


def test_tricky_documents_give_the_reference_results() -> None:
    docs = list(all_docs())
    assert len(docs) > 100
    for label, doc in docs:
        assert_same(doc, label)


@pytest.mark.skipif(not REALPAGES.is_dir(), reason="realpages vectors not present")
def test_real_pages_give_the_reference_results() -> None:
    pages = real_pages()
    assert len(pages) >= 20
    from workers.pipeline.parse import parse_html

    for name, body in pages:
        tree = parse_html(body, f"http://example.test/{name}").tree  # the worker's tree
        for doc in (tree, lxml.html.fromstring(body), body):
            assert_same(doc, name)


def test_sandbox_pages_give_the_reference_results() -> None:
    from workers.pipeline.parse import parse_html

    pages = sandbox_pages()
    assert len(pages) >= 800
    config, hasher = DedupConfig(), OnePermutationHasher(128, 1)
    for url, body in pages:
        tree = parse_html(body, url).tree
        text = ref_main_text(tree)
        assert tx.main_text(tree) == text, url
        toks = ref_normalize_text(text)
        assert tx.tokens(tree) == toks and tx.token_string(text) == b" ".join(toks), url
        want, got = ref_page_features(tree, config, hasher), page_features(tree, config, hasher)
        assert (want is None) == (got is None), url
        if want is not None and got is not None:
            assert got[0] == want[0] and got[2] == want[2], url
            assert np.array_equal(got[1], want[1]), url
    for url, body in pages[:100]:
        assert_same(body, url)


def _random_texts(rng: random.Random, count: int) -> Iterator[str]:
    rare = [*"éüÖßçñÆøåÉΑΣσςαβПривет中文字日本語한국어ひらカタ",
        "\u0301", "\u0307", "\u00a0", "\u200b", "\u3000", "\uff10", "\uff21", "\u0661",
        "\u0966", "\u212a", "\u0130", "\ufb01", "\U0001f600", "\u2028", "\u0085", "\ud800",
        "\u00b2", "\u2460", "\u2163", "\u0345", "\u1e9e"]
    ascii_ = list("abcxyzABCXYZ0123456789 ___--..,;:'\"!?\t\n\r\x0b\x0c\x00\x1c\x1f\x7f")
    for _ in range(count):
        size = rng.choice([0, 1, 5, 50, 500, 1999, 2000, 2001, 5000, 20000])
        mode = rng.random()
        if mode < 0.3:
            yield "".join(rng.choice(ascii_ + rare) for _ in range(size))
        elif mode < 0.7:  # words, a few with a non-ASCII character
            words: list[str] = []
            while sum(map(len, words)) < size:
                w = "".join(rng.choice("abcdefghij0123456789") for _ in range(rng.randint(1, 20)))
                if rng.random() < 0.1:
                    i = rng.randint(0, len(w))
                    w = w[:i] + rng.choice(rare) + w[i:]
                words.append(w)
            yield rng.choice([" ", "  ", ", ", "_", "\n"]).join(words)
        else:
            yield "".join(rng.choice(ascii_) if rng.random() < 0.8 else rng.choice(rare)
                          for _ in range(size))


def test_random_text_normalizes_as_the_reference() -> None:
    rng = random.Random(20261204)
    for text in _random_texts(rng, 1500):
        toks = ref_normalize_text(text)
        assert tx.normalize_text(text) == toks, text[:80]
        assert tx.token_string(text) == b" ".join(toks), text[:80]


def test_lower_is_per_character_except_capital_sigma() -> None:
    """What the chunked Unicode path relies on: str.lower() of a string is the lower() of each
    character, capital sigma (final-sigma rule) aside; and no non-ASCII character lowers to
    ASCII letters of a dropped tag or role name (the Kelvin sign gives "k")."""
    context = [("a", "b"), ("A.", ".B"), ("Α", "")]
    odd, to_ascii = [], set()
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        low = c.lower()
        if any((x + c + y).lower() != x.lower() + low + y.lower() for x, y in context):
            odd.append(c)
        if cp >= 128 and low.isascii():
            to_ascii.add(low)
    assert odd == [tx._SIGMA]
    assert to_ascii == {"k"}


def test_vector_token_hashes_equal_xxhash_for_every_length() -> None:
    assert sh._VECTOR_OK
    rng = np.random.default_rng(11)
    alphabet = np.array([c for c in range(256) if c != 32], dtype=np.uint8)
    lengths = list(range(1, 70)) * 40 + [255, 256, 300, 1000]
    rng.shuffle(lengths)
    toks = [bytes(rng.choice(alphabet, size=k)) for k in lengths]
    joined = b" ".join(toks)
    assert len(joined) >= sh.VECTOR_MIN_BYTES
    assert np.array_equal(sh.string_token_hashes(joined), ref_token_hashes(toks))
    assert np.array_equal(sh._vector_hashes(b"ab cdefg hijklmnopq"),
                          ref_token_hashes([b"ab", b"cdefg", b"hijklmnopq"]))
    for n in (1, 2, 3, 5, 600, 2000):  # either side of the per-token cut-over
        part = b" ".join(toks[:n])
        assert np.array_equal(sh.string_token_hashes(part), ref_token_hashes(toks[:n]))
    assert len(sh.string_token_hashes(b"")) == 0


def test_shingles_of_hashes_equal_the_reference() -> None:
    toks = [f"w{i % 97}".encode() for i in range(500)]
    for w in (1, 2, 4, 9, 600):
        for unique in (True, False):
            want = ref_shingle_hashes(toks, w, unique)
            assert np.array_equal(sh.shingle_hashes(toks, w, unique), want)
            assert np.array_equal(
                sh.shingles_of_hashes(sh.string_token_hashes(b" ".join(toks)), w, unique), want)
    with pytest.raises(ValueError):
        sh.shingles_of_hashes(np.zeros(3, dtype=np.uint64), 0)


def test_tag_kind_cache_is_bounded_and_exact() -> None:
    tags: list[Callable[..., Any] | str] = ["nav", "NAV", "{urn:x}Footer", "a}nav", "x",
                                            etree.Comment, etree.ProcessingInstruction]
    for tag in tags:
        assert tx._tag_kind(tag) == tx._tag_kinds.get(tag, tx._tag_kind(tag))
    assert [tx._tag_kind(t) for t in tags] == [tx._DROP, tx._DROP, tx._DROP, tx._DROP,
                                                tx._KEEP, tx._NOT_ELEMENT, tx._NOT_ELEMENT]
    saved = dict(tx._tag_kinds)
    try:
        for i in range(2 * tx._TAG_KINDS_MAX):
            assert tx._tag_kind(f"t{i}") == tx._KEEP
        assert len(tx._tag_kinds) == tx._TAG_KINDS_MAX
    finally:
        tx._tag_kinds.clear()
        tx._tag_kinds.update(saved)
