"""The evidence adapter: similar records, the asked one at its depth, answer classes."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import pytest

from kveval.adapters import ADAPTERS, evidence
from kveval.adapters.base import BuildContext, Item, Message, TaskSpec
from kveval.errors import UsageError

_TOKEN = re.compile(r"\w+|[^\w\s]")


def word_counter(messages: Sequence[Message]) -> int:
    return sum(5 + len(_TOKEN.findall(m["content"])) for m in messages) + 3


def spec(**params: object) -> TaskSpec:
    return TaskSpec(name="evidence", adapter="evidence", api="chat", max_tokens=32,
                    params=params)


def build(max_context: int | None = None, **params: object) -> list[Item]:
    ctx = BuildContext(count_tokens=word_counter, max_context=max_context)
    return evidence.ADAPTER.build(spec(**params), ctx)


def content(item: Item) -> str:
    assert item.messages is not None
    return item.messages[-1]["content"]


def document(item: Item) -> str:
    return content(item).split("<document>\n", 1)[1].split("\n</document>", 1)[0]


def test_registered() -> None:
    assert ADAPTERS["evidence"] is evidence.ADAPTER


def test_grid_ids_and_meta() -> None:
    items = build(lengths=[1024, 4096])
    assert len(items) == 2 * 7 * 3 and len({i.item_id for i in items}) == len(items)
    assert items[0].item_id == "evidence/L1024/D0/T0"
    for item in items:
        meta = item.meta
        assert {"target_tokens", "measured_tokens", "depth", "trial", "variant"} <= set(meta)
        assert 0.98 * meta["target_tokens"] <= meta["measured_tokens"] <= meta["target_tokens"]
        assert meta["variant"] == ("ordinal", "code")[meta["trial"] % 2]


def test_records_appear_once_in_order_with_their_values() -> None:
    for item in build(lengths=[2048], depths=[0, 50, 100], trials=2):
        doc, values = document(item), item.meta["values"]
        assert len(values) == item.meta["records"] == 10
        found = re.findall(r"0\.\d{4}", doc)
        assert found == values  # each value once, in document order
        ordinals = re.findall(r"(?i)the (\S+) experiment", doc)
        assert ordinals == list(evidence.ORDINALS[:10])
        assert item.reference == values[item.meta["record"] - 1]
        assert re.findall(r"\d", content(item).replace(doc, "")) == []  # no digits elsewhere


def test_the_asked_record_sits_at_its_depth() -> None:
    for item in build(lengths=[4096], depths=[0, 25, 50, 75, 100], trials=1):
        assert item.meta["position"] == pytest.approx(item.meta["depth"] / 100, abs=0.01)


def test_questions_by_ordinal_and_by_code() -> None:
    by_ordinal, by_code = build(lengths=[1024], depths=[50], trials=2)
    assert content(by_ordinal).endswith(
        f"What value did the {by_ordinal.meta['ordinal']} experiment measure? "
        "Answer with the number only.")
    assert content(by_code).endswith(
        f"What value did the experiment with code {by_code.meta['code']} measure? "
        "Answer with the number only.")
    assert document(by_code).count(by_code.meta["code"]) == 1
    only_codes = build(lengths=[1024], depths=[50], trials=2, ask=["code"])
    assert {i.meta["variant"] for i in only_codes} == {"code"}


def test_values_share_leading_digits_and_differ_in_one_or_two() -> None:
    for seed in range(50):
        values = evidence.record_values(random.Random(seed), 12)
        assert len(set(values)) == 12
        assert all(re.fullmatch(r"0\.[1-9]\d\d[1-9]", v) for v in values)
        assert len({v[:3] for v in values}) == 1  # "0.d" shared
        for a in values:
            assert min(sum(x != y for x, y in zip(a, b, strict=True))
                       for b in values if b != a) <= 2  # close neighbours exist


def test_same_seed_same_prompts() -> None:
    first = build(lengths=[1024], depths=[10, 90], trials=2)
    again = build(lengths=[1024], depths=[10, 90], trials=2)
    assert [i.prompt_sha256 for i in first] == [i.prompt_sha256 for i in again]


def test_lengths_above_the_limit_are_skipped() -> None:
    items = build(max_context=2048, lengths=[1024, 2048], depths=[0], trials=1)
    assert [i.meta["target_tokens"] for i in items] == [1024]
    ctx = BuildContext(max_context=2048)
    assert evidence.skipped_lengths(spec(lengths=[1024, 2048]), ctx) == [2048]


@pytest.mark.parametrize("params", [{"records": 1}, {"records": 99}, {"ask": ["name"]},
                                    {"ask": []}])
def test_bad_params(params: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        evidence.ADAPTER.build(spec(lengths=[1024], **params),
                               BuildContext(count_tokens=word_counter))


# ---------------------------------------------------------------- scoring

VALUES = ["0.7342", "0.7352", "0.7312", "0.7842"]


def item(value: str = "0.7342") -> Item:
    return Item(task="evidence", item_id="evidence/L1024/D0/T0", reference=value,
                meta={"values": VALUES})


@pytest.mark.parametrize("answer", ["0.7342", ".7342", "0,7342", "The value was 0.73420.",
                                    "<think>Was it 0.7352? No.</think>0.7342",
                                    "The third experiment measured 0.7342."])
def test_exact(answer: str) -> None:
    score = evidence.ADAPTER.score(item(), answer)
    assert score.correct is True and score.extracted == "0.7342"
    assert score.meta == {"evidence_class": "exact", "edit_distance": 0}


def test_wrong_record() -> None:
    score = evidence.ADAPTER.score(item(), "0.7352")
    assert score.correct is False and score.extracted == "0.7352"
    assert score.meta == {"evidence_class": "wrong_record", "edit_distance": 1}


def test_corrupted_keeps_the_digit_edit_distance() -> None:
    score = evidence.ADAPTER.score(item(), "0.8342")
    assert score.correct is False
    assert score.meta == {"evidence_class": "corrupted", "edit_distance": 1}
    assert evidence.ADAPTER.score(item(), "0.7324").meta == {"evidence_class": "corrupted",
                                                             "edit_distance": 2}
    assert evidence.ADAPTER.score(item(), "7342").meta["evidence_class"] == "corrupted"


@pytest.mark.parametrize("answer", ["", "I cannot tell.", "<think>0.7342"])
def test_no_answer(answer: str) -> None:
    score = evidence.ADAPTER.score(item(), answer)
    assert score.correct is False and score.extracted is None
    assert score.meta == {"evidence_class": "no_answer", "edit_distance": None}


def test_extract_prefers_a_decimal_number() -> None:
    assert evidence.extract_value("Experiment 3 measured 0.7342") == "0.7342"
    assert evidence.extract_value("It was 12") == "12"
