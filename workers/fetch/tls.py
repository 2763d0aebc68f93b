"""TLS settings for the fetcher's pools: which CAs are trusted, always verified when on.

``verify=True`` and ``extra_ca`` get one :class:`ssl.SSLContext` built here and shared by every
connection (a context per connection costs ~20x the handshake, see docs/fetch-engine.md):
certifi's bundle, then for ``extra_ca`` a private CA trusted *in addition to* the public roots
(an intranet crawl, a test web). A ``verify`` path keeps what requests did: urllib3 builds a
context per new connection and loads the path into it. Verification stays ``CERT_REQUIRED``
with hostname checking; there is no way to turn it off through ``extra_ca``.
"""

from __future__ import annotations

import os
import ssl
from typing import Any

import certifi
from urllib3.util.ssl_ import create_urllib3_context


def _load(ctx: ssl.SSLContext, path: str) -> None:
    if os.path.isdir(path):
        ctx.load_verify_locations(capath=path)
    else:
        ctx.load_verify_locations(cafile=path)


def context_with_extra_ca(base: str, extra_ca: str) -> ssl.SSLContext:
    """A verifying client context trusting the CAs in ``base`` and then those in ``extra_ca``.

    Raises (``FileNotFoundError``, ``ssl.SSLError``) if either cannot be loaded: a CA the
    operator asked for and did not get is a configuration error, not a per-fetch one.
    """
    ctx = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
    _load(ctx, base)
    _load(ctx, extra_ca)
    if ctx.verify_mode != ssl.CERT_REQUIRED or not ctx.check_hostname:
        raise RuntimeError("TLS context does not verify certificates and host names")
    return ctx


def pool_tls_kwargs(verify: bool | str, extra_ca: str | None) -> tuple[dict[str, Any], str | None]:
    """PoolManager TLS keyword arguments, and the CA path to check before each HTTPS fetch.

    ``verify=True`` or ``extra_ca``: one shared context, loaded now. A ``verify`` path without
    ``extra_ca``: as requests' adapter gave its pools (``cert_verify``), checked to exist at
    fetch time (a missing bundle is then a ``fetch_error``, as it was).
    """
    if extra_ca is not None:
        if verify is False:
            raise ValueError("extra_ca adds trusted CAs; it cannot be used with verify=False")
        base = certifi.where() if verify is True else str(verify)
        ctx = context_with_extra_ca(base, extra_ca)
        return {"cert_reqs": "CERT_REQUIRED", "ssl_context": ctx}, None
    tls: dict[str, Any] = {"cert_reqs": "CERT_REQUIRED" if verify else "CERT_NONE"}
    if not verify:
        return tls, None
    if verify is True:
        # One shared context with certifi's roots: urllib3 given ca_certs builds a context and
        # loads the bundle for every new connection, 28.6 ms of CPU per HTTPS connection
        # against 1.5 ms with a shared one (bench/fetch_engines.py, docs/fetch-engine.md).
        ctx = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
        _load(ctx, certifi.where())
        return {"cert_reqs": "CERT_REQUIRED", "ssl_context": ctx}, None
    ca_path = str(verify)
    if os.path.isdir(ca_path):
        tls["ca_cert_dir"] = ca_path
    else:
        tls["ca_certs"] = ca_path
    return tls, ca_path


def client_context(verify: bool | str, extra_ca: str | None) -> ssl.SSLContext:
    """One :class:`ssl.SSLContext` for every connection of an aiohttp session (the
    :class:`~workers.fetch.aio.AsyncFetcher`), trusting what :func:`pool_tls_kwargs` trusts.

    ``verify=False`` (only without ``extra_ca``): no certificate or host name check, as
    urllib3's ``CERT_NONE``. A ``verify`` path is loaded here; a missing one raises
    ``FileNotFoundError`` (the caller checks it first, to fail the fetch as Fetcher does).
    """
    if extra_ca is not None:
        return pool_tls_kwargs(verify, extra_ca)[0]["ssl_context"]  # type: ignore[no-any-return]
    if verify is False:
        ctx = create_urllib3_context(cert_reqs=ssl.CERT_NONE)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ctx = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
    _load(ctx, certifi.where() if verify is True else str(verify))
    if ctx.verify_mode != ssl.CERT_REQUIRED or not ctx.check_hostname:
        raise RuntimeError("TLS context does not verify certificates and host names")
    return ctx
