"""The needle adapters: grid, placement, seeding, skipped lengths and scoring."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from kveval.adapters import ADAPTERS, needle
from kveval.adapters.base import BuildContext, Item, Message, TaskSpec
from kveval.errors import UsageError

_TOKEN = re.compile(r"\w+|[^\w\s]")


def word_counter(messages: Sequence[Message]) -> int:
    """A stand-in tokenizer: words and punctuation, plus a chat template's overhead."""
    return sum(5 + len(_TOKEN.findall(m["content"])) for m in messages) + 3


def spec(name: str = "needle", **params: object) -> TaskSpec:
    return TaskSpec(name=name, adapter=name, api="chat", max_tokens=32, params=params)


def build(name: str = "needle", max_context: int | None = None, **params: object) -> list[Item]:
    ctx = BuildContext(count_tokens=word_counter, max_context=max_context)
    return ADAPTERS[name].build(spec(name, **params), ctx)


def content(item: Item) -> str:
    assert item.messages is not None and len(item.messages) == 1
    assert item.messages[0]["role"] == "user"
    return item.messages[0]["content"]


def document(item: Item) -> str:
    return content(item).split("<document>\n", 1)[1].split("\n</document>", 1)[0]


def test_registered() -> None:
    assert ADAPTERS["needle"] is needle.ADAPTER
    assert ADAPTERS["needle-multikey"] is needle.MULTIKEY_ADAPTER


def test_default_grid() -> None:
    items = build(lengths=[1024, 2048])
    assert len(items) == 2 * 7 * 3
    assert len({i.item_id for i in items}) == len(items)
    assert items[0].item_id == "needle/L1024/D0/T0"
    assert "needle/L2048/D50/T2" in {i.item_id for i in items}
    for item in items:
        meta = item.meta
        assert {"target_tokens", "measured_tokens", "depth", "trial", "variant"} <= set(meta)
        assert meta["variant"] == "single" and meta["distractors"] == []
        assert 0.98 * meta["target_tokens"] <= meta["measured_tokens"] <= meta["target_tokens"]
        assert meta["measured_tokens"] == word_counter(item.messages or ())


def test_the_needle_and_question() -> None:
    for item in build(lengths=[2048], depths=[0, 50, 100], trials=2):
        key, value = item.meta["key"], item.reference
        assert value is not None and re.fullmatch(r"[1-9]\d{6}", value)
        assert document(item).count(f"The special magic number for {key} is {value}.") == 1
        assert content(item).endswith(f"What is the special magic number for {key} mentioned "
                                      "in the document? Answer with the number only.")
        assert re.findall(r"\d+", content(item)) == [value]  # the only digits in the prompt


@pytest.mark.parametrize("depth", [0, 10, 25, 50, 75, 90, 100])
def test_the_needle_sits_at_its_depth(depth: int) -> None:
    for item in build(lengths=[1024, 8192], depths=[depth], trials=1):
        doc = document(item)
        sentence = f"The special magic number for {item.meta['key']} is {item.reference}."
        position = doc.index(sentence) / (len(doc) - len(sentence))
        sentence_share = 1 / item.meta["filler_sentences"]
        assert abs(position - depth / 100) <= 1.5 * sentence_share
        assert item.meta["position"] == pytest.approx(position, abs=0.01)


def test_same_seed_gives_byte_identical_prompts_and_another_seed_does_not() -> None:
    first = build(lengths=[1024, 4096], depths=[25], trials=2)
    again = build(lengths=[1024, 4096], depths=[25], trials=2)
    other = build(lengths=[1024, 4096], depths=[25], trials=2, seed=99)
    assert [i.prompt_sha256 for i in first] == [i.prompt_sha256 for i in again]
    assert [i.messages for i in first] == [i.messages for i in again]
    assert not {i.prompt_sha256 for i in first} & {i.prompt_sha256 for i in other}


def test_keys_and_values_differ_per_cell() -> None:
    items = build(lengths=[1024, 2048], depths=[0, 50], trials=2)
    assert len({(i.meta["key"], i.reference) for i in items}) == len(items)


def test_a_cell_does_not_depend_on_the_rest_of_the_grid() -> None:
    alone = build(lengths=[4096], depths=[50], trials=1)[0]
    among = {i.item_id: i for i in build(lengths=[1024, 4096], depths=[0, 50], trials=2)}
    assert among["needle/L4096/D50/T0"].reference == alone.reference
    assert among["needle/L4096/D50/T0"].meta["key"] == alone.meta["key"]


