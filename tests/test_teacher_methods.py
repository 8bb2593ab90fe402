"""Teacher forcing by each server's own method, against fakes in llama-server's, vLLM's and
SGLang's documented shapes (tests/fake_engines.py): the method is chosen at pre-flight and
recorded, positions line up with the baseline's tokens, the KL is the scripted one, and items
a method cannot serve are listed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_engines import TEMPLATE, ToyModel, llama_server, sglang, vllm
from fake_server import FakeServer
from test_logprobs_cli import ANSWER, BASE_TOP, KL_MOVED, PROMPTS, TOKENS, run, serve

from kveval.formats.reader import read_run
from tests.clirun import kveval

BASE = {"x": 0.6, "y": 0.3}
MOVED = {"x": 0.5, "y": 0.4}


@pytest.fixture
def baselines(capsys: Any, prompts: Path, tmp_path: Path) -> dict[str, Path]:
    """A chat baseline and a completions baseline, both with --logprobs 2."""
    paths = {"chat": tmp_path / "chat.jsonl", "completions": tmp_path / "completions.jsonl"}
    with serve(BASE_TOP) as server:
        assert run(capsys, server, prompts, paths["chat"], "--logprobs", "2")[0] == 0
        assert run(capsys, server, prompts, paths["completions"], "--logprobs", "2",
                   "--api", "completions")[0] == 0
    return paths


def force(capsys: Any, server: FakeServer, base: Path, out: Path, *extra: str) -> tuple:
    return kveval(capsys, "run", "--endpoint", server.base_url, "--teacher-force", str(base),
                  "--logprobs", "2", "-o", str(out), *extra)


def kl_mean(capsys: Any, base: Path, out: Path) -> float:
    code, text, _ = kveval(capsys, "compare", str(base), str(out), "--json")
    return float(json.loads(text)["tasks"][0]["divergence"]["kl_mean"])


def check_forced(out: Path, base: Path, method: str) -> None:
    run_ = read_run(out)
    assert run_.header.teacher_force is not None
    assert run_.header.teacher_force["method"] == method
    base_items = read_run(base).by_key()
    assert len(run_.items) == PROMPTS
    for item in run_.items:
        assert item.output == ANSWER and item.logprobs["tokens"] == TOKENS
        assert item.finish_reason == base_items[item.key].finish_reason == "stop"
        assert item.prompt_sha256 == base_items[item.key].prompt_sha256
        assert item.meta["teacher_forced"]["tokens"] == "exact"


def test_llama_server_is_forced_decoding_one_slot_per_item(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    model = ToyModel(TOKENS, MOVED)
    out = tmp_path / "tf.jsonl"
    with llama_server(model, slots=3) as server:
        code, _, err = force(capsys, server, baselines["chat"], out, "--concurrency", "8")
    assert code == 0, err
    check_forced(out, baselines["chat"], "forced_decoding")
    assert read_run(out).header.teacher_force["slots"] == 3
    assert kl_mean(capsys, baselines["chat"], out) == pytest.approx(KL_MOVED, rel=1e-6)
    decodes = [body for path, body in model.calls  # not the idle-slot probe's (no n_probs)
               if path == "/completion" and "n_probs" in body]
    assert {body["id_slot"] for body in decodes} <= {0, 1, 2}
    assert all(body["n_predict"] == 1 and body["n_probs"] == 2 and body["temperature"] == 0
               and body["cache_prompt"] is True for body in decodes)
    question = read_run(baselines["chat"]).items[0].request["messages"][-1]["content"]
    prompt = model.tokenize(TEMPLATE.format(question), True)
    answer = [model.id(t) for t in TOKENS]
    mine = [b["prompt"] for b in decodes if b["prompt"][: len(prompt)] == prompt
            and len(b["prompt"]) - len(prompt) <= len(answer)]
    assert sorted(mine, key=len) == [prompt + answer[:i] for i in range(len(answer))]


def test_vllm_is_prompt_logprobs_on_token_ids_chat_and_completions(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    for kind, base in baselines.items():
        model = ToyModel(TOKENS, MOVED)
        out = tmp_path / f"tf-{kind}.jsonl"
        with vllm(model) as server:
            code, _, err = force(capsys, server, base, out)
        assert code == 0, err
        check_forced(out, base, "prompt_logprobs")
        assert kl_mean(capsys, base, out) == pytest.approx(KL_MOVED, rel=1e-6)
        sent = [body for path, body in model.calls if path == "/v1/completions"]
        assert all(isinstance(b["prompt"], list) and b["prompt_logprobs"] == 2 for b in sent)


def test_sglang_forces_completions_items_and_lists_chat_items_it_cannot(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    model = ToyModel(TOKENS, MOVED)
    out = tmp_path / "tf.jsonl"
    with sglang(model) as server:
        code, _, err = force(capsys, server, baselines["completions"], out)
        assert code == 0, err
        check_forced(out, baselines["completions"], "sglang_generate")
        assert kl_mean(capsys, baselines["completions"], out) == pytest.approx(KL_MOVED, 1e-6)
        sent = [body for path, body in model.calls if path == "/generate"]
        assert all(b["return_logprob"] and b["top_logprobs_num"] == 2
                   and b["logprob_start_len"] == len(b["input_ids"]) - len(TOKENS) - 1
                   for b in sent)
        code, _, err = force(capsys, server, baselines["chat"], tmp_path / "tf-chat.jsonl")
    assert code == 2 and "chat template" in err and len(err.strip().splitlines()) == 1


def test_items_a_method_cannot_serve_are_named_and_recorded(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.jsonl"
    chat, plain = (p.read_text().splitlines() for p in baselines.values())
    header = json.loads(chat[0])
    header["tasks"] = header["tasks"] + [{**header["tasks"][0], "name": "plain"}]
    renamed = [json.dumps({**json.loads(line), "task": "plain"}) for line in plain[1:]]
    mixed.write_text("\n".join([json.dumps(header), *chat[1:], *renamed]) + "\n")
    out = tmp_path / "tf.jsonl"
    with sglang(ToyModel(TOKENS, MOVED)) as server:
        code, text, err = force(capsys, server, mixed, out)
    assert code == 0, err
    assert f"prompts: {PROMPTS} item(s) not teacher-forced" in err
    forced = read_run(out)
    chat_ids = [json.loads(line)["item_id"] for line in chat[1:]]
    assert forced.header.teacher_force["unforced"] == {"prompts": {"unservable": chat_ids}}
    assert {item.task for item in forced.items} == {"plain"}
    assert (f"baseline items not teacher-forced: prompts: {PROMPTS} chat items (no chat "
            "template on the server)") in text


def test_every_item_left_out_is_listed_by_reason_and_counted_by_compare(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    """Two empty answers and a failed request: the header lists their ids by reason, the
    run's summary and compare (text and JSON) count them."""
    lines = baselines["chat"].read_text().splitlines()
    items = [json.loads(line) for line in lines[1:]]
    for item in items[:2]:
        item["output"] = ""
    items[2].update(status="error", output=None, error="HTTP 503")
    base = tmp_path / "holes.jsonl"
    base.write_text("\n".join([lines[0], *map(json.dumps, items)]) + "\n")
    out = tmp_path / "tf.jsonl"
    with llama_server(ToyModel(TOKENS, MOVED)) as server:
        code, text, err = force(capsys, server, base, out)
    assert code == 0, err
    listed = read_run(out).header.teacher_force["unforced"]
    assert listed == {"prompts": {"empty": [items[0]["item_id"], items[1]["item_id"]],
                                  "error": [items[2]["item_id"]]}}
    assert len(read_run(out).items) == PROMPTS - 3
    said = ("prompts: 2 empty answers (no token to score), 1 baseline errors")
    assert f"baseline items not teacher-forced: {said}" in text
    code, shown, err = kveval(capsys, "compare", str(base), str(out))
    assert code == 0, err
    assert f"3 baseline item(s) not teacher-forced: {said}" in shown
    code, shown, err = kveval(capsys, "compare", str(base), str(out), "--json")
    assert json.loads(shown)["candidate"]["not_forced"] == {"prompts": {"empty": 2, "error": 1}}


