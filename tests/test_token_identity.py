"""Two token ids of one text at one position: on every path that lists ids apart (chat
`top_logprobs`, llama-server's `n_probs`, vLLM's `prompt_logprobs`, SGLang's /generate) the
text's entry holds their summed probability, so a run that splits a text's mass over two ids
and one that holds it on one read as the same distribution (KL 0), and the record keeps each
text once."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from fake_engines import DUP, ToyModel, llama_server, sglang, vllm
from fake_server import Behaviour, FakeServer
from hypothesis import given
from hypothesis import strategies as st
from test_logprobs_cli import ANSWER, BASE_TOP, PROMPTS, TOKENS, run, serve

from kveval.formats.checks import logprobs_problem
from kveval.formats.reader import read_run
from kveval.run.logprobs import compact, outcomes
from tests.clirun import kveval

SPLIT = {"x": 0.6, "y": 0.15, "y" + DUP: 0.15}  # "y"'s 0.3 of BASE_TOP over two ids
HALF = math.log(0.15)


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(f"Name three colours, take {i}." for i in range(PROMPTS)) + "\n")
    return path


@pytest.fixture
def baselines(capsys: Any, prompts: Path, tmp_path: Path) -> dict[str, Path]:
    """Chat and completions baselines holding "y" at 0.3 on one id."""
    paths = {"chat": tmp_path / "chat.jsonl", "completions": tmp_path / "completions.jsonl"}
    with serve(BASE_TOP) as server:
        assert run(capsys, server, prompts, paths["chat"], "--logprobs", "2")[0] == 0
        assert run(capsys, server, prompts, paths["completions"], "--logprobs", "2",
                   "--api", "completions")[0] == 0
    return paths


def kl_mean(capsys: Any, base: Path, other: Path) -> float:
    code, text, err = kveval(capsys, "compare", str(base), str(other), "--json")
    assert code == 0, err
    return float(json.loads(text)["tasks"][0]["divergence"]["kl_mean"])


def assert_summed(path: Path) -> None:
    """Every position lists "y" once, at the two ids' summed probability."""
    for item in read_run(path).items:
        for tokens, values in zip(item.logprobs["top_tokens"], item.logprobs["top_logprobs"],
                                  strict=True):
            assert tokens.count("y") == 1
            assert values[tokens.index("y")] == pytest.approx(math.log(0.3), rel=1e-12)


@pytest.mark.parametrize(("make", "base"), [(llama_server, "chat"), (vllm, "completions"),
                                            (sglang, "completions")])
def test_forced_paths_sum_two_ids_of_one_text(capsys: Any, baselines: dict[str, Path],
                                              tmp_path: Path, make: Any, base: str) -> None:
    out = tmp_path / "tf.jsonl"
    model = ToyModel(TOKENS, SPLIT)
    with make(model, **({"slots": 2} if make is llama_server else {})) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force",
                              str(baselines[base]), "--logprobs", "3", "-o", str(out))
    assert code == 0, err
    assert_summed(out)
    assert kl_mean(capsys, baselines[base], out) == pytest.approx(0.0, abs=1e-12)


def duplicated_chat(body: dict[str, Any], text: str) -> Any:
    """Chat `logprobs.content`: each answer token first, then "y" listed twice (two ids)."""
    return {"content": [{"token": tok, "logprob": math.log(0.6), "top_logprobs": [
        {"token": tok, "logprob": math.log(0.6)}, {"token": "y", "logprob": HALF},
        {"token": "y", "logprob": HALF}]} for tok in TOKENS]}


def test_free_running_chat_sums_two_ids_of_one_text(capsys: Any, baselines: dict[str, Path],
                                                    prompts: Path, tmp_path: Path) -> None:
    out = tmp_path / "dup.jsonl"
    with FakeServer(Behaviour(answer=lambda body: ANSWER, logprobs=duplicated_chat)) as server:
        code, _, err = run(capsys, server, prompts, out, "--logprobs", "3")
    assert code == 0, err
    assert_summed(out)
    assert kl_mean(capsys, baselines["chat"], out) == pytest.approx(0.0, abs=1e-12)


pairs = st.lists(st.tuples(st.sampled_from(["a", "b", " c", ""]),
                           st.floats(min_value=-30, max_value=0)), max_size=12)


@given(pairs)
def test_each_text_once_holding_its_ids_mass(listed: list[tuple[str, float]]) -> None:
    found = outcomes(listed)
    assert set(found) == {text for text, _ in listed}
    for text, value in found.items():
        mass = math.fsum(math.exp(v) for t, v in listed if t == text)
        assert math.exp(value) == pytest.approx(mass, rel=1e-9)


@given(st.lists(st.floats(min_value=1e-6, max_value=1.0), min_size=1, max_size=8),
       st.lists(st.sampled_from(["a", "b", "c"]), min_size=8, max_size=8))
def test_a_record_of_a_softmax_is_always_readable(weights: list[float], texts: list[str]) -> None:
    """Ids of one softmax, listed by text in any grouping: the record keeps each text once and
    its top-K never sums above 1, so the reader takes it."""
    probs = [w / sum(weights) for w in weights]
    listed = [{"token": t, "logprob": math.log(p)} for t, p in zip(texts, probs, strict=False)]
    record = compact({"content": [{"token": listed[0]["token"], "logprob": listed[0]["logprob"],
                                   "top_logprobs": listed}]}, 8)
    assert logprobs_problem(record) is None
