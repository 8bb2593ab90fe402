"""What a verdict could have seen never contradicts the check beside it; relative rises and
signed figures stay readable (no "+430584.6%", no "-0.0")."""

from __future__ import annotations

from kveval.judge.checks import Check
from kveval.judge.detect import Detectable
from kveval.show.seen import detectable_sentence
from kveval.show.words import fixed, over_floor, points, signed


def check(kind: str, adjusted_p: float) -> Check:
    return Check("gsm8k", kind, adjusted_p, 1e-6, adjusted_p=adjusted_p)


FORCED_NONE = Detectable("forced", "nats", None, 30, floor=0.000137, runs=1)
ACCURACY_NONE = Detectable("accuracy", "points", None, 30, 0.4, 40.0)


def test_a_shown_check_is_never_told_nothing_would_show() -> None:
    forced = detectable_sentence(FORCED_NONE, check("forced", 0.0001))
    assert "would show" not in forced and "no rise" not in forced
    assert forced.startswith("forced: a rise of the forced KL over the floor shown (p = 0.0001")
    accuracy = detectable_sentence(ACCURACY_NONE, check("accuracy", 0.008))
    assert "no loss" not in accuracy and accuracy.startswith("a loss shown (p = 0.008")
    drift = detectable_sentence(Detectable("truncated", "answers", None, 30),
                                check("truncated", 0.001))
    assert drift.startswith("more answers cut at max_tokens than the floor's shown")


def test_a_check_not_shown_still_says_what_it_could_not_see() -> None:
    assert "no rise of the KL up to a thousand times the floor would show" in \
        detectable_sentence(FORCED_NONE, check("forced", 0.4))
    assert "no loss (at most 40.0 points) would show 80% of the time" in \
        detectable_sentence(ACCURACY_NONE, check("accuracy", 0.2))
    assert "would show" in detectable_sentence(FORCED_NONE)


def test_rises_over_the_floor_past_ten_times_are_ratios() -> None:
    assert over_floor(0.59 * 0.000137, 0.000137) == "+59.0% over the floor"
    assert over_floor(4305.846 * 0.000137, 0.000137) == "4,307x the floor"
    assert over_floor(11.5, 1.0) == "12.5x the floor"
    assert over_floor(-0.0004, 1.0) == "+0.0% over the floor"
    assert "(3,651x the floor)" in detectable_sentence(
        Detectable("forced", "nats", 0.5, 30, floor=0.000137, runs=3))


def test_no_negative_zero() -> None:
    assert signed(-0.0004) == "+0.0" and points(-0.0004) == "0.0"
    assert fixed(-0.04, 1, "+") == "+0.0" and fixed(-0.06, 1, "+") == "-0.1"
    assert fixed(-1e-9, 4) == "0.0000"
