"""Deterministic non-HTML bodies: a small PDF and a valid PNG per resource path."""

from __future__ import annotations

import struct
import zlib

from .layout import rng_for


def pdf_bytes(seed: int, host: str, path: str) -> bytes:
    rng = rng_for(seed, "pdf", host, path)
    stream = " ".join(f"{rng.random():.6f}" for _ in range(rng.randint(800, 2400))).encode()
    return (b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n2 0 obj << /Length "
            + str(len(stream)).encode() + b" >>\nstream\n" + stream
            + b"\nendstream\nendobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")


def png_bytes(seed: int, host: str, path: str) -> bytes:
    rng = rng_for(seed, "png", host, path)
    w = h = rng.randint(16, 48)
    raw = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(w * 3)) for _ in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


CSS = b"body{font-family:sans-serif;max-width:60em;margin:auto}nav li{display:inline}\n"
