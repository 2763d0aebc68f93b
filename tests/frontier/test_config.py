"""The settings table: every field documented and validated, bad values named at crawl start,
and a setting moved out of the code read from the crawl's config where it is used."""

from __future__ import annotations

import ast
import inspect
import time
import typing
from dataclasses import fields
from pathlib import Path

import pytest
import redis

import frontier.config
from frontier.config import NON_NEGATIVE, POSITIVE, ConfigError, CrawlConfig
from frontier.redisserver import EmbeddedRedis
from sandbox import SandboxConfig, SandboxWeb
from sandbox.layout import SpecialKind
from workers.app.celery_app import configure
from workers.app.tasks import apply_results
from workers.cli.crawl import init_crawl
from workers.pipeline.lease import process_leases
from workers.runtime import context

#: Numeric settings checked by a rule of their own instead of the sign tables.
OWN_RULE = {"fetch_lease_s", "bloom_error_rate", "soft404_threshold"}


def test_every_setting_has_a_comment() -> None:
    source = inspect.getsource(frontier.config)
    lines = source.splitlines()
    tree = ast.parse(source)
    (table,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CrawlConfig"]
    bare = []
    for node in table.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above = lines[node.lineno - 2].strip()
            if not above.startswith("#:"):
                bare.append(node.target.id)
    assert bare == []


def test_every_numeric_setting_is_checked() -> None:
    hints = typing.get_type_hints(CrawlConfig)
    numeric = {f.name for f in fields(CrawlConfig) if hints[f.name] in (int, float)}
    assert numeric - set(POSITIVE) - set(NON_NEGATIVE) - OWN_RULE == set()
    assert not set(POSITIVE) & set(NON_NEGATIVE)


@pytest.mark.parametrize(("settings", "words"), [
    ({"dedup_settings": {"threshold": 2}}, ["dedup_settings", "threshold"]),
    ({"dedup_settings": {"treshold": 0.9}}, ["dedup_settings", "'treshold'"]),
    ({"dedup_settings": {"num_perm": 512, "bands": 256, "rows": 2}}, ["dedup_settings", "bands"]),
    ({"dedup_settings": {"shingle_w": "four"}}, ["dedup_settings"]),
    ({"dedup_settings": ["threshold", 0.9]}, ["dedup_settings"]),
])
def test_bad_dedup_settings_fail_when_the_crawl_starts(settings: dict[str, object],
                                                       words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        CrawlConfig(**settings).validate()  # type: ignore[arg-type]
    assert all(word in str(info.value) for word in words), info.value


def test_good_dedup_settings_are_the_workers_dedup_config() -> None:
    cfg = CrawlConfig(dedup_enabled=False, dedup_settings={"threshold": 0.8}).validate()
    dedup = cfg.dedup_config()
    assert (dedup.enabled, dedup.threshold) == (False, 0.8)


@pytest.mark.parametrize(("name", "value"), [
    ("partition_sweep_s", 0), ("task_linger_s", -0.1), ("worker_redis_connections", 0),
    ("host_cache_local_ttl_s", -1), ("soft404_threshold", 1.5), ("soft404_threshold", 0),
    ("retry_http_statuses", [503, 200]), ("retry_http_statuses", "503"),
    ("host_delay_s", "2"), ("warc_max_bytes", 0), ("max_depth", -1),
    ("revisit_policy", "weekly"), ("revisit_budget_pages_s", 0),
    ("revisit_budget_pages_s", float("inf")), ("revisit_similarity_threshold", 1.2),
    ("revisit_min_interval_s", 10 ** 9), ("revisit_fixed_interval_s", -1),
    ("continuous", "yes"),
])
def test_bad_tunable_is_named(name: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"Setting {name}="):
        CrawlConfig(**{name: value}).validate()  # type: ignore[arg-type]


def test_defaults_validate_and_round_trip() -> None:
    cfg = CrawlConfig().validate()
    assert CrawlConfig.from_json(cfg.to_json()) == cfg


def test_retry_http_statuses_decide_which_answers_are_retried(
        redis_client: redis.Redis, redis_server: EmbeddedRedis, tmp_path: Path) -> None:
    """The sandbox's always-500 page is retried under the default statuses and is the page's
    answer once 500 is left out of retry_http_statuses."""
    outcomes = {}
    with SandboxWeb(SandboxConfig(seed=3, hosts=12, pages_per_host=20, ips=2,
                                  crawl_delay_s=0.0), tmp_path / "web.log") as web:
        assert web.site is not None
        (url,) = web.site.special_urls(SpecialKind.ERROR)
        for name, statuses in (("default", None), ("no500", [429, 502, 503, 504])):
            settings = {} if statuses is None else {"retry_http_statuses": statuses}
            cfg = CrawlConfig(namespace=f"retry-{name}", partitions=2, host_delay_s=0.0,
                              output_dir=str(tmp_path / name), allow_private_ips=True,
                              soft404_probe=False, static_hosts=web.resolver_map,
                              **settings).validate()  # type: ignore[arg-type]
            frontier = init_crawl(redis_client, cfg, [url])
            configure(redis_server.url, cfg.namespace)
            context.close_context()
            try:
                ctx = context.get_context(redis_server.url, cfg.namespace)
                (robots,), _ = frontier.acquire(1)  # the host's first lease fetches robots.txt
                apply_results(ctx, [(r, None) for r in process_leases(ctx, [(robots, None)])],
                              [])
                (page,), _ = frontier.acquire(1, now=time.time() + 60)  # past any delay
                (res,) = process_leases(ctx, [(page, None)])
                outcomes[name] = res.completion.outcome
            finally:
                context.close_context()
    assert outcomes == {"default": "retries", "no500": "fetched"}
