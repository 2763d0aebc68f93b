"""Fetch engines compared: a thread per in-flight fetch (our urllib3 Fetcher) vs asyncio+aiohttp.

Why: the worker is to keep hundreds to thousands of fetches in flight per process; this
measures what each mechanism costs per page on the same local web, so the choice rests on
numbers. The web is an aiohttp server in its own process: ``--hosts`` names (at least 2,048)
over 64 loopback IPs (127.0.1.1 .. 127.0.4.16), routed by Host header and checked against the
IP the request arrived on (a misrouted request gets 421 and is counted), 17,000-byte HTML
pages, each answer delayed by a lognormal sleep (median ``--median-ms``, sigma 0.7, capped at
8x the median; 2 s median at N=2000 so 2000 can be in flight), odd hosts over HTTPS (a
throwaway trustme CA, SNI checked), keep-alive.

Each (engine, N) runs in a fresh client process: N workers (threads, or coroutines on one
loop), worker w owning hosts w, w+N, ... (one request per host at a time, as the crawl). After
a warm-up (95% of workers through their hosts once, so keep-alive connections exist) a window
of ``--window`` seconds is measured: pages/s, client CPU (utime+stime of the process) per
page, the server's CPU per page, mean in flight (sum of fetch time inside the window / window),
and RSS growth (peak RSS sampled every 50 ms minus RSS before any worker started) per
in-flight fetch. ``--tls`` runs the handshake micro-bench: 16 workers, no server delay, CPU per
request over keep-alive vs a new connection per request. Run::

    .venv/bin/python bench/fetch_engines.py [--ns 100,500,2000] [--window 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BODY_LEN = 17_000
SIGMA = 0.7
N_IPS = 64
TLS_WORKERS = 16


# --- the web ---------------------------------------------------------------------------------
@dataclass
class Web:
    """Everything a client or the server needs to know about the bench web (JSON-able)."""

    hosts: int
    http_port: int
    https_port: int
    ca_pem: str
    cert_pem: str
    key_pem: str
    server_pid: int = 0

    @staticmethod
    def ip(k: int) -> str:
        return f"127.0.{k // 16 + 1}.{k % 16 + 1}"

    def host(self, i: int) -> tuple[str, str, bool]:
        """(name, IP, https) of host ``i``."""
        return f"h{i:05d}.bench.test", self.ip(i % N_IPS), i % 2 == 1

    def url(self, i: int, n: int, med_ms: float) -> tuple[str, str]:
        name, ip, https = self.host(i)
        scheme, port = ("https", self.https_port) if https else ("http", self.http_port)
        return f"{scheme}://{name}:{port}/p/{n}?med={med_ms:g}", ip


def _bind_all(ips: list[str]) -> tuple[int, int, list[socket.socket], list[socket.socket]]:
    """One port number for HTTP and one for HTTPS, bound on every IP."""
    rng = random.Random()
    for _ in range(50):
        p = rng.randrange(20000, 60000, 2)
        socks: list[list[socket.socket]] = [[], []]
        try:
            for which, port in ((0, p), (1, p + 1)):
                for ip in ips:
                    s = socket.socket()
                    socks[which].append(s)
                    s.bind((ip, port))
                    s.listen(4096)
            return p, p + 1, socks[0], socks[1]
        except OSError:
            for s in socks[0] + socks[1]:
                s.close()
    raise RuntimeError("no free port pair on all loopback IPs")


def _page(i: int) -> bytes:
    rng = random.Random(i)
    words = [rng.choice(["crawl", "page", "host", "link", "queue", "fetch", "delay"]) for _ in
             range(3000)]
    links = "".join(f'<li><a href="/p/{rng.randrange(10**6)}">link {j}</a></li>' for j in range(40))
    html = (f"<!doctype html><html><head><title>Page {i}</title></head><body><h1>Page {i}</h1>"
            f"<ul>{links}</ul><p>{' '.join(words)}</p>").encode()
    return (html + b" " * BODY_LEN)[: BODY_LEN - 14] + b"</body></html>"


def serve(web: Web) -> None:
    """The server process: prints ``READY http https`` and serves until killed."""
    from aiohttp import web as aweb

    names = {web.host(i)[0]: web.host(i)[1:] for i in range(web.hosts)}
    stats = {"requests": 0, "misrouted": 0, "sni_ok": 0, "sni_bad": 0}
    bodies = [_page(i) for i in range(16)]
    rng = random.Random(1)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(web.cert_pem, web.key_pem)

    def sni(_sock: object, name: str | None, _ctx: object) -> None:
        stats["sni_ok" if name in names else "sni_bad"] += 1

    ctx.sni_callback = sni  # type: ignore[assignment]

    async def handle(request: aweb.Request) -> aweb.StreamResponse:
        name = (request.host or "").rsplit(":", 1)[0]
        if name == "stats.bench.test":
            return aweb.json_response(stats)
        local = request.transport.get_extra_info("sockname")[0] if request.transport else None
        if names.get(name) != (local, request.secure):
            stats["misrouted"] += 1
            return aweb.Response(status=421)
        med = float(request.query.get("med", "0")) / 1000
        if med > 0:
            await asyncio.sleep(min(rng.lognormvariate(math.log(med), SIGMA), 8 * med))
        stats["requests"] += 1
        return aweb.Response(body=bodies[hash(name) % 16], content_type="text/html")

    async def main() -> None:
        app = aweb.Application()
        app.router.add_get("/{tail:.*}", handle)
        runner = aweb.AppRunner(app, access_log=None, keepalive_timeout=300)
        await runner.setup()
        ips = [web.ip(k) for k in range(N_IPS)]
        hp, sp, plain, tls = _bind_all(ips)
        for s in plain:
            await aweb.SockSite(runner, s, backlog=4096).start()
        for s in tls:
            await aweb.SockSite(runner, s, ssl_context=ctx, backlog=4096).start()
        print(f"READY {hp} {sp}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def server_stats(web: Web) -> dict[str, int]:
    import urllib3

    r = urllib3.PoolManager().request(
        "GET", f"http://{web.ip(0)}:{web.http_port}/", headers={"Host": "stats.bench.test"})
    return json.loads(r.data)


# --- measurement -----------------------------------------------------------------------------
def cpu_s(pid: int | None = None) -> float:
    if pid is None:
        t = os.times()
        return t.user + t.system
    c = psutil.Process(pid).cpu_times()
    return c.user + c.system


def snapshot(pid: int | None = None) -> tuple[float, float]:
    """(time, CPU s) read together: with hundreds of threads, a thread that lets the GIL go
    between two reads may get it back only much later, so retry until they are close."""
    while True:
        t0 = time.monotonic()
        c = cpu_s(pid)
        t1 = time.monotonic()
        if t1 - t0 < 0.01:
            return (t0 + t1) / 2, c


class Recorder:
    """Fetch intervals of N workers, the warm-up test and the measured window (any engine)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.done: list[tuple[float, float, bool]] = []  # list.append is atomic
        self.current: list[float | None] = [None] * n
        self.first_round = [False] * n
        self.stop = False
        self.idle_rss = psutil.Process().memory_info().rss  # before any worker started
        self.idle_fds = psutil.Process().num_fds()

    def started(self, w: int) -> float:
        t = time.monotonic()
        self.current[w] = t
        return t

    def finished(self, w: int, t0: float, ok: bool, round_done: bool) -> None:
        self.done.append((t0, time.monotonic(), ok))
        self.current[w] = None
        if round_done:
            self.first_round[w] = True

    def measure(self, server_pid: int, window_s: float, warm_cap_s: float) -> dict[str, float]:
        """Run in a thread of its own: wait for warm-up, measure the window, set ``stop``."""
        me = psutil.Process()
        idle = self.idle_rss
        peak = max(idle, me.memory_info().rss)
        t_start = time.monotonic()
        while sum(self.first_round) < 0.95 * self.n and time.monotonic() - t_start < warm_cap_s:
            time.sleep(0.05)
            peak = max(peak, me.memory_info().rss)
        a_t, a_cpu = snapshot()
        a_srv_t, a_srv = snapshot(server_pid)
        while time.monotonic() < a_t + window_s:
            time.sleep(0.05)
            peak = max(peak, me.memory_info().rss)
        b_t, b_cpu = snapshot()
        b_srv_t, b_srv = snapshot(server_pid)
        conns = max(1, me.num_fds() - self.idle_fds)  # sockets open at the window's end
        cur = list(self.current)
        done = self.done[:]
        self.stop = True
        busy = sum(max(0.0, min(t1, b_t) - max(t0, a_t)) for t0, t1, _ in done)
        busy += sum(max(0.0, b_t - max(t0, a_t)) for t0 in cur if t0 is not None)
        inside = [(t0, t1, ok) for t0, t1, ok in done if a_t <= t1 <= b_t]
        pages = max(1, len(inside))
        w = b_t - a_t
        return {
            "warmup_s": a_t - t_start, "window_s": w, "pages": len(inside),
            "errors": sum(1 for *_, ok in inside if not ok),
            "pages_per_s": len(inside) / w,
            "cpu_ms_per_page": 1e3 * (b_cpu - a_cpu) / pages,
            "client_cpu_util": (b_cpu - a_cpu) / w,
            "server_cpu_ms_per_page": 1e3 * (b_srv - a_srv) * w / (b_srv_t - a_srv_t) / pages,
            "mean_in_flight": busy / w,
            "mean_latency_ms": 1e3 * sum(t1 - t0 for t0, t1, _ in inside) / pages,
            "rss_idle_mb": idle / 2**20, "rss_peak_mb": peak / 2**20,
            "rss_kb_per_in_flight": (peak - idle) / 1024 / self.n,
            "open_conns": conns, "rss_kb_per_open_conn": (peak - idle) / 1024 / conns,
        }