def test_a_baseline_split_the_tokenizer_would_not_make_is_forced_exactly(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    """The baseline generated "re" + "d green blue" pieces; tokenizing the text gives "red":
    each recorded token is tokenized alone, so positions still line up; on vLLM and SGLang,
    whose tokenizers answer no pieces, that is tried first, so an item costs one request."""
    split = ["re", "d", " green", " blue"]
    lines = baselines["chat"].read_text().splitlines()
    items = []
    for line in lines[1:]:
        item = json.loads(line)
        lp = item["logprobs"]
        lp["tokens"] = split
        lp["logprobs"] = [lp["logprobs"][0]] * 4
        lp["top_tokens"] = [[t, "y"] for t in split]
        lp["top_logprobs"] = [lp["top_logprobs"][0]] * 4
        items.append(json.dumps(item))
    base = tmp_path / "split.jsonl"
    base.write_text("\n".join([lines[0], *items]) + "\n")
    chat_sglang = lambda model: sglang(model, chat=True)  # noqa: E731
    for make, method in ((llama_server, "forced_decoding"), (vllm, "prompt_logprobs"),
                         (chat_sglang, "sglang_generate")):
        out = tmp_path / f"{method}.jsonl"
        with make(ToyModel(split, MOVED)) as server:
            code, _, err = force(capsys, server, base, out)
        assert code == 0, err
        for item in read_run(out).items:
            assert item.logprobs["tokens"] == split
            assert item.meta["teacher_forced"]["tokens"] == "exact"
            if method != "forced_decoding":
                assert item.meta["teacher_forced"]["requests"] == 1


def test_a_teacher_forced_copy_of_the_baseline_passes_the_gate(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    """Each forced item carries its answer's own finish_reason, not the scoring request's."""
    out = tmp_path / "tf.jsonl"
    with llama_server(ToyModel(TOKENS, BASE)) as server:
        assert force(capsys, server, baselines["chat"], out)[0] == 0
    noise = tmp_path / "noise.jsonl"
    noise.write_bytes(restarted(baselines["chat"].read_bytes()))
    code, text, err = kveval(capsys, "gate", "--baseline", str(baselines["chat"]),
                             "--candidate", str(out), "--noise", str(noise))
    assert code == 0, text + err
    assert "COLLAPSE" not in text


def restarted(run: bytes) -> bytes:
    """The same answers as another run: a deterministic server restarted (its own header)."""
    head, rest = run.split(b"\n", 1)
    header = json.loads(head)
    header["created"], header["label"] = "2026-01-01T00:00:00+00:00", "restart"
    return json.dumps(header).encode() + b"\n" + rest


def test_a_server_that_fails_the_forced_request_is_one_line(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    model = ToyModel(TOKENS, MOVED)
    with llama_server(model, status_for=lambda body: None) as server:
        server.behaviour.post_routes["/completion"] = lambda body: {"content": "!"}
        code, _, err = force(capsys, server, baselines["chat"], tmp_path / "tf.jsonl")
    assert code == 2 and "cannot teacher-force" in err and "forced_decoding" in err
    said = [line for line in err.strip().splitlines() if not line.startswith("note: ")]
    assert len(said) == 1  # beside the note on the server's slots
    assert not (tmp_path / "tf.jsonl").exists()


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.txt"
    path.write_text("\n".join(f"Name three colours, take {i}." for i in range(PROMPTS)) + "\n")
    return path


def test_a_retokenized_item_is_counted_as_not_forced_at_the_baselines_tokens(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    """Recorded tokens "re" + "d green" + " bl" + "ue": "d green" is two tokens alone, so
    the server's own split is scored; the item is marked and counted."""
    split = ["re", "d green", " bl", "ue"]
    lines = baselines["chat"].read_text().splitlines()
    items = [json.loads(line) for line in lines[1:]]
    lp = items[0]["logprobs"]
    lp["tokens"], lp["top_tokens"] = split, [[t, "y"] for t in split]
    lp["logprobs"], lp["top_logprobs"] = lp["logprobs"][:1] * 4, lp["top_logprobs"][:1] * 4
    base = tmp_path / "split.jsonl"
    base.write_text("\n".join([lines[0], *map(json.dumps, items)]) + "\n")
    out = tmp_path / "tf.jsonl"
    with llama_server(ToyModel(TOKENS, MOVED)) as server:
        code, text, err = force(capsys, server, base, out)
    assert code == 0, err
    assert "prompts: 1 retokenized (compared up to the first token that differs)" in text
    code, shown, err = kveval(capsys, "compare", str(base), str(out), "--json")
    assert json.loads(shown)["candidate"]["not_forced"] == {"prompts": {"retokenized": 1}}


@pytest.mark.parametrize("caches", [True, False])
def test_a_forced_run_says_when_llama_server_copies_its_idle_slots(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path, caches: bool) -> None:
    with llama_server(ToyModel(TOKENS, MOVED), slots=2, idle_cache=caches) as server:
        code, _, err = force(capsys, server, baselines["chat"], tmp_path / "tf.jsonl")
    assert code == 0, err
    assert ("restart it with --no-cache-idle-slots (measured 4.1x" in err) is caches


def test_a_needle_item_is_forced_through_prompt_logprobs_in_one_request(
        capsys: Any, tmp_path: Path) -> None:
    """A long-context chat item (needle at 1k tokens): its prompt goes as token ids with
    prompt_logprobs, the answer's positions are the baseline's, one request."""
    answer = ["The", " number", " is", " 42."]

    def chat(body: dict[str, Any], text: str) -> Any:
        return {"content": [{"token": t, "logprob": -0.5, "top_logprobs": [
            {"token": t, "logprob": -0.5}, {"token": "y", "logprob": -1.2}]} for t in answer]}

    base, out = tmp_path / "needle.jsonl", tmp_path / "tf.jsonl"
    with vllm(ToyModel(answer, {"x": 0.6, "y": 0.3}), answer=lambda b: "".join(answer),
              logprobs=chat) as server:
        code, _, err = kveval(capsys, "run", "--endpoint", server.base_url, "--task", "needle",
                              "--lengths", "1k", "--depths", "50", "--trials", "1",
                              "--logprobs", "2", "-o", str(base))
        assert code == 0, err
        code, _, err = force(capsys, server, base, out)
    assert code == 0, err
    [item] = read_run(out).items
    assert item.meta["teacher_forced"] == {"method": "prompt_logprobs", "tokens": "exact",
                                           "positions": 4, "requests": 1}
    assert item.logprobs["tokens"] == answer
    assert len(read_run(base).items[0].request["messages"][-1]["content"]) > 2000


def test_a_tokenizer_that_refutes_each_token_alone_is_tried_the_other_way_first(
        capsys: Any, baselines: dict[str, Path], tmp_path: Path) -> None:
    """A SentencePiece-like tokenizer spells a text alone with a space before it: each token
    alone gives other ids, the reply shows it, and the text's ids score the item; once the run
    has seen that, later items try the text first and take one request."""
    model = ToyModel(TOKENS, MOVED)
    out = tmp_path / "tf.jsonl"
    with vllm(model) as server:
        plain = server.behaviour.post_routes["/tokenize"]

        def spaced(body: dict[str, Any]) -> Any:
            text = body.get("prompt")
            if isinstance(text, str) and body.get("add_special_tokens") is False \
                    and " " not in text.strip() and not text.startswith(" "):
                return plain({**body, "prompt": " " + text})
            return plain(body)

        server.behaviour.post_routes["/tokenize"] = spaced
        code, _, err = force(capsys, server, baselines["completions"], out,
                             "--concurrency", "1")
    assert code == 0, err
    items = read_run(out).items
    assert all(i.meta["teacher_forced"]["tokens"] == "exact" for i in items)
    requests = [i.meta["teacher_forced"]["requests"] for i in items]
    assert requests[0] == 2 and set(requests[1:]) == {1}
