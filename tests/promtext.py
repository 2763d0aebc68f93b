"""Prometheus text as the tests read it: parsed into metric families by name, and the sum of
the samples of one name (and labels)."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

Families = dict[str, Metric]


def parse(text: str) -> Families:
    return {f.name: f for f in text_string_to_metric_families(text)}


def of_registry(registry: CollectorRegistry) -> Families:
    """What an endpoint serving ``registry`` would answer, parsed."""
    return parse(generate_latest(registry).decode())


def value(families: Families, sample: str, **labels: str) -> float:
    """Sum of the samples named ``sample`` whose labels include ``labels``."""
    family = families.get(re.sub(r"_(total|count|sum|bucket|created)$", "", sample))
    if family is None:
        family = families.get(sample)
    if family is None:
        return 0.0
    return sum(s.value for s in family.samples if s.name == sample
               and all(s.labels.get(k) == v for k, v in labels.items()))