# --- engines ---------------------------------------------------------------------------------
def make_fetcher(web: Web, **kw: object) -> object:
    from workers.dns.resolver import CachingResolver
    from workers.fetch import Fetcher

    args: dict[str, object] = {"extra_ca": web.ca_pem, "pool_maxsize": 1,
                               "pool_connections": web.hosts + 64, "connect_timeout_s": 10.0,
                               "read_timeout_s": 30.0, "total_timeout_s": 60.0}
    args.update(kw)
    return Fetcher(CachingResolver(allow_private=True), "trawl-bench/1", allow_private=True,
                   **args)  # type: ignore[arg-type]


def worker_urls(web: Web, w: int, n: int, med_ms: float, hosts: list[int]) -> list[tuple[str, str]]:
    return [web.url(i, k, med_ms) for k, i in enumerate(hosts[w::n])]


def run_threads(web: Web, n: int, med_ms: float, window_s: float, hosts: list[int],
                extra_headers: dict[str, str] | None = None, **fetcher_kw: object
                ) -> dict[str, float]:
    fetcher = make_fetcher(web, **fetcher_kw)
    rec = Recorder(n)

    def loop(w: int) -> None:
        urls = worker_urls(web, w, n, med_ms, hosts)
        i = 0
        while not rec.stop:
            url, ip = urls[i % len(urls)]
            t0 = rec.started(w)
            r = fetcher.fetch(url, ip=ip, extra_headers=extra_headers)  # type: ignore[attr-defined]
            rec.finished(w, t0, r.ok and len(r.body) == BODY_LEN, i == len(urls) - 1)
            i += 1

    out: dict[str, float] = {}
    ctl = threading.Thread(target=lambda: out.update(rec.measure(web.server_pid, window_s, 12)))
    ctl.start()
    for w in range(n):
        threading.Thread(target=loop, args=(w,), daemon=True).start()
    ctl.join()
    return out


