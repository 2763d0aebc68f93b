"""Scrapy (one process) or scrapy-redis (one of N processes) on the sandbox web.

Runs inside bench/.venv-peers (never Trawl's environment). Configured by one JSON file:

    python bench/peers/scrapy_crawl.py CONFIG.json

CONFIG: mode ("scrapy" | "scrapy-redis"), seeds, resolver_map (host -> IP), allowed_domains,
delay_s, concurrent_requests, user_agent, redis_url, redis_key, seed_redis (bool: this process
pushes the seeds), idle_close_s, timeout_s, stats_path, broad (bool: Scrapy's broad-crawl
settings, for the internet-like web).
"""

from __future__ import annotations

import json
import re
import sys

from scrapy import Request, Spider
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.resolver import CachingThreadedResolver
from twisted.internet import defer

CONFIG: dict = {}


class StaticResolver(CachingThreadedResolver):
    """Answers the sandbox names from the static map (like Trawl's static_hosts); else DNS."""

    def getHostByName(self, name, timeout=None):
        ip = CONFIG["resolver_map"].get(name)
        if ip is not None:
            return defer.succeed(ip)
        return super().getHostByName(name, timeout)


class BenchMixin:
    name = "bench"

    def setup_links(self) -> None:
        # allow_domains would compare against the netloc with its port (":PORT" never matches
        # the domain), so the same scope is written as a regex on the host; OffsiteMiddleware
        # (allowed_domains, by host name) still applies.
        doms = "|".join(re.escape(d) for d in CONFIG["allowed_domains"])
        self.links = LinkExtractor(allow=[rf"^https?://([^/:]*\.)?({doms})(:\d+)?(/|$)"])

    def parse(self, response):
        if not hasattr(response, "text"):
            return
        for link in self.links.extract_links(response):
            yield Request(link.url, callback=self.parse)


class PlainSpider(BenchMixin, Spider):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.allowed_domains = CONFIG["allowed_domains"]
        self.setup_links()

    async def start(self):
        for url in CONFIG["seeds"]:
            yield Request(url, callback=self.parse)

    def start_requests(self):  # Scrapy < 2.13
        for url in CONFIG["seeds"]:
            yield Request(url, callback=self.parse)


def settings() -> dict:
    s = {
        "BOT_NAME": "bench",
        "USER_AGENT": CONFIG["user_agent"],
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": CONFIG["concurrent_requests"],
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "CONCURRENT_REQUESTS_PER_IP": 0,
        "DOWNLOAD_DELAY": CONFIG["delay_s"],
        "RANDOMIZE_DOWNLOAD_DELAY": False,
        "DOWNLOAD_DELAY_JITTER": 0,
        "DNS_RESOLVER": "__main__.StaticResolver",
        "DOWNLOAD_TIMEOUT": 30,
        "RETRY_TIMES": 2,
        "LOG_LEVEL": "INFO",
        "LOGSTATS_INTERVAL": 30,
        "TELNETCONSOLE_ENABLED": False,
        "CLOSESPIDER_TIMEOUT": CONFIG["timeout_s"],
        "REACTOR_THREADPOOL_MAXSIZE": 10,
    }
    if CONFIG.get("broad"):
        # docs.scrapy.org "Broad Crawls": a priority queue that spreads requests over the
        # downloader slots (domains), breadth-first order, no cookies, a larger DNS thread pool
        s.update({
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
            "DEPTH_PRIORITY": 1,
            "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
            "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
            "COOKIES_ENABLED": False,
            "REACTOR_THREADPOOL_MAXSIZE": 20,
        })
    if CONFIG["mode"] == "scrapy-redis":
        s.update({
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            # Persist: with it off, a process that closes (idle for MAX_IDLE_TIME_BEFORE_CLOSE)
            # flushes the shared queue and dupefilter under the processes still crawling, which
            # then fetch again what was fetched (09:14 run: 562 repeats, half the rate). Each
            # run has a Redis of its own, so nothing carries over.
            "SCHEDULER_PERSIST": True,
            "REDIS_URL": CONFIG["redis_url"],
            "MAX_IDLE_TIME_BEFORE_CLOSE": CONFIG["idle_close_s"],
        })
    return s


def main() -> None:
    CONFIG.update(json.loads(open(sys.argv[1]).read()))
    spider_cls: type = PlainSpider
    if CONFIG["mode"] == "scrapy-redis":
        from scrapy_redis.spiders import RedisSpider

        class RedisBench(BenchMixin, RedisSpider):
            redis_key = CONFIG["redis_key"]

            def __init__(self, *a, **kw):
                super().__init__(*a, **kw)
                self.allowed_domains = CONFIG["allowed_domains"]
                self.setup_links()

        spider_cls = RedisBench
        if CONFIG.get("seed_redis"):
            import redis

            r = redis.Redis.from_url(CONFIG["redis_url"])
            r.lpush(CONFIG["redis_key"], *CONFIG["seeds"])
    process = CrawlerProcess(settings(), install_root_handler=True)
    crawler = process.create_crawler(spider_cls)
    process.crawl(crawler)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    with open(CONFIG["stats_path"], "w") as f:
        json.dump({k: (v if isinstance(v, (int, float, str)) else str(v))
                   for k, v in stats.items()}, f, indent=1)


if __name__ == "__main__":
    main()
