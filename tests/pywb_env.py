"""pywb for the replay tests, in a virtualenv of its own, and its ``wayback`` server.

pywb 2.10 pins ``redis==2.10.6`` (and ``werkzeug==3.1.7``, ``fakeredis<1.0``), which cannot
live beside Trawl's ``redis>=5``: pip refuses the pair in one environment. So pywb is
installed once into ``.venv-pywb`` at the repository root (``TRAWL_PYWB_VENV`` to put it
elsewhere) and used as its users use it: ``wb-manager``, ``cdx-indexer`` and the ``wayback``
server as programs, over HTTP on loopback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The pywb release the tests replay with (pinned: its index format is what they compare).
PYWB_SPEC = "pywb==2.10.0"
ROOT = Path(__file__).resolve().parent.parent


def pywb_venv() -> Path:
    """The pywb virtualenv, made (about 40 s, from the package registry) if missing."""
    venv = Path(os.environ.get("TRAWL_PYWB_VENV", ROOT / ".venv-pywb"))
    if not (venv / "bin" / "wayback").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", PYWB_SPEC],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"installing {PYWB_SPEC} into {venv} failed:\n{done.stderr}")
    return venv


def pywb_tool(name: str) -> str:
    """Path of one of pywb's programs (wb-manager, cdx-indexer, wayback)."""
    return str(pywb_venv() / "bin" / name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def wayback(root: Path, probe_collection: str, timeout_s: float = 30.0) -> Iterator[str]:
    """Run pywb's ``wayback`` server on the collections under ``root`` (loopback, a free
    port) until the block ends; yields its origin once ``/<probe_collection>/`` answers."""
    port = free_port()
    log = open(root / "wayback.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([pywb_tool("wayback"), "-p", str(port), "-b", "127.0.0.1",
                             "-t", "2"], cwd=root, stdout=log, stderr=subprocess.STDOUT)
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{origin}/{probe_collection}/", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("wayback did not start: "
                                       + (root / "wayback.log").read_text()[-2000:]) from None
                time.sleep(0.2)
        yield origin
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