def pinned_resolver(web: Web) -> object:
    """An aiohttp resolver answering from the bench's host table (no DNS, like the crawl's)."""
    from aiohttp.abc import AbstractResolver

    table = {web.host(i)[0]: web.host(i)[1] for i in range(web.hosts)}

    class Pinned(AbstractResolver):
        async def resolve(self, host: str, port: int = 0,
                          family: socket.AddressFamily = socket.AF_INET) -> list:  # type: ignore[override]
            return [{"hostname": host, "host": table[host], "port": port,
                     "family": socket.AF_INET, "proto": 0, "flags": socket.AI_NUMERICHOST}]

        async def close(self) -> None:
            pass

    return Pinned()


def client_ssl_context(web: Web) -> ssl.SSLContext:
    import certifi

    ctx = ssl.create_default_context(cafile=certifi.where())
    ctx.load_verify_locations(cafile=web.ca_pem)
    return ctx


def run_aiohttp(web: Web, n: int, med_ms: float, window_s: float, hosts: list[int],
                force_close: bool = False) -> dict[str, float]:
    import aiohttp

    async def main() -> dict[str, float]:
        conn = aiohttp.TCPConnector(limit=n, limit_per_host=1, resolver=pinned_resolver(web),  # type: ignore[arg-type]
                                    ssl=client_ssl_context(web), force_close=force_close,
                                    **({} if force_close else {"keepalive_timeout": 300}))
        timeout = aiohttp.ClientTimeout(total=60, sock_connect=10, sock_read=30)
        async with aiohttp.ClientSession(connector=conn, timeout=timeout,
                                         cookie_jar=aiohttp.DummyCookieJar(),
                                         headers={"User-Agent": "trawl-bench/1"}) as session:
            rec = Recorder(n)

            async def loop(w: int) -> None:
                urls = worker_urls(web, w, n, med_ms, hosts)
                i = 0
                while not rec.stop:
                    url = urls[i % len(urls)][0]
                    t0 = rec.started(w)
                    try:
                        async with session.get(url, allow_redirects=False) as r:
                            body = await r.read()
                            ok = r.status == 200 and len(body) == BODY_LEN
                    except (aiohttp.ClientError, TimeoutError):
                        ok = False
                    rec.finished(w, t0, ok, i == len(urls) - 1)
                    i += 1

            tasks = [asyncio.create_task(loop(w)) for w in range(n)]
            out = await asyncio.to_thread(rec.measure, web.server_pid, window_s, 12)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return out

    return asyncio.run(main())


