"""The soak of issue 21: a long crawl of the internet-like sandbox web, with its spider traps
and labelled duplicates (and the hostile hosts of sandbox/hostile.py when that module is there)
mixed in, while a worker is SIGKILLed every ``--kill-every`` seconds and started again.

    .venv/bin/python bench/soak.py [--minutes 30] [--kill-every 120] [--hosts 200]

Three worker processes: ``w0`` is never killed (it is the witness for a leak: its RSS over the
whole soak), ``w1`` and ``w2`` are killed in turn. After ``--minutes`` the kills stop and the
crawl drains; then every URL admitted must have ended (``accounted == admitted``), which is
what "nothing lost" means here. Samples every 5 s: each worker's RSS, Redis ``used_memory`` and
the crawl's counters. Writes ``bench/results/soak-<time>.json`` and a PNG of the curves, and
prints the figures: the RSS slope of each worker after warm-up (MB per 10 min, least squares),
and Redis bytes per admitted URL (least-squares slope and R^2 of used_memory on admitted).

What it does not model: real DNS (the sandbox's names are pinned by ``static_hosts``), real
round-trip times on TCP and TLS handshakes (loopback), and pages larger than the sandbox's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis

from bench.inflight import rss_of_tree
from frontier.config import CrawlConfig
from frontier.counters import accounted
from frontier.keys import Keys
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxWeb
from workers.cli.crawl import CrawlWatcher, WorkerPool, admit_seeds, init_crawl

RESULTS = Path(__file__).resolve().parent / "results"
WARM_UP_S = 300.0  # RSS before this age of a worker is its warm-up, not a leak


@dataclass
class Sample:
    t_s: float
    rss_mb: dict[str, float]
    redis_used_bytes: int
    admitted: int
    accounted: int
    fetched: int
    queued: int
    inflight: int


@dataclass
class Soak:
    minutes: float
    kill_every_s: float
    kills: list[dict[str, float | str]] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


def least_squares(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(slope, R^2) of the line through the points; (0, 0) with fewer than 3 points."""
    n = len(xs)
    if n < 3:
        return 0.0, 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0:
        return 0.0, 0.0
    slope = sxy / sxx
    r2 = (sxy * sxy) / (sxx * syy) if syy else 1.0
    return slope, r2


def soak_config(web: SandboxWeb, out: Path, hostile: Hostile | None,
                delay_s: float) -> CrawlConfig:
    """Trawl's defaults for the real web, except what the sandbox needs: its names pinned to
    loopback, loopback allowed by ``allowed_networks`` (so the hostile web's redirects to
    private and link-local addresses are still refused), its CAs trusted, ``delay_s``."""
    static, domains, extra = dict(web.resolver_map), [web.config.domain], {}
    ca = Path(out.parent / "ca-bundle.pem")
    ca.write_bytes(Path(web.ca_path).read_bytes() if web.ca_path else b"")
    if hostile is not None:
        static.update(hostile.static_hosts)
        domains.append(hostile.domain)
        extra["dns_servers"] = [hostile.dns_server]
        with ca.open("ab") as f:
            f.write(hostile.ca_path.read_bytes())
    return CrawlConfig(
        namespace="soak", host_delay_s=delay_s, adaptive_delay_factor=0.0,
        allow_private_ips=False, allowed_networks=["127.0.0.0/8"], ip_concurrency=0,
        static_hosts=static, allowed_domains=domains, ca_bundle=str(ca),
        output_dir=str(out), **extra).validate()


def stored(client: redis.Redis, config: CrawlConfig) -> dict[str, int]:
    """What Redis really holds, counted from the data, not the counters: URLs in host queues
    and leases. With the counters of ended URLs they must add up to every URL admitted."""
    keys, queued, leased = Keys(config.namespace), 0, 0
    for p in range(config.partitions):
        for key in client.scan_iter(match=keys.prefix(p) + "q:*", count=1000):
            queued += client.llen(key) if client.type(key) == b"list" else client.zcard(key)
        leased += client.hlen(keys.prefix(p) + "L")
    return {"queued": queued, "leased": leased}


