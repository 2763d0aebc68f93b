"""Hypothesis settings and strategies shared by the fuzz tests.

CI runs them derandomized (the same examples every run, no flaky failures) with no deadline
(the 2-core CI machine is shared: timing is not a property here) and no example database
(nothing written next to the checkout); each test sets its own ``max_examples`` so that the
whole directory stays well under 30 s.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.fuzz import inputs

FUZZ = settings(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])

#: Any character, lone surrogates included (the default alphabet leaves them out).
ANY_CHAR = st.one_of(st.characters(codec=None), st.characters(categories=["Cs"]),
                     st.characters(max_codepoint=0x7F))
ANY_TEXT = st.text(ANY_CHAR, max_size=120)
RNG = st.randoms(use_true_random=False)


def _from(gen: object) -> st.SearchStrategy:
    """Inputs of one of :mod:`tests.fuzz.inputs`' generators, drawn through hypothesis."""
    return RNG.map(gen)  # type: ignore[arg-type]


URLS = st.one_of(ANY_TEXT, _from(inputs.random_url),
                 st.lists(st.sampled_from(inputs.SCHEMES + inputs.SEPARATORS + inputs.HOSTS
                                          + inputs.PORTS + inputs.SEGMENTS + inputs.QUERIES
                                          + inputs.FRAGMENTS + ("/", "@", ":", "%")),
                          max_size=12).map("".join))
BASES = st.one_of(st.none(), _from(inputs.random_base).filter(bool))
ROBOTS = st.one_of(st.binary(max_size=600), _from(inputs.random_robots),
                   st.lists(st.tuples(st.sampled_from(inputs.ROBOTS_KEYS),
                                      st.sampled_from((":", ": ", "")), ANY_TEXT),
                            max_size=15)
                   .map(lambda ls: "\n".join(k + s + v for k, s, v in ls).encode(
                       "utf-8", "surrogatepass")))
PATHS = st.lists(st.one_of(URLS, _from(inputs.random_path)), min_size=1, max_size=6)
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), ANY_TEXT),
    lambda children: st.one_of(st.lists(children, max_size=8),
                               st.dictionaries(ANY_TEXT, children, max_size=4)),
    max_leaves=20)


def pick(rng: random.Random, pool: tuple[bytes, ...]) -> bytes:
    return pool[rng.randrange(len(pool))]