def tls_micro(web: Web, engine: str) -> dict[str, dict[str, float]]:
    """CPU per request: plain, TLS keep-alive, TLS with a new connection (handshake) each."""
    http = [i for i in range(web.hosts) if not web.host(i)[2]][:TLS_WORKERS]
    https = [i for i in range(web.hosts) if web.host(i)[2]][:TLS_WORKERS]
    close = {"Connection": "close"}
    window = 4.0
    modes: dict[str, dict[str, float]] = {}
    if engine == "threads":
        bundle = Path(web.ca_pem).with_name("certifi+ca.pem")
        import certifi

        bundle.write_bytes(Path(certifi.where()).read_bytes() + Path(web.ca_pem).read_bytes())
        modes["http keep-alive"] = run_threads(web, TLS_WORKERS, 0, window, http)
        modes["https keep-alive"] = run_threads(web, TLS_WORKERS, 0, window, https)
        modes["https new conn (extra_ca: one shared context)"] = run_threads(
            web, TLS_WORKERS, 0, window, https, extra_headers=close)
        modes["https new conn (verify=<bundle path>: a context per conn)"] = run_threads(
            web, TLS_WORKERS, 0, window, https, extra_headers=close, extra_ca=None,
            verify=str(bundle))
    else:
        modes["http keep-alive"] = run_aiohttp(web, TLS_WORKERS, 0, window, http)
        modes["https keep-alive"] = run_aiohttp(web, TLS_WORKERS, 0, window, https)
        modes["https new conn (one shared context)"] = run_aiohttp(
            web, TLS_WORKERS, 0, window, https, force_close=True)
    return modes


# --- driver ----------------------------------------------------------------------------------
def client_main(web: Web, engine: str, n: int, med_ms: float, window_s: float) -> None:
    """One client process: print one JSON line with the run's numbers."""
    hosts = list(range(web.hosts))
    if n == 0:
        out: object = tls_micro(web, engine)
    elif engine == "threads":
        out = run_threads(web, n, med_ms, window_s, hosts)
    else:
        out = run_aiohttp(web, n, med_ms, window_s, hosts)
    print(json.dumps(out), flush=True)
    os._exit(0)  # threads still in a slow fetch need not be waited for


def make_ca(d: Path) -> tuple[str, str, str]:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("*.bench.test")
    paths = [d / "ca.pem", d / "cert.pem", d / "key.pem"]
    ca.cert_pem.write_to_path(str(paths[0]))
    cert.cert_chain_pems[0].write_to_path(str(paths[1]))
    cert.private_key_pem.write_to_path(str(paths[2]))
    return str(paths[0]), str(paths[1]), str(paths[2])


