"""A reasoning server's reply: the thinking kept in `reasoning`, a null answer kept null."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_server import Behaviour, FakeServer

from kveval.cli.cli import main
from kveval.formats.reader import read_run
from kveval.run.client import parse_reply


def reasoning_answer(body: dict[str, Any]) -> Any:
    prompt = body["messages"][-1]["content"]
    if prompt == "think long":  # the budget ran out while thinking: content null
        return {"content": None, "reasoning_content": "Let me count... 1, 2, 3",
                "finish_reason": "length"}
    if prompt == "say nothing":
        return {"content": "", "reasoning": "Nothing to say."}
    return {"content": "Paris", "reasoning_content": "The capital of France is Paris."}


def run_prompts(tmp_path: Path, server: FakeServer) -> Path:
    prompts = tmp_path / "p.txt"
    prompts.write_text("capital of France\nthink long\nsay nothing\n")
    out = tmp_path / "r.jsonl"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--endpoint", server.base_url, "--task", "prompts", "--prompts",
              str(prompts), "--api", "chat", "-o", str(out)])
    assert exit_info.value.code == 0
    return out


def test_reasoning_is_recorded_and_a_null_answer_stays_null(tmp_path: Path) -> None:
    with FakeServer(Behaviour(answer=reasoning_answer)) as server:
        out = run_prompts(tmp_path, server)
    items = {item.request["messages"][-1]["content"]: item for item in read_run(out).items}
    assert (items["capital of France"].output, items["capital of France"].reasoning) == (
        "Paris", "The capital of France is Paris.")
    long = items["think long"]
    assert long.ok and long.output is None and long.finish_reason == "length"
    assert long.reasoning == "Let me count... 1, 2, 3"
    assert items["say nothing"].output == "" and items["say nothing"].reasoning == "Nothing to say."


def chat(message: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"message": message, "finish_reason": "stop"}]}


def test_parse_reply_tells_null_from_empty_and_rejects_other_types() -> None:
    assert parse_reply(chat({"content": None}), 0.1).text is None
    assert parse_reply(chat({"content": None}), 0.1).error is None
    assert parse_reply(chat({"content": ""}), 0.1).text == ""
    assert parse_reply(chat({"content": "a", "reasoning": "b"}), 0.1).reasoning == "b"
    assert parse_reply(chat({"content": ["part"]}), 0.1).error.startswith("malformed response")
    assert parse_reply(chat({"content": "a", "reasoning_content": 7}), 0.1).error is not None
    assert parse_reply({"choices": []}, 0.1).error.startswith("malformed response")
    completion = {"choices": [{"text": "x", "finish_reason": "stop"}]}
    reply = parse_reply(completion, 0.1)
    assert (reply.text, reply.reasoning) == ("x", None)
