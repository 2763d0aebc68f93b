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

A whole crawl across namespaces (``tests/test_netns_partition.py``)::

    redis = net.start_redis(tmp, PASSWORD)          # bound to the redis node; plus a unix
    client = redis.client()                          # socket for this (root) namespace
    with NetnsWeb(net, WEB, tmp / "requests.log") as web:   # sandbox on the web node's IPs
        pool = NetnsWorkerPool(redis.url, ns, 3, 4, tmp / "logs", net=net)
        pool.start_one(0)                            # `trawl worker --name w1` inside w1

The test process itself never routes into the harness subnet: it reaches Redis through the
unix socket and judges the crawl from the sandbox's log file.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from frontier.redisserver import redis_server_binary
from sandbox import SandboxConfig, SandboxWeb
from workers.cli.crawl import WorkerPool

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "deploy" / "netns-cluster"
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
                        TRAWL_NETNS_WEB_IPS=str(web_ips), TRAWL_PYTHON=sys.executable)

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

    def cut(self, name: str, mode: str = "link", peers: Sequence[str] = ()) -> None:
        """Partition node ``name`` from all others: ``link`` (veth down), ``drop`` (blackhole
        routes both ways) or ``netem`` (tc loss 100%, needs sch_netem in the kernel). With
        ``peers`` (``drop`` only), only traffic between ``name`` and those nodes is dropped."""
        if mode not in CUT_MODES:
            raise ValueError(f"mode must be one of {CUT_MODES}")
        if peers and mode != "drop":
            raise ValueError("only the drop mode cuts a node off from some peers")
        self.script("cut", name, mode, *peers)

    def restore(self, name: str) -> None:
        self.script("restore", name)

    def rtt(self, name: str, ms: float | None, spread: float = 0.0) -> None:
        """Packets node ``name`` sends to the others wait a round trip of ``ms`` (per source
        address, spread as ``sandbox.delayline.RttModel``); ``None`` turns it off."""
        if ms is None:
            self.script("rtt", name, "off")
        else:
            self.script("rtt", name, f"{ms:g}", f"{spread:g}")

    def rtt_stats(self, name: str) -> dict[str, Any]:
        """The delay line's counters of node ``name`` (packets, bytes, cpu_s, ...), as last
        written (every 2 s and when it stops); {} before the first write."""
        path = Path(os.environ.get("TRAWL_NETNS_RUN", "/tmp")) / f"{self.namespace(name)}-rtt.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def status(self) -> str:
        return self.script("status").stdout

    def start_redis(self, workdir: Path, password: str, port: int = 6379,
                    timeout_s: float = 20.0) -> NetnsRedis:
        """A redis-server in the redis node on its address, plus a unix socket in ``workdir``
        for the root namespace; returns once it answers."""
        workdir.mkdir(parents=True, exist_ok=True)
        sock = workdir / "redis.sock"
        proc = self.popen("redis", [
            redis_server_binary(), "--bind", self.ip("redis"), "--port", str(port),
            "--unixsocket", str(sock), "--unixsocketperm", "700", "--requirepass", password,
            "--dir", str(workdir), "--save", "", "--appendonly", "no", "--daemonize", "no",
            "--logfile", str(workdir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server = NetnsRedis(proc, sock, password, f"redis://:{password}@redis:{port}/0", workdir)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if server.client().ping():
                    return server
            except (redis.RedisError, OSError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log = workdir / "redis.log"
                proc.kill()
                raise RuntimeError("redis-server in the redis node did not start: "
                                   + (log.read_text()[-500:] if log.exists() else "no log"))
            time.sleep(0.1)


@dataclass
class NetnsRedis:
    """A redis-server running in the redis node (see ``NetnsCluster.start_redis``)."""

    proc: subprocess.Popen[bytes]
    unix_socket: Path
    password: str
    #: The URL inside the harness (workers' ``--redis``): the node name resolves there.
    url: str
    workdir: Path

    def client(self, **kw: Any) -> redis.Redis:
        """A client for the root namespace, over the unix socket."""
        kw.setdefault("socket_timeout", 10.0)
        return redis.Redis(unix_socket_path=str(self.unix_socket), password=self.password, **kw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def web_resolver_map(loopback_map: dict[str, str], ips: Sequence[str]) -> dict[str, str]:
    """The sandbox's host -> loopback IP map moved onto ``ips`` (the web node's addresses):
    hosts that share a loopback IP share a web IP; distinct ones are spread round robin."""
    order: dict[str, int] = {}
    for ip in loopback_map.values():
        order.setdefault(ip, len(order))
    return {host: ips[order[ip] % len(ips)] for host, ip in loopback_map.items()}


class NetnsWeb(SandboxWeb):
    """The sandbox web served from the web node, on every one of its addresses (one port).

    The sandbox's own CLI binds the loopback IPs of its layout, which other namespaces cannot
    reach; this runs ``python -m tests.netns serve-web`` inside the web node instead, with the
    same site (pages, robots, specials: the same ``expected_fetches``) and its resolver map
    moved onto ``net.web_addresses()``. Everything else, the request log included, is
    ``SandboxWeb``'s.
    """

    def __init__(self, net: NetnsCluster, config: SandboxConfig, log_path: str | Path,
                 **kw: Any) -> None:
        super().__init__(config, log_path, **kw)
        self.net = net

    def command(self) -> list[str]:
        return self.net.argv("web", [
            sys.executable, "-m", "tests.netns", "serve-web",
            "--config", json.dumps(self.config.to_dict()),
            "--ips", ",".join(self.net.web_addresses()), "--log", str(self.log_path),
            "--port", str(self._port_arg), "--https-port", str(self._https_port_arg),
            *(["--prerender"] if self._prerender else [])])


@dataclass
class NetnsWorkerPool(WorkerPool):
    """``trawl worker`` processes, worker ``i`` inside node ``w{i+1}`` named ``w{i+1}``."""

    net: NetnsCluster | None = None
    loglevel: str = "WARNING"

    def node(self, i: int) -> str:
        return f"w{i + 1}"

    def start_one(self, i: int) -> subprocess.Popen[bytes]:
        assert self.net is not None, "NetnsWorkerPool needs net="
        self.log_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "workers.cli", "worker", "--redis", self.redis_url,
               "--namespace", self.namespace, "--concurrency", str(self.concurrency),
               "--name", self.node(i), "--loglevel", self.loglevel]
        if self.events:
            cmd.append("--events")
        if self.broker_url:
            cmd += ["--broker", self.broker_url]
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(self.log_dir / f"worker-{self.node(i)}.log", "ab") as logf:
            proc = self.net.popen(self.node(i), cmd, stdout=logf, stderr=subprocess.STDOUT,
                                  env=env, cwd=str(ROOT))
        self.procs.append(proc)
        return proc

    def log_text(self, i: int) -> str:
        path = self.log_dir / f"worker-{self.node(i)}.log"
        return path.read_text(errors="replace") if path.exists() else ""


# -- ``python -m tests.netns serve-web``: the sandbox on given addresses (run in the web node) --

async def _serve_web(args: argparse.Namespace) -> None:
    """As ``python -m sandbox`` on ``args.ips``; HTTPS hosts (config.https_share) on a
    second port with certificates of a CA made here (its PEM in the ready line's ca_path)."""
    from sandbox.server import bind_all
    from sandbox.site import SandboxSite

    config = SandboxConfig(**json.loads(args.config))
    ips = args.ips.split(",")
    socks = bind_all(ips, args.port)
    port = socks[0].getsockname()[1]
    https_hosts = SandboxSite(config, port).layout.https_hosts
    tls_socks = bind_all(ips, args.https_port) if https_hosts else []
    https_port = tls_socks[0].getsockname()[1] if tls_socks else 0
    site = SandboxSite(config, port, https_port)
    with tempfile.TemporaryDirectory(prefix="netns-web-tls-") as tls_dir:
        await _serve_site(args, site, ips, socks, tls_socks, tls_dir)


async def _serve_site(args: argparse.Namespace, site: Any, ips: list[str], socks: list[Any],
                      tls_socks: list[Any], tls_dir: str) -> None:
    from sandbox.requestlog import RequestLog
    from sandbox.server import serve

    certs = None
    if tls_socks:
        from sandbox.tls import HostCertificates

        certs = HostCertificates(site.layout.https_hosts, tls_dir)
    prerendered: dict[str, float] = {}
    if args.prerender:  # as python -m sandbox --prerender: serving then renders nothing
        t0 = time.perf_counter()
        prerendered = {"pages": site.prerender(os.cpu_count() or 1),
                       "seconds": round(time.perf_counter() - t0, 2)}
        if certs is not None:
            certs.warm()
        gc.collect()
        gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready = asyncio.Event()
    task = asyncio.create_task(serve(site, RequestLog(args.log), socks, stop, ready, tls_socks,
                                     certs.context if certs else None))
    await asyncio.wait([task, asyncio.create_task(ready.wait())],
                       return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        await task  # startup failed: raise its error
    info = {"port": site.port, "resolver_map": web_resolver_map(site.resolver_map(), ips),
            "seeds": site.seeds(), "log": args.log}
    if certs is not None:
        info.update(https_port=site.https_port, ca_path=certs.ca_path)
    if prerendered:
        info["prerendered"] = prerendered
    print(json.dumps(info), flush=True)
    await task


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.netns")
    sub = parser.add_subparsers(dest="command", required=True)
    web = sub.add_parser("serve-web", help="serve a sandbox web on the given addresses")
    web.add_argument("--config", required=True, help="SandboxConfig as JSON")
    web.add_argument("--ips", required=True, help="comma-separated addresses to bind")
    web.add_argument("--log", required=True)
    web.add_argument("--port", type=int, default=0)
    web.add_argument("--https-port", type=int, default=0)
    web.add_argument("--prerender", action="store_true", help="render every page first")
    args = parser.parse_args(argv)
    asyncio.run(_serve_web(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
