"""A page whose charset is named only in its Content-Type header is decoded with it: a link
to a non-ASCII path is followed to the right URL (through the real pipeline on a real Redis
and a loopback server). The fetcher keeps the bare media type for its allow list; the charset
once got lost with the rest of the header, and the page was read as UTF-8."""

from __future__ import annotations

import redis

from frontier.config import CrawlConfig
from frontier.redisserver import EmbeddedRedis
from tests.inprocess import crawl_until_done
from tests.loopback import HTTPServerFactory, Reply, Request
from workers.cli.crawl import init_crawl
from workers.pipeline.parse import parse_html

PAGE = '<html><body><a href="/caf\u00e9">coffee</a></body></html>'.encode("iso-8859-1")


def test_the_header_charset_decodes_the_page(redis_server: EmbeddedRedis, tmp_path,
                                             http_server: HTTPServerFactory) -> None:
    def respond(req: Request) -> Reply:
        if req.path == "/":
            return Reply(200, PAGE, "text/html; charset=iso-8859-1")
        return Reply(404, b"", "text/plain")

    server = http_server(respond=respond)
    cfg = CrawlConfig(namespace="charset", partitions=1, output_dir=str(tmp_path),
                      host_delay_s=0.0, adaptive_delay_factor=0.0, allow_private_ips=True,
                      soft404_probe=False, allowed_domains=["latin.test"],
                      static_hosts={"latin.test": "127.0.0.1"}).validate()
    client = redis.Redis.from_url(redis_server.url)
    frontier = init_crawl(client, cfg, [f"http://latin.test:{server.port}/"], fresh=True)
    try:
        crawl_until_done(redis_server.url, frontier, timeout_s=20)
    finally:
        client.close()
    assert "/caf%C3%A9" in [r.target for r in server.requests]
    # the control: read as UTF-8 (the media type alone), the link is another URL
    utf8 = parse_html(PAGE, "http://latin.test/", "text/html").links[0].url
    assert not utf8.endswith("/caf%C3%A9"), utf8
