"""GSM8K extraction and prompt building: pure functions, no server."""

from __future__ import annotations

import pytest

from kveval.adapters.base import BuildContext, Item
from kveval.adapters.gsm8k import (
    ADAPTER,
    Gsm8kData,
    extract_flexible,
    extract_strict,
    lm_eval_exact,
    same_number,
)
from kveval.adapters.text import strip_thinking
from kveval.run.tasks import builtin_spec, override

TRAIN = [{"question": f"Q{i}?", "answer": f"Work {i}.\n#### {i}"} for i in range(10)]
TEST = [{"question": "How many?", "answer": "2+2=4\n#### 1,000"}]
DATA = Gsm8kData(train=TRAIN, test=TEST, source="memory")


@pytest.mark.parametrize(
    ("output", "flexible", "strict"),
    [
        ("She makes 9 * 2 = $18 every day.\n#### 18", "18", "18"),
        ("The total is $1,000.00.", "1,000.00", None),
        ("#### 1,000", "1,000", "1,000"),
        ("It drops to -7 degrees.\n#### -7", "-7", "-7"),
        ("So the answer is 0.5.", "0.5", None),
        ("The answer is 42.", "42", None),
        ("I cannot tell.", None, None),
        ("<think>maybe 12 or 13</think>The answer is 14", "14", None),
        ("<think>#### 99 is wrong</think>\n#### 7", "7", "7"),
        ("First 3 apples, then 5 pears, so 8 fruits in all.", "8", None),
        ("#### $25", "25", None),
        ("The loss is \u22127 degrees.\n#### \u22127", "-7", "-7"),
        ("#### 5\n#### 6", "6", "5"),
        ("#### 1,000.", "1,000", "1,000."),
    ],
)
def test_extraction_on_tricky_outputs(output: str, flexible: str | None,
                                      strict: str | None) -> None:
    assert extract_flexible(output) == flexible
    assert extract_strict(output) == strict


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [("$1,000.00", "1000", True), ("1000.", "1000", True), ("-3", "-3.0", True),
     ("18", "19", False), (None, "1", False), ("", "0", False), ("1e3", "1000", True)],
)
def test_numbers_compare_as_numbers(a: str | None, b: str, same: bool) -> None:
    assert same_number(a, b) is same


def test_unclosed_thinking_block_is_dropped() -> None:
    assert strip_thinking("Sure. <think>the answer might be 5") == "Sure. "
    assert strip_thinking("reasoning 5</think>Answer: 6") == "Answer: 6"


def test_completion_prompt_has_eight_shots_in_train_order() -> None:
    spec = builtin_spec("gsm8k")
    [item] = ADAPTER.build(spec, BuildContext(data=DATA))
    assert item.prompt is not None and item.messages is None
    shots = item.prompt.split("\n\n")
    assert len(shots) == 9
    for i, shot in enumerate(shots[:8]):
        assert shot == f"Question: Q{i}?\nAnswer: Work {i}.\n#### {i}"
    assert shots[8] == "Question: How many?\nAnswer:"
    assert item.reference == "1000"
    assert item.item_id == "gsm8k/test/0000"


def test_chat_mode_turns_shots_into_user_and_assistant_messages() -> None:
    spec = override(builtin_spec("gsm8k"), api="chat")
    [item] = ADAPTER.build(spec, BuildContext(data=DATA))
    assert item.messages is not None
    roles = [m["role"] for m in item.messages]
    assert roles == ["user", "assistant"] * 8 + ["user"]
    assert item.messages[0]["content"] == "Question: Q0?"
    assert item.messages[1]["content"] == "Answer: Work 0.\n#### 0"


def test_shot_seed_samples_exemplars_reproducibly() -> None:
    spec = override(builtin_spec("gsm8k"), params={"shot_seed": 7})
    first = ADAPTER.build(spec, BuildContext(data=DATA))[0].prompt
    again = ADAPTER.build(spec, BuildContext(data=DATA))[0].prompt
    default = ADAPTER.build(builtin_spec("gsm8k"), BuildContext(data=DATA))[0].prompt
    assert first == again
    assert first != default


def test_score_records_flexible_as_correct_and_strict_beside_it() -> None:
    item = Item(task="gsm8k", item_id="x", prompt="p", reference="1000")
    chatty = ADAPTER.score(item, "So she pays $1,000.")
    assert (chatty.correct, chatty.correct_strict, chatty.extracted) == (True, False, "1,000")
    formatted = ADAPTER.score(item, "#### 1000")
    assert (formatted.correct, formatted.correct_strict) == (True, True)
    wrong = ADAPTER.score(item, "#### 1000\nActually 999")
    assert (wrong.correct, wrong.correct_strict) == (False, True)


@pytest.mark.parametrize(
    ("prediction", "reference", "same"),
    [("18", "18", True), ("1,000.", "1000", True), ("$18", "18", True), ("18.00", "18", False),
     ("-7", "-7", True), ("7", "-7", False), (None, "1", False)],
)
def test_strict_compares_as_lm_eval_exact_match_does(prediction: str | None, reference: str,
                                                     same: bool) -> None:
    assert lm_eval_exact(prediction, reference) is same


def test_strict_is_lm_eval_strict_match_and_flexible_compares_numbers() -> None:
    item = Item(task="gsm8k", item_id="x", prompt="p", reference="18")
    dollars = ADAPTER.score(item, "She makes $18.\n#### $18")
    assert (dollars.correct, dollars.correct_strict) == (True, False)
    decimals = ADAPTER.score(item, "#### 18.00")
    assert (decimals.correct, decimals.correct_strict) == (True, False)
    minus = ADAPTER.score(Item(task="gsm8k", item_id="y", prompt="p", reference="-3"),
                          "It falls by 3.\n#### \u22123")
    assert (minus.correct, minus.correct_strict, minus.extracted) == (True, True, "-3")
