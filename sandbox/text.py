"""Pseudo-random words: a seeded vocabulary and one long blob pages slice their prose from."""

from __future__ import annotations

import random

from .layout import rng_for

_ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "st", "tr", "pl", "gr", "ch", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ea")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st")


class Vocabulary:
    """Words are drawn with a Zipf-like weight, so text looks like text to shingling code."""

    BLOB_WORDS = 150_000

    def __init__(self, seed: int) -> None:
        rng = rng_for(seed, "vocabulary")
        words: set[str] = set()
        while len(words) < 3000:
            n = rng.choice((1, 2, 2, 3, 3, 4))
            words.add("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                              for _ in range(n)))
        self.words: list[str] = sorted(words)
        rng.shuffle(self.words)
        weights = [1.0 / (r + 20) for r in range(len(self.words))]
        self.blob: str = " ".join(rng.choices(self.words, weights=weights, k=self.BLOB_WORDS))

    def phrase(self, rng: random.Random, n: int) -> str:
        return " ".join(rng.choice(self.words) for _ in range(n))

    def passage(self, rng: random.Random, length: int) -> str:
        """About ``length`` characters of prose cut from the blob at word boundaries."""
        start = self.blob.find(" ", rng.randrange(len(self.blob) - length - 64)) + 1
        end = self.blob.find(" ", start + length)
        return self.blob[start:end]
