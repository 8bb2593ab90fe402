"""The shared-prefix figures of `compare`: exact, fast, and two empty answers identical."""

from __future__ import annotations

import os
import random

from kveval.judge.compare import prefix_ratio, shared_prefix_length


def test_shared_prefix_length_matches_a_character_walk() -> None:
    rng = random.Random(7)
    for _ in range(5000):
        a = "".join(rng.choice("ab€") for _ in range(rng.randrange(40)))
        b = a[: rng.randrange(len(a) + 1)] + "".join(rng.choice("ab€") for _ in range(3))
        assert shared_prefix_length(a, b) == len(os.path.commonprefix([a, b])), (a, b)


def test_prefix_ratio_is_the_common_prefix_over_the_longer_answer() -> None:
    assert prefix_ratio("The answer is 18", "The answer is 81") == 14 / 16
    assert prefix_ratio("abc", "abcdef") == 0.5
    assert prefix_ratio("", "abc") == 0.0


def test_two_empty_answers_are_identical_not_a_zero() -> None:
    assert prefix_ratio("", "") == 1.0
