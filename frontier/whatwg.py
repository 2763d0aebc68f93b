"""``join_url`` and ``normalize_url`` of ada-url, without its Python wrapper's per-call cost.

Why: every link a worker extracts is resolved (``join_url``) and canonicalized
(``normalize_url``), ~120 calls a page on the internet-like web, and ada-url's own wrappers
spend more time in Python than in the C++ parser: ``normalize_url`` builds a dict of
attributes through ``getattr(lib, f"ada_get_{name}")`` and both hand the parsed URL to
``ffi.gc`` for a finalizer (py-spy: ``_get_obj`` alone was 3% of a worker's CPU). These call
the same C functions of the same library (``ada_url.ada_adapter.lib``) and free the URL
at once, so they return exactly what ada-url's functions return and raise the same
``ValueError`` (``tests/frontier/test_whatwg.py`` compares them): 2.8 -> 2.2 us a join, 2.5
-> 1.5 us a normalization.
"""

from __future__ import annotations

__all__ = ["join_url", "normalize_url"]

try:  # the cffi module behind ada-url's wrappers (ada-url 1.x-4.x); else its own functions
    from ada_url.ada_adapter import ffi, lib
except ImportError:  # pragma: no cover - another layout of ada-url
    ffi = lib = None


def _href(urlobj: object) -> str:
    """The parsed URL's serialization; frees ``urlobj``. ValueError if it did not parse."""
    try:
        if not lib.ada_is_valid(urlobj):
            raise ValueError("Invalid URL")
        href = lib.ada_get_href(urlobj)
        return ffi.unpack(href.data, href.length).decode() if href.length else ""
    finally:
        lib.ada_free(urlobj)


def _join_url(base_url: str, s: str) -> str:
    """``s`` resolved against ``base_url`` (WHATWG); ValueError when no valid URL results."""
    try:
        base_bytes = base_url.encode()
        s_bytes = s.encode()
    except Exception:
        raise ValueError("Invalid URL") from None
    return _href(lib.ada_parse_with_base(s_bytes, len(s_bytes), base_bytes, len(base_bytes)))


def _normalize_url(s: str) -> str:
    """``s`` parsed and serialized (WHATWG); ValueError when it is not a valid URL."""
    try:
        s_bytes = s.encode()
    except Exception:
        raise ValueError("Invalid URL") from None
    return _href(lib.ada_parse(s_bytes, len(s_bytes)))


if lib is not None and hasattr(lib, "ada_parse_with_base") and hasattr(lib, "ada_get_href"):
    join_url, normalize_url = _join_url, _normalize_url
else:  # pragma: no cover - ada-url without the C API these use
    from ada_url import join_url, normalize_url