def redis_breakdown(client: redis.Redis) -> dict[str, dict[str, int]]:
    """Redis memory by kind of key (the part of the name after the partition tag, up to a
    colon: ``q``, ``rb``, ``L``, ``bf`` ...), from MEMORY USAGE of every key: where the bytes
    per admitted URL go."""
    kinds: dict[str, dict[str, int]] = {}
    for key in client.scan_iter(count=1000):
        name = key.decode(errors="replace")
        tail = name.rsplit("}:", 1)[-1] if "}:" in name else name.split(":", 1)[-1]
        kind = tail.split(":", 1)[0] if ":" in tail else tail.rstrip("0123456789")
        entry = kinds.setdefault(kind, {"keys": 0, "bytes": 0})
        entry["keys"] += 1
        entry["bytes"] += int(client.memory_usage(key, samples=0) or 0)
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]["bytes"]))


def unfinished(client: redis.Redis, config: CrawlConfig) -> list[dict[str, object]]:
    """Where the URLs still queued or leased at the end wait: per partition, the hosts of the
    ready heap with their seconds to wait, the leased hosts and their leases' deadlines."""
    keys, now, out = Keys(config.namespace), time.time(), []
    for p in range(config.partitions):
        ready = client.zrange(keys.ready(p), 0, 20, withscores=True)
        deadlines = client.zrange(keys.prefix(p) + "D", 0, 20, withscores=True)
        if not ready and not deadlines:
            continue
        out.append({"partition": p,
                    "ready_wait_s": {h.decode(): round(t - now, 1) for h, t in ready},
                    "leased": {h.decode(): v.decode() for h, v in
                               client.hgetall(keys.busy_hosts(p)).items()},
                    "lease_deadline_in_s": {lid.decode(): round(t - now, 1)
                                            for lid, t in deadlines},
                    "owner": (client.get(keys.owner(p)) or b"").decode()})
    return out


@contextlib.contextmanager
def hostile_web(tmp: Path) -> Iterator[Hostile | None]:
    """The hostile server and its name server (sandbox/hostile.py), when that module exists."""
    try:
        from sandbox.hostile import DOMAIN, HostileServer
        from sandbox.hostile_cases import cases
        from sandbox.hostile_dns import HostileDNS
        from sandbox.hostile_tls import FaultyCertificates
    except ImportError:
        yield None
        return
    all_cases = cases(private=True)
    certs = FaultyCertificates({c.host: c.tls for c in all_cases if c.tls}, tmp / "hostile-tls")
    names = {c.host: c.dns for c in all_cases if c.dns}
    static = {f"{n}.{DOMAIN}": "127.0.0.1" for c in all_cases if not c.dns
              for n in (c.name, *c.aliases)}
    static[f"metadata.{DOMAIN}"] = "169.254.169.254"  # in scope, the cloud metadata address
    with HostileServer(all_cases, certs.context) as server, HostileDNS(names) as dns:
        yield Hostile(DOMAIN, static, f"127.0.0.1:{dns.port}", Path(certs.ca_path),
                      [c.seed(server.port, server.tls_port) for c in all_cases])


@dataclass
class Hostile:
    domain: str
    static_hosts: dict[str, str]
    dns_server: str
    ca_path: Path
    seeds: list[str]

    def round_seeds(self, n: int) -> list[str]:
        """The seeds as new URLs (a query per round), so every round fetches them again."""
        return [f"{u}{'&' if '?' in u else '?'}soak={n}" for u in self.seeds]


