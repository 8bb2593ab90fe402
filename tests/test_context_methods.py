"""The context task on every forcing method, over the fake servers of tests/fake_engines.py:
vLLM and SGLang score a document in one request (plus the pre-flight's two tokens), llama-server
one request per position on one slot, each with the forced token biased to be the one
generated; every run records the same positions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_engines import ToyModel, llama_server, sglang, vllm

from kveval.formats.reader import read_run
from tests.clirun import kveval

TOKENS = ["The", " answer", " is", " 42"]
TOP = {"x": 0.6, "y": 0.25, "z": 0.1}
DOC = " ".join(["alpha", "beta", "gamma", "delta"] * 30)  # 120 words: 121 toy tokens with BOS


def run_context(capsys: Any, tmp_path: Path, server: Any, name: str) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "doc.txt").write_text(DOC)
    suite = tmp_path / "suite.toml"
    suite.write_text(f'[[task]]\nname = "context"\ndata = "{docs}"\nlengths = [16, 32, 64]\n')
    out = tmp_path / f"{name}.jsonl"
    code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--suite", str(suite),
                          "-o", str(out))
    assert code == 0, err
    return out


@pytest.mark.parametrize(("make", "method", "path"), [
    (vllm, "prompt_logprobs", "/v1/completions"),
    (sglang, "sglang_generate", "/generate"),
])
def test_one_request_a_document_where_the_server_scores_prompts(
        capsys: Any, tmp_path: Path, make: Callable[..., Any], method: str, path: str) -> None:
    model = ToyModel(TOKENS, TOP)
    with make(model) as server:
        out = run_context(capsys, tmp_path, server, method)
    item = read_run(str(out)).items[0]
    assert item.meta["teacher_forced"]["method"] == method
    assert item.meta["teacher_forced"]["positions"] == 63 == len(item.logprobs["tokens"])
    scoring = [body for p, body in model.calls if p == path]
    assert [len(b.get("prompt") or b.get("input_ids")) for b in scoring] == [2, 64]  # probe, run


def test_llama_server_forces_a_document_position_by_position_on_one_slot(
        capsys: Any, tmp_path: Path) -> None:
    model = ToyModel(TOKENS, TOP)
    with llama_server(model, slots=2) as server:
        out = run_context(capsys, tmp_path, server, "llama")
    item = read_run(str(out)).items[0]
    assert item.meta["teacher_forced"]["method"] == "forced_decoding"
    decodes = [b for p, b in model.calls if p == "/completion" and "n_probs" in b]
    run = decodes[1:]  # after the pre-flight's longest position
    assert [len(b["prompt"]) for b in run] == list(range(1, 64))
    assert len({b["id_slot"] for b in run}) == 1
    assert all(b["logit_bias"] == [[doc_id, 1000.0]] for b, doc_id in
               zip(run, model.tokenize(DOC, True)[1:64], strict=False))


def test_every_method_forces_the_same_token_texts(capsys: Any, tmp_path: Path) -> None:
    texts = []
    for make, name in ((vllm, "v"), (sglang, "s"), (llama_server, "l")):
        with make(ToyModel(TOKENS, TOP)) as server:
            texts.append(read_run(str(run_context(capsys, tmp_path, server, name)))
                         .items[0].logprobs["tokens"])
    assert texts[0] == texts[1] == texts[2] and len(texts[0]) == 63
