"""The copy adapter: its grid, sizing, pinned prompts, answer budget and scorer."""

from __future__ import annotations

import pytest
from test_needle import word_counter

from kveval.adapters import ADAPTERS, copy
from kveval.adapters.base import BuildContext, Item, TaskSpec
from kveval.errors import UsageError

PARAMS = {"lengths": [1024, 2048], "copy_lengths": [64, 256], "depths": [10, 90], "trials": 1}


def spec(max_tokens: int = 2048, **params: object) -> TaskSpec:
    return TaskSpec(name="copy", adapter="copy", api="chat", max_tokens=max_tokens,
                    params={**PARAMS, **params})


def build(max_context: int | None = None, **params: object) -> list[Item]:
    ctx = BuildContext(count_tokens=word_counter, max_context=max_context)
    return ADAPTERS["copy"].build(spec(**params), ctx)


def test_grid_ids_and_sizes() -> None:
    items = build()
    assert ADAPTERS["copy"] is copy.ADAPTER
    assert len(items) == 2 * 2 * 2
    assert "copy/L2048/P256/D90/T0" in {i.item_id for i in items}
    for item in items:
        meta = item.meta
        assert 0.98 * meta["target_tokens"] <= meta["measured_tokens"] <= meta["target_tokens"]
        assert 0.7 * meta["copy_tokens"] <= meta["passage_tokens"] <= meta["copy_tokens"]
        assert item.max_tokens == int(meta["passage_tokens"] * 1.25 + 0.999) + 32


def test_the_asked_paragraph_is_the_reference_at_its_depth() -> None:
    for item in build():
        text = (item.messages or ())[0]["content"]
        number = item.meta["paragraph"]
        assert f"Copy paragraph {number} of the document" in text
        assert f"[{number}] {item.reference}\n" in text
        assert item.meta["position"] < 0.3 if item.meta["depth"] == 10 else \
            item.meta["position"] > 0.7
        assert not any(c.isdigit() for c in item.reference or "")


def test_prompts_are_pinned() -> None:
    """The same prompts on every machine and run: these hashes must never drift."""
    found = {i.item_id: i.prompt_sha256 for i in build()}
    assert found["copy/L1024/P64/D10/T0"] == \
        "440447255f14d5747f544cb388b2f9ceba389069af66fdce195c80686dafef10"
    assert found["copy/L2048/P256/D90/T0"] == \
        "25c190d57e7401c6c07867b89571fae6a729c6e7fcef6342280cd879227aa475"
    assert [i.prompt_sha256 for i in build()] == list(found.values())


def test_answer_budget_is_capped_and_long_cells_are_skipped() -> None:
    capped = build(max_tokens=100)
    assert max(i.max_tokens or 0 for i in capped) == 100
    items = build(max_context=2048 + 200)
    assert {(i.meta["target_tokens"], i.meta["copy_tokens"]) for i in items} == \
        {(1024, 64), (1024, 256), (2048, 64)}
    assert copy.ADAPTER.skipped_lengths(spec(), BuildContext(max_context=1200)) == [2048]


@pytest.mark.parametrize("value", ["lots", [], [64, "x"], True])
def test_bad_copy_lengths(value: object) -> None:
    with pytest.raises(UsageError, match="copy_lengths|lots|x"):
        build(copy_lengths=value)


# ---------------------------------------------------------------- scoring

PASSAGE = ("The quiet river stood near the orchard at noon. The baker carried the rusty "
           "lantern slowly. It was said that the map was wrong.")


def score(output: str) -> dict[str, object]:
    item = Item(task="copy", item_id="x", reference=PASSAGE, meta={"paragraph": 7})
    found = copy.ADAPTER.score(item, output)
    return {"correct": found.correct, **found.meta}


def test_exact_copy() -> None:
    found = score(PASSAGE)
    assert found["correct"] is True and found["score"] == 1.0
    assert found["first_error_word"] is None and found["substituted_words"] == 0


def test_exact_copy_with_its_label_thinking_and_other_whitespace() -> None:
    output = "<think>find it</think>\n[7] " + PASSAGE.replace(" ", "\n", 3) + "\n"
    assert score(output)["correct"] is True
    assert score("Paragraph 7: " + PASSAGE)["correct"] is True


def test_one_substituted_word() -> None:
    found = score(PASSAGE.replace("rusty", "dusty"))
    assert found["correct"] is False
    assert found["substituted_words"] == 1 and found["missing_words"] == 0
    assert found["first_error_word"] == PASSAGE.split().index("rusty")
    words = len(PASSAGE.split())
    assert found["similarity"] == pytest.approx((2 * words - 2) / (2 * words), abs=1e-6)


def test_cut_short_and_padded_answers() -> None:
    words = PASSAGE.split()
    short = score(" ".join(words[:10]))
    assert short["missing_words"] == len(words) - 10 and short["first_error_word"] == 10
    padded = score(PASSAGE + " Hope this helps.")
    assert padded["extra_words"] == 3 and padded["correct"] is False
    assert score("")["score"] == 0.0


def test_rollout_suite_and_builtin_specs_have_both_tasks() -> None:
    from kveval.run.tasks import builtin_names, builtin_spec, load_suite

    assert {"copy", "mrcr"} <= set(builtin_names())
    assert builtin_spec("copy").params["copy_lengths"] == [64, 512]
    suite = {s.name: s for s in load_suite("tasks/rollout.toml")}
    assert suite["copy"].api == suite["mrcr"].api == "chat"
    assert max(suite["mrcr"].params["lengths"]) <= 32768