def test_multikey_has_distinct_distractors() -> None:
    items = build("needle-multikey", lengths=[2048], depths=[0, 50, 100], trials=2)
    for item in items:
        distractors = item.meta["distractors"]
        assert item.meta["variant"] == "multikey" and len(distractors) == 4
        keys = {item.meta["key"], *(d["key"] for d in distractors)}
        values = {item.reference, *(d["value"] for d in distractors)}
        assert len(keys) == 5 and len(values) == 5
        for d in distractors:
            assert document(item).count(f"The special magic number for {d['key']} is "
                                        f"{d['value']}.") == 1
        assert item.item_id.startswith("needle-multikey/L2048/")
    assert build("needle-multikey", lengths=[1024], depths=[0], trials=1,
                 distractors=2)[0].meta["distractors"].__len__() == 2
    with pytest.raises(UsageError):
        build("needle-multikey", lengths=[1024], distractors=0)


def test_lengths_above_the_server_limit_are_skipped_not_built() -> None:
    params: dict[str, Any] = {"lengths": [1024, 2048, 4096], "depths": [50], "trials": 1}
    items = build(max_context=4096, **params)
    assert {i.meta["target_tokens"] for i in items} == {1024, 2048}
    ctx = BuildContext(count_tokens=word_counter, max_context=4096)
    assert needle.skipped_lengths(spec(**params), ctx) == [4096]
    assert needle.ADAPTER.skipped_lengths(spec(**params), ctx) == [4096]
    assert build(max_context=1000, **params) == []


def test_a_length_too_short_for_the_task_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="too short"):
        build(lengths=[40], depths=[0], trials=1)


def test_limit_keeps_the_first_items() -> None:
    limited = TaskSpec(name="needle", adapter="needle", api="chat", max_tokens=32, limit=4,
                       params={"lengths": [1024, 2048]})
    items = needle.ADAPTER.build(limited, BuildContext(count_tokens=word_counter))
    assert [i.item_id for i in items] == ["needle/L1024/D0/T0", "needle/L1024/D0/T1",
                                          "needle/L1024/D0/T2", "needle/L1024/D10/T0"]


def test_builds_without_a_counter_by_estimate() -> None:
    items = needle.ADAPTER.build(spec(lengths=[1024], depths=[50], trials=1), BuildContext())
    assert 0.98 * 1024 <= items[0].meta["measured_tokens"] <= 1024


def test_parse_lengths_is_importable_from_here() -> None:
    assert needle.parse_lengths("4k,16k,128k,3000") == [4096, 16384, 131072, 3000]


# ---------------------------------------------------------------- scoring


def scored_item(value: str = "4821937", distractors: Sequence[str] = ()) -> Item:
    meta = {"distractors": [{"key": f"k{i}", "value": v} for i, v in enumerate(distractors)]}
    return Item(task="needle", item_id="needle/L1024/D0/T0", reference=value, meta=meta)


@pytest.mark.parametrize("answer", [
    "4821937", "4821937.", " 4,821,937 ", "The special magic number for amber-falcon is 4821937.",
    "<think>It might be 1111111 or 4821937.</think>4821937", "4 821 937", "Answer: 4821937\n",
])
def test_exact_answers(answer: str) -> None:
    score = needle.ADAPTER.score(scored_item(), answer)
    assert score.correct is True and score.extracted == "4821937"
    assert score.meta == {"needle_class": "exact", "edit_distance": 0}


def test_a_distractors_value_is_wrong_key() -> None:
    score = needle.MULTIKEY_ADAPTER.score(scored_item(distractors=["5550123"]), "5550123")
    assert score.correct is False and score.extracted == "5550123"
    assert score.meta == {"needle_class": "wrong_key",
                          "edit_distance": needle.edit_distance("5550123", "4821937")}


def test_a_corrupted_number_keeps_its_edit_distance() -> None:
    score = needle.ADAPTER.score(scored_item(), "4821987")
    assert score.correct is False
    assert score.meta == {"needle_class": "corrupted", "edit_distance": 1}
    short = needle.ADAPTER.score(scored_item(), "It is 482193.")
    assert short.extracted == "482193" and short.meta["edit_distance"] == 1


@pytest.mark.parametrize("answer", ["", "I could not find it.", "<think>maybe 4821937",
                                    "<think>4821937</think>No idea."])
def test_no_answer(answer: str) -> None:
    score = needle.ADAPTER.score(scored_item(), answer)
    assert score.correct is False and score.extracted is None
    assert score.meta == {"needle_class": "no_answer", "edit_distance": None}


def test_prefers_a_seven_digit_number() -> None:
    assert needle.extract_number("Among 3 keys, the number is 4821937.") == "4821937"
    assert needle.extract_number("12 and 345") == "12"


def test_edit_distance() -> None:
    assert needle.edit_distance("1234567", "1234567") == 0
    assert needle.edit_distance("1234567", "1243567") == 2
    assert needle.edit_distance("0.73", "0.83") == 1
    assert needle.edit_distance("", "123") == 3
