"""Python side of ``deploy/netns-cluster``: the compose topology as network namespaces.

    reason = netns_unavailable()
    if reason: pytest.skip(reason)
    with NetnsCluster(prefix="tdrill", workers=3) as net:     # up on enter, down on exit
        redis = net.popen("redis", [redis_server_binary(), "--bind", net.ip("redis"), ...])
        worker = net.popen("w1", [sys.executable, "-m", "workers.cli", "worker",
                                  "--redis", f"redis://:{pw}@{net.ip('redis')}:6379/0"])
        net.cut("w1")            # or net.cut("w1", "drop"); the link is gone both ways
        ...
        net.restore("w1")

Node names: ``redis``, ``web``, ``w1`` .. ``wN``; addresses ``SUBNET.10``, ``.20``,
``.101`` ..; the names also resolve inside the namespaces (``redis://redis:6379/0`` works there).
Every call goes through the shell script, which stays the single source of truth.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parent.parent / "deploy" / "netns-cluster"
CUT_MODES = ("link", "drop", "netem")


def netns_unavailable() -> str | None:
    """None if network namespaces can be made here, else why not (a skip message)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "the netns harness needs root (ip netns add); CI runs it as root"
    if shutil.which("ip") is None:
        return "the netns harness needs iproute2's `ip`"
    probe = f"trawlprobe-{uuid.uuid4().hex[:8]}"
    res = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if res.returncode != 0:
        return f"`ip netns add` does not work here: {res.stderr.strip()}"
    try:
        res = subprocess.run(["ip", "-n", probe, "link", "add", "vprobe0", "type", "veth",
                              "peer", "name", "vprobe1"], capture_output=True, text=True)
        if res.returncode != 0:
            return f"veth links cannot be made here: {res.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class NetnsCluster:
    """A harness of ``deploy/netns-cluster`` with its own ``prefix`` (namespaces PREFIX-*)."""

    def __init__(self, prefix: str = "trawl", workers: int = 3,
                 subnet: str = "10.213.0", web_ips: int = 1) -> None:
        if not prefix or len(prefix) > 8 or not prefix.replace("-", "").isalnum():
            raise ValueError("prefix: 1-8 letters/digits (namespace names stay short)")
        self.prefix = prefix
        self.workers = workers
        self.subnet = subnet
        self.web_ips = web_ips
        self.env = dict(os.environ, TRAWL_NETNS_PREFIX=prefix, TRAWL_NETNS_SUBNET=subnet,
                        TRAWL_NETNS_WEB_IPS=str(web_ips))

    def script(self, *args: str, check: bool = True,
               timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``deploy/netns-cluster ARGS`` for this harness; raises with its stderr."""
        res = subprocess.run(["bash", str(SCRIPT), *args], env=self.env, capture_output=True,
                             text=True, timeout=timeout_s)
        if check and res.returncode != 0:
            raise RuntimeError(f"netns-cluster {' '.join(args)} failed ({res.returncode}): "
                               f"{res.stderr.strip()}")
        return res

    def up(self, workers: int | None = None) -> NetnsCluster:
        self.script("up", str(workers or self.workers))
        return self

    def down(self) -> None:
        self.script("down")

    def __enter__(self) -> NetnsCluster:
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc: object) -> None:
        self.down()

    @property
    def names(self) -> list[str]:
        return self.script("names").stdout.split()

    @property
    def worker_names(self) -> list[str]:
        return [n for n in self.names if n.startswith("w")]

    def namespace(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def namespaces(self) -> list[str]:
        """This harness's namespaces that exist now (empty after ``down``)."""
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return sorted(line.split()[0] for line in out.splitlines()
                      if line.split() and line.split()[0].startswith(self.prefix + "-"))

    def ip(self, name: str) -> str:
        return self.script("ip", name).stdout.strip()

    def web_addresses(self) -> list[str]:
        """The web node's addresses: SUBNET.20 .. SUBNET.(19 + web_ips)."""
        return [f"{self.subnet}.{20 + i}" for i in range(self.web_ips)]

    def argv(self, name: str, cmd: list[str]) -> list[str]:
        """``cmd`` run inside node ``name`` (prefix for subprocess calls of your own)."""
        return ["ip", "netns", "exec", self.namespace(name), *cmd]

    def run(self, name: str, cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        return subprocess.run(self.argv(name, cmd), **kw)

    def popen(self, name: str, cmd: list[str], **kw: Any) -> subprocess.Popen[Any]:
        """Start ``cmd`` inside ``name``; ``down`` kills whatever is still running in there."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("start_new_session", True)
        return subprocess.Popen(self.argv(name, cmd), **kw)

    def pids(self, name: str) -> list[int]:
        return [int(p) for p in self.script("pids", name).stdout.split()]

    def cut(self, name: str, mode: str = "link") -> None:
        """Partition node ``name`` from all others: ``link`` (veth down), ``drop`` (blackhole
        routes both ways) or ``netem`` (tc loss 100%, needs sch_netem in the kernel)."""
        if mode not in CUT_MODES:
            raise ValueError(f"mode must be one of {CUT_MODES}")
        self.script("cut", name, mode)

    def restore(self, name: str) -> None:
        self.script("restore", name)

    def status(self) -> str:
        return self.script("status").stdout
