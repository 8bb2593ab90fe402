"""Servers' log-probability shapes -> the compact record, and the echoed answer's slice."""

from __future__ import annotations

import pytest

from kveval.run.logprobs import answer_logprobs, compact, request_keys


def test_chat_content_shape() -> None:
    content = [{"token": "Hi", "logprob": -0.123456, "bytes": [72, 105],
                "top_logprobs": [{"token": "Hello", "logprob": -2.5},
                                 {"token": "Hi", "logprob": -0.123456},
                                 {"token": "Hey", "logprob": -3.0}]}]
    got = compact({"content": content}, 2)
    assert got == {"k": 2, "tokens": ["Hi"], "logprobs": [-0.123456],  # full precision
                   "top_tokens": [["Hi", "Hello"]], "top_logprobs": [[-0.123456, -2.5]]}


def test_a_tiny_log_probability_is_not_rounded_to_zero() -> None:
    """4 decimals read -0.00004 as 0: the KL bound then saw probability 1 for the top-1."""
    got = compact({"content": [{"token": "a", "logprob": -4e-05, "top_logprobs": [
        {"token": "a", "logprob": -4e-05}, {"token": "b", "logprob": -10.5}]}]}, 2)
    assert got is not None and got["logprobs"] == [-4e-05]
    assert got["top_logprobs"] == [[-4e-05, -10.5]]


def test_a_nan_log_probability_is_malformed() -> None:
    with pytest.raises(ValueError):
        compact({"content": [{"token": "a", "logprob": float("nan"), "top_logprobs": []}]}, 1)


def test_legacy_shape_with_dicts_and_a_null_first_position() -> None:
    data = {"tokens": ["The", " cat"], "token_logprobs": [None, -1.0],
            "top_logprobs": [None, {" cat": -1.0, " dog": -0.5}], "text_offset": [0, 3]}
    got = compact(data, 5)
    assert got is not None
    assert got["tokens"] == [" cat"]  # no log-probability for the first: dropped
    assert got["top_tokens"] == [[" dog", " cat"]]


def test_absent_and_unknown_shapes() -> None:
    assert compact(None, 5) is None
    with pytest.raises(ValueError):
        compact({"something": []}, 5)


def test_minus_infinity_is_a_finite_number() -> None:
    got = compact({"content": [{"token": "a", "logprob": float("-inf"), "top_logprobs": []}]}, 1)
    assert got is not None and got["logprobs"] == [-9999.0]


def test_request_keys() -> None:
    assert request_keys(True, 5) == {"logprobs": True, "top_logprobs": 5}
    assert request_keys(False, 5) == {"logprobs": 5}


PROMPT = "Q: 1+1?\nA:"
ANSWER = " 2."


def echo(shifted: bool) -> dict:
    """An echo of PROMPT (two tokens) + ANSWER + one generated token "\\n", with each
    position's own distribution, or (shifted) llama-cpp-python's without a BOS token: each
    position holds the next position's distribution, the first nulled."""
    own = [None, {"\nA:": -1.0}, {" 2": -0.1, " 3": -2.5}, {".": -0.2, "!": -1.8},
           {"\n": -0.05, " ": -3.0}]
    tokens = ["Q: 1+1?", "\nA:", " 2", ".", "\n"]
    offsets = [0, 7, len(PROMPT), len(PROMPT) + 2, len(PROMPT) + 3]
    if not shifted:
        lps = [None, -1.0, -0.1, -0.2, -0.05]
        return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": own,
                "text_offset": offsets}
    moved = [None, own[2], own[3], own[4], {"x": -0.01}]
    return {"tokens": tokens, "token_logprobs": [None, -9.0, -9.0, -9.0, -9.0],
            "top_logprobs": moved, "text_offset": offsets}


@pytest.mark.parametrize("shifted", [False, True])
def test_answer_slice_is_aligned_either_way(shifted: bool) -> None:
    got = answer_logprobs(echo(shifted), ANSWER, "\n", 2)
    assert got["tokens"] == [" 2", "."]
    assert got["top_tokens"] == [[" 2", " 3"], [".", "!"]]
    assert got["logprobs"] == [-0.1, -0.2]


def test_an_echo_that_cannot_be_aligned_is_an_error() -> None:
    data = echo(False)
    data["top_logprobs"] = [None] + [{"other": -0.01}] * 4
    with pytest.raises(ValueError, match="align"):
        answer_logprobs(data, ANSWER, "\n", 2)


def test_offsets_are_anchored_at_the_end() -> None:
    # llama-cpp-python: a chat template's special tokens take no characters in its offsets
    data = echo(False)
    data["text_offset"] = [o - 5 for o in data["text_offset"]]
    assert answer_logprobs(data, ANSWER, "\n", 2)["tokens"] == [" 2", "."]
    data = echo(False)  # the generated token left out of the list (llama-cpp-python)
    for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        data[key] = data[key][:-1]
    assert answer_logprobs(data, ANSWER, "\n", 2)["tokens"] == [" 2", "."]


def test_an_echo_without_prompt_positions_is_an_error() -> None:
    only_generated = {"tokens": ["\n"], "token_logprobs": [-0.1],
                      "top_logprobs": [{"\n": -0.1}]}
    with pytest.raises(ValueError, match="echo"):
        answer_logprobs(only_generated, ANSWER, "\n", 2)


def test_tokens_that_do_not_spell_the_answer_are_an_error() -> None:
    with pytest.raises(ValueError, match="spell"):
        answer_logprobs(echo(False), " 3.", "\n", 2)
