"""Bad certificates for the hostile web's TLS hosts, picked by SNI.

A crawl trusts this module's CA (``ca_path``, its ``ca_bundle`` setting), so the only reason
a handshake fails is the case's fault: a certificate signed by no trusted CA (self-signed),
one whose validity ended (expired), or one for another host name. A host with the ``ok``
fault gets a good certificate: the negative control, showing the CA is trusted.
"""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

#: TLS faults a case can have.
FAULTS = ("ok", "self_signed", "expired", "wrong_host")


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _cert(subject: str, san: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
          signer: ec.EllipticCurvePrivateKey, start: dt.datetime, end: dt.datetime,
          ca: bool = False) -> x509.Certificate:
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]),
                                        critical=False)
    return builder.sign(signer, hashes.SHA256())


class FaultyCertificates:
    """A CA in ``directory`` and a server context whose SNI callback gives each host of
    ``faults`` (host name -> fault) the certificate its fault calls for."""

    def __init__(self, faults: dict[str, str], directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.UTC)
        day = dt.timedelta(days=1)
        self._key = ec.generate_private_key(ec.SECP256R1())
        ca_name = _name("Trawl hostile web CA")
        ca = _cert("Trawl hostile web CA", "", self._key, ca_name, self._key, now - day,
                   now + 30 * day, ca=True)
        self.ca_path = directory / "ca.pem"
        self.ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        key_path = directory / "key.pem"
        key_path.write_bytes(self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption()))
        other = ec.generate_private_key(ec.SECP256R1())  # the self-signed one's own "CA"
        self._contexts: dict[str, ssl.SSLContext] = {}
        for host, fault in faults.items():
            if fault not in FAULTS:
                raise ValueError(f"unknown TLS fault {fault!r}: one of {FAULTS}")
            start, end = now - day, now + 30 * day
            issuer, signer, name = ca_name, self._key, host
            if fault == "expired":
                start, end = now - 60 * day, now - 30 * day
            elif fault == "wrong_host":
                name = "someone-else.example"
            elif fault == "self_signed":
                issuer, signer = _name(host), other
            cert = _cert(name, name, self._key, issuer, signer, start, end)
            cert_path = directory / f"{host}.pem"
            cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert_path, key_path)
            self._contexts[host] = ctx
        #: the listening context: SNI picks a host's; an unknown name is refused
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(directory / f"{next(iter(faults))}.pem", key_path)
        self.context.sni_callback = self._on_sni

    def _on_sni(self, sslobj: ssl.SSLObject | ssl.SSLSocket, name: str | None,
                _ctx: ssl.SSLContext) -> int | None:
        ctx = self._contexts.get((name or "").lower())
        if ctx is None:
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        sslobj.context = ctx
        return None