def run_client(web: Web, engine: str, n: int, med_ms: float, window_s: float) -> dict:
    cmd = [sys.executable, __file__, "--client", json.dumps(asdict(web)), engine, str(n),
           str(med_ms), str(window_s)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"{engine} N={n} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    head = ("| engine | N | median delay | pages/s | client CPU ms/page | client cores busy "
            "| server CPU ms/page | mean in flight | mean latency ms | RSS idle MB | RSS peak MB "
            "| RSS KB / in-flight | open conns | RSS KB / open conn | errors |\n|" + "---|" * 15)
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {r['n']} | {r['med_ms']:g} ms | {r['pages_per_s']:.0f} "
            f"| {r['cpu_ms_per_page']:.3f} | {r['client_cpu_util']:.2f} "
            f"| {r['server_cpu_ms_per_page']:.3f} | {r['mean_in_flight']:.0f} "
            f"| {r['mean_latency_ms']:.0f} | {r['rss_idle_mb']:.0f} | {r['rss_peak_mb']:.0f} "
            f"| {r['rss_kb_per_in_flight']:.0f} | {r['open_conns']} "
            f"| {r['rss_kb_per_open_conn']:.0f} | {r['errors']} |")
    return "\n".join(lines)


def tls_table(tls: dict[str, dict[str, dict[str, float]]]) -> str:
    lines = ["| engine | mode | requests/s | client CPU ms/request | server CPU ms/request |",
             "|---|---|---|---|---|"]
    for engine, modes in tls.items():
        for mode, r in modes.items():
            lines.append(f"| {engine} | {mode} | {r['pages_per_s']:.0f} "
                         f"| {r['cpu_ms_per_page']:.3f} | {r['server_cpu_ms_per_page']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--ns", default="100,500,2000")
    ap.add_argument("--engines", default="threads,aiohttp")
    ap.add_argument("--median-ms", type=float, default=150.0)
    ap.add_argument("--median-ms-2000", type=float, default=2000.0,
                    help="median delay when N >= 2000 (so that N can be in flight)")
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--hosts", type=int, default=2048, help="at least 2 x the largest N is used")
    ap.add_argument("--no-tls", action="store_true", help="skip the handshake micro-bench")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ns = [int(x) for x in args.ns.split(",") if x]  # --ns "": the TLS micro-bench only
    engines = args.engines.split(",")
    t_begin = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        ca, cert, key = make_ca(Path(tmp))
        web = Web(max(args.hosts, 2 * max(ns, default=0)), 0, 0, ca, cert, key)
        server = subprocess.Popen([sys.executable, __file__, "--serve", json.dumps(asdict(web))],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            ready = server.stdout.readline().split()
            if not ready or ready[0] != "READY":
                raise RuntimeError("server did not start")
            web.http_port, web.https_port, web.server_pid = int(ready[1]), int(ready[2]), server.pid
            rows = []
            for n in ns:
                med = args.median_ms_2000 if n >= 2000 else args.median_ms
                for engine in engines:
                    r = run_client(web, engine, n, med, args.window)
                    rows.append({"engine": engine, "n": n, "med_ms": med, **r})
                    print(f"{engine:8} N={n:5}: {r['pages_per_s']:7.0f} pages/s "
                          f"{r['cpu_ms_per_page']:.3f} CPU ms/page, in flight "
                          f"{r['mean_in_flight']:.0f}, errors {r['errors']}", file=sys.stderr)
            tls = {} if args.no_tls else {e: run_client(web, e, 0, 0, 0) for e in engines}
            stats = server_stats(web)
        finally:
            server.kill()
            server.wait()
    print(table(rows))
    if tls:
        print()
        print(tls_table(tls))
    print(f"\nserver: {stats}; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}; run {time.monotonic() - t_begin:.0f} s")
    if stats["misrouted"] or stats["sni_bad"] or any(r["errors"] for r in rows):
        raise SystemExit("misrouted requests, bad SNI or fetch errors: see above")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": rows, "tls": tls, "server": stats},
                                              indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        serve(Web(**json.loads(sys.argv[2])))
    elif len(sys.argv) > 2 and sys.argv[1] == "--client":
        client_main(Web(**json.loads(sys.argv[2])), sys.argv[3], int(sys.argv[4]),
                    float(sys.argv[5]), float(sys.argv[6]))
    else:
        main()
