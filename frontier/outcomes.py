"""The ways a lease can end: :class:`Outcome` and :data:`FINAL`, defined with the counters
they bump in frontier/counters.py (the registry) and importable from here as before."""

from frontier.counters import FINAL, Outcome

__all__ = ["FINAL", "Outcome"]