def run(a: argparse.Namespace, tmp: Path) -> tuple[Soak, dict[str, object]]:
    server = EmbeddedRedis(tmp / "redis").start()
    web_cfg = SandboxConfig.internet(seed=3, hosts=a.hosts, pages_per_host=a.pages_per_host,
                                     ips=min(250, a.hosts), crawl_delay_s=1.0, traps=True,
                                     duplicates=True, robots_slow_s=0.2, slow_page_s=0.2,
                                     hang_s=0.5)
    soak = Soak(a.minutes, a.kill_every)
    try:
        with SandboxWeb(web_cfg, tmp / "requests.log", start_timeout_s=300) as web, \
                hostile_web(tmp) as hostile:
            client = redis.Redis.from_url(server.url)
            config = soak_config(web, tmp / "out", hostile, a.delay)
            frontier = init_crawl(client, config, [
                *web.seeds, *(hostile.round_seeds(0) if hostile else [])])
            pool = WorkerPool(server.url, "soak", 3, None, tmp / "logs").start()
            names = ["w0", "w1", "w2"]
            born = [time.monotonic()] * 3
            watcher = CrawlWatcher(frontier)
            start = time.monotonic()
            next_kill, victim = start + a.kill_every, 1
            next_hostile, rounds = start + a.hostile_every, 0
            drain_until = start + a.minutes * 60 + a.drain_minutes * 60
            try:
                while True:
                    now = time.monotonic()
                    if now - start < a.minutes * 60 and now >= next_kill:
                        proc = pool.procs[victim]
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        fresh = pool.start_one(victim)  # appended to pool.procs:
                        pool.procs.pop()  # move it to the dead one's place
                        pool.procs[victim] = fresh
                        born[victim] = time.monotonic()
                        soak.kills.append({"t_s": round(now - start, 1),
                                           "worker": names[victim]})
                        victim = 2 if victim == 1 else 1
                        next_kill += a.kill_every
                    if hostile is not None and now - start < a.minutes * 60 \
                            and now >= next_hostile:  # the hostile hosts again, as new URLs
                        rounds += 1
                        admit_seeds(frontier, hostile.round_seeds(rounds))
                        next_hostile += a.hostile_every
                    st = watcher.poll()
                    mem = client.info("memory")
                    soak.samples.append(Sample(
                        round(now - start, 1),
                        {names[i]: round(rss_of_tree(p.pid) / 2**20, 1)
                         for i, p in enumerate(pool.procs) if p.poll() is None},
                        int(mem["used_memory"]), st.get("admitted", 0), accounted(st),
                        st.get("fetched", 0), st.get("queued", 0), st.get("inflight", 0)))
                    if now - start >= a.minutes * 60 and watcher.done(settle_s=2.0):
                        break
                    if now > drain_until:
                        break
                    time.sleep(5.0)
                summary = {"hostile_rounds": rounds,
                           "ages_at_end_s": [round(time.monotonic() - b, 1) for b in born],
                           "unfinished": unfinished(client, config)}  # before the workers stop
            finally:
                pool.stop()
            # Both read once the workers are gone, so nothing moves between the two reads.
            summary["final_counters"] = watcher.poll()
            summary["stored_after_stop"] = stored(client, config)
            summary["redis_by_kind"] = redis_breakdown(client)
    finally:
        server.stop()
    return soak, summary


