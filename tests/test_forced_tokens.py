"""Matching a baseline's recorded answer tokens to the server's own tokens."""

from __future__ import annotations

from kveval.run.forcing.token_ids import recorded_tokens, same_tokens


def test_held_back_text_is_the_same_tokens() -> None:
    """llama-server sends " <<" with the next token while it could begin a stop string."""
    assert same_tokens([" =", " <<", "2", "*"], [" =", "", " <<2", "*"])
    assert same_tokens(["a", "b"], ["a", "b"])


def test_another_split_or_text_is_not() -> None:
    assert not same_tokens(["\n\n"], ["\n", "\n"])
    assert not same_tokens(["re", "d"], ["red", ""])  # the recorded text runs ahead
    assert not same_tokens(["a", "b"], ["a", "c"])
    assert not same_tokens(["a", "b"], ["", "a"])  # held back but never caught up


def test_the_top_1s_are_the_tokens_where_they_spell_the_answer() -> None:
    logprobs = {"tokens": [" =", "", " <<2", ""], "logprobs": [-0.1] * 4,
                "top_tokens": [[" =", "x"], [" <<", " "], ["2", "3"], ["", "x"]],
                "top_logprobs": [[-0.1, -2.0]] * 4}
    assert recorded_tokens(logprobs, " = <<2") == [" =", " <<", "2"]  # the EOS left out


def test_else_the_recorded_texts_and_none_when_nothing_spells_it() -> None:
    logprobs = {"tokens": ["a", "b"], "top_tokens": [["x"], ["y"]]}
    assert recorded_tokens(logprobs, "ab") == ["a", "b"]
    assert recorded_tokens(logprobs, "abc") is None
    assert recorded_tokens(None, "ab") is None
    assert recorded_tokens({"tokens": [1, 2]}, "ab") is None
