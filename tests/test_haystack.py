"""The haystack: seeded prose without digits, depth placement, fitting to a token length."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kveval.adapters.base import BuildContext, TaskSpec
from kveval.adapters.haystack import (
    Grid,
    fit_filler,
    parse_depths,
    parse_lengths,
    skipped_lengths,
)
from kveval.adapters.prose import (
    ADJECTIVES,
    ADVERBS,
    CONNECTIVES,
    INTRANSITIVE,
    NOUNS,
    PEOPLE,
    PREPOSITIONS,
    TEMPLATES,
    THINGS_SAID,
    TIMES,
    TRANSITIVE,
    Prose,
    prose,
    weave,
)
from kveval.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
# sha256 of the first 200 sentences for seed "1234/haystack/T0": pins the generator, so a
# change to the word lists or templates (which changes every prompt) is a deliberate one.
GOLDEN_SEED = "1234/haystack/T0"
GOLDEN_SHA256 = "cf7265b775d92d7dc407a8aaec2d0067dc07565887f732fc7e4a30358651232f"


def _text(seed: str, count: int) -> str:
    return " ".join(Prose(seed).sentences(0, count))


def test_the_generator_is_pinned() -> None:
    assert hashlib.sha256(_text(GOLDEN_SEED, 200).encode()).hexdigest() == GOLDEN_SHA256


def test_same_seed_same_text_different_seed_different_text() -> None:
    assert _text("a", 300) == _text("a", 300)
    assert _text("a", 300) != _text("b", 300)


def test_text_is_identical_in_a_fresh_interpreter_with_another_hash_seed() -> None:
    code = ("import hashlib; from kveval.adapters.prose import Prose; "
            f"print(hashlib.sha256(' '.join(Prose({GOLDEN_SEED!r}).sentences(0, 200))"
            ".encode()).hexdigest())")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env, cwd=ROOT).stdout.strip()
    assert out == GOLDEN_SHA256


def test_growing_never_changes_earlier_sentences() -> None:
    stepwise = Prose("grow")
    first = stepwise.sentences(0, 10)
    stepwise.sentences(0, 500)
    assert stepwise.sentences(0, 10) == first
    assert stepwise.sentences(0, 500) == Prose("grow").sentences(0, 500)


def test_no_digit_anywhere_in_the_filler() -> None:
    text = _text("digits", 20_000)
    assert not re.search(r"\d", text)
    words = [*ADJECTIVES, *NOUNS, *PEOPLE, *INTRANSITIVE, *ADVERBS, *PREPOSITIONS, *TIMES,
             *CONNECTIVES, *THINGS_SAID, *(v for pair in TRANSITIVE for v in pair),
             *(re.sub(r"\{\w+\}", "", t) for t in TEMPLATES)]
    assert not any(re.search(r"\d", w) for w in words)


def test_sentences_look_like_prose() -> None:
    for sentence in Prose("shape").sentences(0, 500):
        assert sentence[0].isupper() and sentence.endswith(".")
        assert not re.search(r"\ba [aeiou]", sentence)  # "an ancient", never "a ancient"
        assert "{" not in sentence


def test_chars_and_count_for_agree_with_the_joined_text() -> None:
    stream = Prose("chars")
    for n in (0, 1, 2, 57, 400):
        assert stream.chars(n) == len(" ".join(stream.sentences(0, n)))
    n = stream.count_for(10_000)
    assert abs(stream.chars(n) - 10_000) <= max(len(s) for s in stream.sentences(0, n + 1))


@pytest.mark.parametrize("depth", [0, 10, 25, 50, 75, 90, 100])
def test_weave_places_the_insert_at_the_depth(depth: int) -> None:
    stream = Prose("depth")
    needle = "The special magic number for amber-falcon is 1234567."
    text = weave(stream, 300, [(depth / 100, needle)])
    position = text.index(needle) / (len(text) - len(needle))
    longest = max(len(s) for s in stream.sentences(0, 300))
    assert abs(position - depth / 100) <= longest / len(text)
    assert text.count(needle) == 1
    assert text.replace(needle + " ", "").replace(" " + needle, "") == _text("depth", 300)


def test_weave_ends() -> None:
    stream = Prose("ends")
    assert weave(stream, 5, [(0.0, "FIRST.")]).startswith("FIRST. ")
    assert weave(stream, 5, [(1.0, "LAST.")]).endswith(" LAST.")
    assert weave(stream, 0, [(0.5, "ONLY.")]) == "ONLY."


def _word_count(stream: Prose, base: int):  # noqa: ANN202
    calls: list[int] = []

    def measure(n: int) -> int:
        calls.append(n)
        return base + len(re.findall(r"\w+|[^\w\s]", " ".join(stream.sentences(0, n))))

    return measure, calls


@pytest.mark.parametrize("target", [1024, 3000, 16384, 131072])
def test_fit_lands_within_the_window_in_few_calls(target: int) -> None:
    stream = prose("fit")
    measure, calls = _word_count(stream, 60)
    fit = fit_filler(measure, stream, target, tolerance=0.02)
    assert 0.98 * target <= fit.tokens <= target
    assert fit.tokens == measure(fit.count)
    assert len(calls) <= 6


def test_fit_from_a_warm_start_takes_one_call() -> None:
    stream = prose("fit")
    measure, _ = _word_count(stream, 60)
    first = fit_filler(measure, stream, 8192)
    again, calls = _word_count(stream, 62)
    fit = fit_filler(again, stream, 8192, start=first.count)
    assert calls == [first.count] and fit.count == first.count


def test_fit_when_the_task_alone_is_too_long() -> None:
    stream = prose("fit")
    measure, _ = _word_count(stream, 500)
    fit = fit_filler(measure, stream, 100)
    assert fit.count == 0 and fit.tokens == 500


def test_fit_too_coarse_returns_the_largest_below_target() -> None:
    stream = prose("fit")
    measure, _ = _word_count(stream, 10)
    fit = fit_filler(measure, stream, 40, tolerance=0.001)
    assert fit.tokens <= 40 and measure(fit.count + 1) > 40


def test_parse_lengths() -> None:
    assert parse_lengths("4k,16k,128k,3000") == [4096, 16384, 131072, 3000]
    assert parse_lengths(" 1K , 1.5k,2048, 1k") == [1024, 1536, 2048]
    assert parse_lengths("1m") == [1048576]
    for bad in ["", "4x", "0", "-1k", "k", "1.3", "4k,,8k", "abc"]:
        with pytest.raises(UsageError):
            parse_lengths(bad)


def test_parse_depths() -> None:
    assert parse_depths("0,25,50,100") == [0, 25, 50, 100]
    for bad in ["", "a", "101", "-5"]:
        with pytest.raises(UsageError):
            parse_depths(bad)


def _spec(**params: object) -> TaskSpec:
    return TaskSpec(name="needle", adapter="needle", api="chat", max_tokens=32, params=params)


def test_grid_defaults_and_overrides() -> None:
    grid = Grid.from_spec(_spec())
    assert grid.lengths == (1024, 2048, 4096, 8192, 16384, 32768)
    assert grid.depths == (0, 10, 25, 50, 75, 90, 100) and grid.trials == 3
    grid = Grid.from_spec(_spec(lengths="16k,4k", depths=[50, 0], trials=1))
    assert grid.lengths == (4096, 16384) and grid.depths == (0, 50) and grid.trials == 1
    assert Grid.from_spec(_spec(lengths=["4k", 8192])).lengths == (4096, 8192)


@pytest.mark.parametrize("params", [
    {"lengths": []}, {"lengths": [0]}, {"lengths": [True]}, {"depths": [120]},
    {"depths": "x"}, {"trials": 0}, {"trials": "3"}, {"seed": 1.5},
])
def test_grid_rejects_bad_params(params: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        Grid.from_spec(_spec(**params))


def test_skipped_lengths_are_above_context_minus_answer_budget() -> None:
    spec = _spec(lengths=[1024, 4096, 8192, 32768])
    assert skipped_lengths(spec, BuildContext(max_context=8192)) == [8192, 32768]
    assert skipped_lengths(spec, BuildContext(max_context=8224)) == [32768]
    assert skipped_lengths(spec, BuildContext()) == []
    grid = Grid.from_spec(spec)
    assert {c.length for c in grid.cells(spec, 8192)} == {1024, 4096}


def test_cells_order_and_limit() -> None:
    spec = _spec(lengths=[1024, 2048], depths=[0, 50], trials=2)
    cells = Grid.from_spec(spec).cells(spec, None)
    assert [c.label for c in cells[:3]] == ["L1024/D0/T0", "L1024/D0/T1", "L1024/D50/T0"]
    limited = TaskSpec(name="needle", adapter="needle", limit=3, params=spec.params)
    assert len(Grid.from_spec(limited).cells(limited, None)) == 3