def figures(soak: Soak, final: dict[str, int], held: dict[str, int]) -> dict[str, object]:
    """The soak's verdicts: RSS slopes after warm-up, Redis bytes per URL, URLs lost."""
    out: dict[str, object] = {}
    w0 = [(s.t_s, s.rss_mb["w0"]) for s in soak.samples
          if "w0" in s.rss_mb and s.t_s >= WARM_UP_S and s.t_s <= soak.minutes * 60]
    slope, _ = least_squares([t for t, _ in w0], [r for _, r in w0])
    out["w0_rss_mb_after_warmup"] = {"first": w0[0][1] if w0 else None,
                                     "last": w0[-1][1] if w0 else None,
                                     "max": max((r for _, r in w0), default=None),
                                     "slope_mb_per_10min": round(slope * 600, 2)}
    out["peak_rss_mb"] = {name: max((s.rss_mb.get(name, 0.0) for s in soak.samples), default=0)
                          for name in ("w0", "w1", "w2")}
    xs = [float(s.admitted) for s in soak.samples]
    ys = [float(s.redis_used_bytes) for s in soak.samples]
    b, r2 = least_squares(xs, ys)
    out["redis_bytes_per_admitted_url"] = round(b, 1)
    out["redis_fit_r2"] = round(r2, 4)
    out["admitted"] = final.get("admitted", 0)
    out["accounted"] = accounted(final)
    # Lost: admitted, but neither ended (a final counter) nor in Redis (a queue or a lease),
    # counted after the workers stopped.
    out["lost"] = final.get("admitted", 0) - accounted(final) - held["queued"] - held["leased"]
    out["unfinished_at_end"] = final.get("queued", 0) + final.get("inflight", 0)
    out["kills"] = len(soak.kills)
    out["fetched"] = final.get("fetched", 0)
    return out


def plot(soak: Soak, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for name in ("w0", "w1", "w2"):
        pts = [(s.t_s / 60, s.rss_mb[name]) for s in soak.samples if name in s.rss_mb]
        ax1.plot([t for t, _ in pts], [r for _, r in pts], ".", ms=2,
                 label=name + (" (never killed)" if name == "w0" else " (killed in turn)"))
    for k in soak.kills:
        ax1.axvline(float(k["t_s"]) / 60, color="grey", lw=0.3)
    ax1.set_ylabel("worker RSS (MB)")
    ax1.legend(loc="upper left")
    ax1.set_title(f"Soak: {soak.minutes:g} min, a worker SIGKILLed every "
                  f"{soak.kill_every_s:g} s (grey lines)")
    ax2.plot([s.t_s / 60 for s in soak.samples], [s.redis_used_bytes / 2**20 for s in
                                                   soak.samples], label="Redis used_memory (MB)")
    ax2b = ax2.twinx()
    ax2b.plot([s.t_s / 60 for s in soak.samples], [s.admitted / 1000 for s in soak.samples],
              color="tab:orange", label="URLs admitted (thousands)")
    ax2.set_xlabel("minutes")
    ax2.set_ylabel("Redis used_memory (MB)")
    ax2b.set_ylabel("URLs admitted (thousands)")
    ax2.legend(loc="upper left")
    ax2b.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--kill-every", type=float, default=120.0)
    ap.add_argument("--drain-minutes", type=float, default=5.0,
                    help="after the kills, wait this long at most for the crawl to end")
    ap.add_argument("--hostile-every", type=float, default=300.0,
                    help="seconds between rounds of the hostile hosts' seeds (as new URLs)")
    # A web the crawl cannot finish in --minutes at the politeness rate (200 hosts / ~2.3 s:
    # ~90 pages/s, about one core): the soak is about staying up, not speed.
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--pages-per-host", type=int, default=800)
    ap.add_argument("--delay", type=float, default=2.0, help="host_delay_s")
    a = ap.parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with tempfile.TemporaryDirectory(prefix="soak-") as d:
        soak, summary = run(a, Path(d))
    final = summary["final_counters"]
    assert isinstance(final, dict)
    held = summary["stored_after_stop"]
    assert isinstance(held, dict)
    result = {"args": vars(a), "figures": figures(soak, final, held), **summary,
              "kills": soak.kills, "samples": [asdict(s) for s in soak.samples]}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"soak-{stamp}.json").write_text(json.dumps(result, indent=1))
    plot(soak, RESULTS / f"soak-{stamp}.png")
    print(json.dumps(result["figures"], indent=1))
    print(f"wrote {RESULTS / f'soak-{stamp}.json'} and .png")


if __name__ == "__main__":
    main()
