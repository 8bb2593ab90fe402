"""The mrcr adapter: the conversation, the asked order, pinned prompts and openai/mrcr's grade."""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher

import pytest
from test_needle import word_counter

from kveval.adapters import ADAPTERS, mrcr
from kveval.adapters.base import BuildContext, Item, Message, TaskSpec
from kveval.errors import UsageError

PARAMS = {"lengths": [1024, 2048], "depths": [10, 90], "trials": 1}


def build(**params: object) -> list[Item]:
    spec = TaskSpec(name="mrcr", adapter="mrcr", api="chat", max_tokens=160,
                    params={**PARAMS, **params})
    return ADAPTERS["mrcr"].build(spec, BuildContext(count_tokens=word_counter))


def test_conversation_shape_and_size() -> None:
    items = build()
    assert [i.item_id for i in items] == ["mrcr/L1024/D10/T0", "mrcr/L1024/D90/T0",
                                          "mrcr/L2048/D10/T0", "mrcr/L2048/D90/T0"]
    for item in items:
        messages = item.messages or ()
        roles = [m["role"] for m in messages]
        assert roles == ["user", "assistant"] * (len(messages) // 2) + ["user"]
        meta = item.meta
        assert 0.98 * meta["target_tokens"] <= meta["measured_tokens"] <= meta["target_tokens"]
        assert meta["asks"] == len(messages) // 2 and len(meta["prefix"]) == 10


def test_the_final_ask_names_the_reference_by_order() -> None:
    for item in build():
        messages = item.messages or ()
        ask = re.match(r"Prepend (\w+) to the (\d+)(st|nd|rd|th) (\w+) about (\w+)\.",
                       messages[-1]["content"])
        assert ask is not None
        prefix, order, _, form, topic = ask.groups()
        pieces = [messages[i + 1]["content"] for i in range(0, len(messages) - 1, 2)
                  if messages[i]["content"] == f"Write a {form} about {topic}."]
        assert len(pieces) == mrcr.DEFAULT_NEEDLES and len(set(pieces)) == len(pieces)
        assert pieces[int(order) - 1] == item.reference and prefix == item.meta["prefix"]
        assert sorted(item.meta["siblings"] + [item.reference]) == sorted(pieces)


def test_depth_moves_the_asked_piece() -> None:
    positions = {i.meta["depth"]: i.meta["position"] for i in build(lengths=[2048])}
    assert positions[10] < 0.25 < 0.75 < positions[90]


def test_prompts_are_pinned() -> None:
    found = {i.item_id: i.prompt_sha256 for i in build()}
    assert found["mrcr/L1024/D10/T0"] == \
        "0f0b1b076afbacb8bd784317772e5d74d938974668d54ab7cd360af3dc50ebd5"
    assert found["mrcr/L2048/D90/T0"] == \
        "0cb8a5b8dc118789e5cc444afbb2536acb6acfae86f75c10b8cd06b6bd3e4eb7"


def test_longer_conversations_start_as_shorter_ones() -> None:
    combos = mrcr.filler_combos("s", 50, ("poem", "tapirs"))
    assert mrcr.filler_combos("s", 2000, ("poem", "tapirs"))[:50] == combos
    assert ("poem", "tapirs") not in combos


@pytest.mark.parametrize("needles", [0, 17, "4", True])
def test_bad_needles(needles: object) -> None:
    with pytest.raises(UsageError, match="needles"):
        build(needles=needles)


def test_ordinals() -> None:
    assert [mrcr.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)] == \
        ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]


# ---------------------------------------------------------------- scoring

PIECE = "The quiet river stood near the orchard.\nThe baker carried the lantern slowly."
SIBLING = "A tired courier waited beside the mill.\nThe potter swept the attic at noon."


def score(output: str) -> dict[str, object]:
    item = Item(task="mrcr", item_id="x", reference=PIECE,
                meta={"prefix": "7kq2LmX9aB", "siblings": [SIBLING]})
    found = mrcr.ADAPTER.score(item, output)
    return {"correct": found.correct, **found.meta}


def test_exact_piece_with_prefix() -> None:
    assert score("7kq2LmX9aB" + PIECE) == {"correct": True, "score": 1.0, "mrcr_class": "exact"}
    assert score("<think>the 2nd</think> 7kq2LmX9aB\n" + PIECE + "\n")["correct"] is True


def test_missing_prefix_scores_zero() -> None:
    assert score(PIECE) == {"correct": False, "score": 0.0, "mrcr_class": "no_prefix"}
    assert score("7kq2LmX9ab" + PIECE)["score"] == 0.0


def test_wrong_piece_and_partial() -> None:
    wrong = score("7kq2LmX9aB" + SIBLING)
    assert wrong["mrcr_class"] == "wrong_piece" and wrong["correct"] is False
    assert wrong["score"] == pytest.approx(SequenceMatcher(None, SIBLING, PIECE).ratio(), abs=1e-6)
    partial = score("7kq2LmX9aB" + PIECE.replace("lantern", "kettle"))
    assert partial["mrcr_class"] == "partial" and 0.9 < float(str(partial["score"])) < 1.0


def test_grade_is_openai_mrcr_grade() -> None:
    """openai/mrcr: 0 without the prefix; else SequenceMatcher(None, rest, answer).ratio()."""
    for response in ("pfx" + PIECE[:30], "pfx" + SIBLING, "pfx", "nope"):
        expected = 0.0 if not response.startswith("pfx") else \
            SequenceMatcher(None, response.removeprefix("pfx"), PIECE).ratio()
        assert mrcr.grade(response, "pfx", PIECE) == expected


def test_a_costly_turn_is_topped_up_word_by_word() -> None:
    """A template that charges 20 tokens a message makes each new turn jump past the 2%
    window; the last filler piece then takes words of the next sentences."""
    def costly(messages: Sequence[Message]) -> int:
        return word_counter(messages) + 20 * len(messages)

    spec = TaskSpec(name="mrcr", adapter="mrcr", api="chat", max_tokens=160,
                    params={"lengths": [1024, 1536, 2048], "depths": [10, 50, 90], "trials": 2})
    items = ADAPTERS["mrcr"].build(spec, BuildContext(count_tokens=costly))
    assert any(i.meta["filler_words"] for i in items)
    for item in items:
        meta = item.meta
        assert 0.98 * meta["target_tokens"] <= meta["measured_tokens"] <= meta["target_tokens"]
        assert meta["measured_tokens"] == costly(item.messages or ())
        assert item.reference in [m["content"] for m in item.messages or ()]
