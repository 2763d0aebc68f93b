"""TLS for the sandbox's HTTPS hosts: a CA made at start, a certificate per host name, chosen
by SNI.

The real web serves about half its hosts over HTTPS, and a crawler's TLS handling (handshake
cost, verification, connection reuse per host) only shows against real handshakes. A crawl
trusts this CA through its ``ca_bundle`` setting (the PEM at ``ca_path``); verification stays
on. Keys are ECDSA P-256, so a handshake costs the server a fraction of a millisecond. All leaf
certificates share one key: a crawler sees one certificate per name either way, and one key
saves a key generation per host. Certificates and contexts are made on a host's first
handshake (about 1 ms), or all at once by :meth:`HostCertificates.warm` (benchmarks).
"""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID = dt.timedelta(days=30)
_DEFAULT_NAME = "unknown.sandbox.invalid"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Trawl sandbox"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    """SEC1 PEM: OpenSSL 3 loads it faster than PKCS#8 (0.5 vs 1 ms per context, measured)."""
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


class HostCertificates:
    """A fresh CA in ``directory`` (``ca.pem``) and server contexts for ``hosts`` by SNI."""

    def __init__(self, hosts: set[str] | frozenset[str], directory: str | Path) -> None:
        self.hosts = frozenset(hosts)
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.UTC)
        self._not_before, self._not_after = now - dt.timedelta(days=1), now + _VALID
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = _name("Trawl sandbox CA")
        self._ca_name = ca_name
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
              .public_key(self._ca_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(self._not_before).not_valid_after(self._not_after)
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                           key_encipherment=False, data_encipherment=False,
                                           key_agreement=False, key_cert_sign=True,
                                           crl_sign=True, encipher_only=False,
                                           decipher_only=False), critical=True)
              .add_extension(x509.SubjectKeyIdentifier.from_public_key(
                  self._ca_key.public_key()), critical=False)
              .sign(self._ca_key, hashes.SHA256()))
        self._ca_cert = ca
        self.ca_path = str(self.dir / "ca.pem")
        Path(self.ca_path).write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self._leaf_key = ec.generate_private_key(ec.SECP256R1())
        self._key_path = self.dir / "leaf-key.pem"
        self._key_path.write_bytes(_pem_key(self._leaf_key))
        self._contexts: dict[str, ssl.SSLContext] = {}
        #: The listening context: no host's certificate; SNI picks one (or refuses the name).
        self.context = self._context_for(_DEFAULT_NAME)
        self.context.sni_callback = self._on_sni

    def _leaf_pem(self, host: str) -> bytes:
        cert = (x509.CertificateBuilder().subject_name(_name(host)).issuer_name(self._ca_name)
                .public_key(self._leaf_key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(self._not_before).not_valid_after(self._not_after)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    self._ca_key.public_key()), critical=False)
                .sign(self._ca_key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM)

    def _context_for(self, host: str) -> ssl.SSLContext:
        cert_path = self.dir / f"{host}.pem"
        cert_path.write_bytes(self._leaf_pem(host))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(cert_path, self._key_path)
        return ctx

    def context_of(self, host: str) -> ssl.SSLContext:
        """The server context holding ``host``'s certificate (made on first use)."""
        ctx = self._contexts.get(host)
        if ctx is None:
            ctx = self._contexts[host] = self._context_for(host)
        return ctx

    def warm(self) -> int:
        """Make every host's certificate and context now; returns how many."""
        for host in self.hosts:
            self.context_of(host)
        return len(self._contexts)

    def _on_sni(self, sslobj: ssl.SSLObject | ssl.SSLSocket, name: str | None,
                _ctx: ssl.SSLContext) -> int | None:
        """A host of ours gets its certificate; any other name (or none) is refused, as a
        server without that name would."""
        if name is None or name.lower() not in self.hosts:
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        sslobj.context = self.context_of(name.lower())
        return None
