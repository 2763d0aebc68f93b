"""Checks of crawl settings: the signs, ranges and choices :meth:`CrawlConfig.validate` applies,
and the error they raise (its message names the setting and the fix)."""

from __future__ import annotations

import ipaddress
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frontier.config import CrawlConfig

E_BAD_VALUE = (
    "Setting {name}={value!r} is invalid: {why}. Fix it in the config or on the command line."
)
E_UNKNOWN = "Unknown setting {name!r}. Known settings: {known}."


class ConfigError(ValueError):
    """A setting that cannot work; the message names the setting and the fix."""

    #: The setting refused, its value and why (set by the checks, for an error that also
    #: names where the value came from: frontier/config_layers.py).
    setting: str | None = None
    value: Any = None
    why: str = ""


#: Settings that must be > 0: a zero or negative value stops the crawl or every fetch.
POSITIVE = (
    "partitions", "lease_ttl_s", "max_inflight", "task_batch", "connect_timeout_s",
    "read_timeout_s", "total_timeout_s", "max_body_bytes", "bloom_capacity", "max_redirects",
    "max_links_per_page", "robots_ttl_s", "partition_ttl_s", "fetch_concurrency",
    "lease_keep_s", "dns_timeout_s", "partition_sweep_s", "worker_redis_connections",
    "warc_max_bytes", "pipeline_threads", "revisit_budget_pages_s", "revisit_min_interval_s",
    "revisit_max_interval_s", "revisit_fixed_interval_s", "revisit_similarity_threshold",
    "revisit_expected_urls", "revisit_replan_s", "revisit_burst_s",
)
#: Settings that must be >= 0 (0 turns a delay or a limit off, or is a valid count).
NON_NEGATIVE = (
    "max_retries", "cpu_backlog", "host_delay_s", "ip_delay_s", "adaptive_delay_factor",
    "max_delay_s",
    "retry_backoff_s", "robots_error_ttl_s", "ip_concurrency", "max_depth", "max_pages",
    "max_pages_per_host", "max_pages_per_domain", "max_url_length", "max_path_segments",
    "max_segment_repeats", "max_query_params", "max_query_variants_per_path",
    "calendar_window_years", "domain_budget_base", "domain_budget_per_linking_domain",
    "dns_ttl_s", "host_cache_local_ttl_s", "task_linger_s",
)


def _bad(name: str, value: Any, why: str) -> ConfigError:
    err = ConfigError(E_BAD_VALUE.format(name=name, value=value, why=why))
    err.setting, err.value, err.why = name, value, why
    return err


def _number(cfg: CrawlConfig, name: str) -> float:
    """The setting's value, refused unless it is a number (``--set x=abc`` gives a string)."""
    value = getattr(cfg, name)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _bad(name, value, "must be a number")
    return value


def _check_numbers(cfg: CrawlConfig) -> None:
    """Signs and ranges of the numeric settings (NaN fails every comparison, so is refused)."""
    for name in POSITIVE:
        value = _number(cfg, name)
        if not value > 0 or math.isnan(value):
            raise _bad(name, value, "must be > 0")
    for name in NON_NEGATIVE:
        value = _number(cfg, name)
        if not value >= 0:
            raise _bad(name, value, "must be >= 0")
    if not 0 < _number(cfg, "bloom_error_rate") < 0.5:
        raise _bad("bloom_error_rate", cfg.bloom_error_rate, "must be in (0, 0.5)")
    if not 0 < _number(cfg, "soft404_threshold") <= 1:
        raise _bad("soft404_threshold", cfg.soft404_threshold, "must be in (0, 1]")
    statuses = cfg.retry_http_statuses
    if not isinstance(statuses, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) and 400 <= s <= 599 for s in statuses):
        raise _bad("retry_http_statuses", statuses,
                   "HTTP statuses from 400 to 599 (any other is a final answer)")
    if cfg.lease_ttl_s < 2 * cfg.total_timeout_s + 5.0:
        raise _bad("lease_ttl_s", cfg.lease_ttl_s,
                   f"must be at least 2 x total_timeout_s + 5 = "
                   f"{2 * cfg.total_timeout_s + 5.0:g} so a fetch fits in its lease")
    if cfg.partitions > 16384:
        raise _bad("partitions", cfg.partitions, "at most 16384 (Redis slots)")


def _check_choices(cfg: CrawlConfig) -> None:
    """Settings picked from a list, and the crawl's name and contact."""
    from frontier.config import BLOOM_BACKENDS, FETCH_ENGINES, ORDERINGS

    for name, options in (("bloom_backend", BLOOM_BACKENDS), ("ordering", ORDERINGS),
                          ("fetch_engine", FETCH_ENGINES), ("warc_version", ("1.0", "1.1"))):
        if str(getattr(cfg, name)) not in options:  # --set warc_version=1.0 is a number
            raise _bad(name, getattr(cfg, name), f"one of {', '.join(options)}")
    nets = cfg.allowed_networks
    for net in nets if isinstance(nets, list) else [None]:
        try:
            # a string only (ip_network takes 8 for 0.0.0.8); host bits set: a typo, not widened
            ipaddress.ip_network(net if isinstance(net, str) else repr(net), strict=True)
        except (TypeError, ValueError) as exc:
            raise _bad("allowed_networks", nets, f"{net!r} is not a network in CIDR form "
                       f"(a list, e.g. [\"10.20.0.0/16\", \"fd00::/8\"]): {exc}") from None
    if not cfg.namespace or any(c in cfg.namespace for c in "{} \t\n"):
        raise _bad("namespace", cfg.namespace, "must be non-empty, no braces/spaces")
    if not cfg.user_agent_contact.startswith(("http://", "https://", "mailto:")):
        raise _bad("user_agent_contact", cfg.user_agent_contact,
                   "a contact URL (http(s):// or mailto:) is required so sites can reach you")


#: Revisit policies (docs/freshness.md): fixed, adaptive (Nutch's rule), or a plan.
REVISIT_POLICIES = ("fixed", "adaptive", "uniform", "proportional", "sqrt", "freshness", "age")


def _check_continuous(cfg: CrawlConfig) -> None:
    """The continuous-crawling settings (their signs are in POSITIVE): a known policy, a
    finite budget, intervals in order, a similarity threshold in (0, 1]."""
    if cfg.revisit_policy not in REVISIT_POLICIES:
        raise _bad("revisit_policy", cfg.revisit_policy, f"one of {', '.join(REVISIT_POLICIES)}")
    for name in ("revisit_budget_pages_s", "revisit_max_interval_s"):
        if math.isinf(_number(cfg, name)):
            raise _bad(name, getattr(cfg, name), "must be finite")
    if cfg.revisit_min_interval_s > cfg.revisit_max_interval_s:
        raise _bad("revisit_min_interval_s", cfg.revisit_min_interval_s,
                   f"must be <= revisit_max_interval_s ({cfg.revisit_max_interval_s:g})")
    if not _number(cfg, "revisit_similarity_threshold") <= 1:
        raise _bad("revisit_similarity_threshold", cfg.revisit_similarity_threshold,
                   "must be in (0, 1]")
    if not isinstance(cfg.continuous, bool):
        raise _bad("continuous", cfg.continuous, "true or false")
