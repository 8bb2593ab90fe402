"""Fuzz: `kveval run` against a hostile server whose replies hypothesis generates (model
lists, /props, /metrics, completions: wrong types, NaN, huge numbers, deep nesting, control
characters, and the credentials it was sent quoted back), and suite TOMLs with hostile
values. Beside the property of tests/fuzz.py: what `run` writes, kveval reads back."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hostile_server import HostileServer, Script
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kveval import masking
from kveval.formats.reader import read_run
from tests.clirun import kveval
from tests.fuzz import (
    SECRET,
    Deep,
    check,
    dumps,
    hostile,
    log_probabilities,
    numbers,
    spellings,
    text_values,
)

PASSWORD = "pw-fuzz-Secret-77"
ECHO = "@@AUTH@@"  # where a reply quotes the Authorization header it was sent


def answer(value: Any) -> bytes:
    return dumps(value).encode("utf-8", "surrogatepass")


def json_body() -> st.SearchStrategy[bytes]:
    return st.one_of(hostile().map(answer), st.binary(max_size=40),
                     st.just(b'{"unterminated'), st.just(b"[" * 50_000))


def model_lists() -> st.SearchStrategy[tuple[int, bytes]]:
    ids = st.one_of(st.just("m"), st.just(SECRET), st.just(ECHO), text_values())
    entry = st.fixed_dictionaries({"id": ids}, optional={
        "max_model_len": st.one_of(st.integers(), hostile()), "extra": hostile()})
    listed = st.lists(entry, min_size=1, max_size=2).map(
        lambda data: answer({"object": "list", "data": data}))
    return st.one_of(st.tuples(st.just(200), listed), st.tuples(st.just(200), listed),
                     st.tuples(st.sampled_from([200, 401, 500]), json_body()))


def legacy_logprobs() -> st.SearchStrategy[Any]:
    """The legacy parallel lists: mostly of one length with log-probabilities, sometimes
    anything."""
    token = st.one_of(st.just("a"), text_values())

    def shaped(n: int) -> st.SearchStrategy[Any]:
        return st.fixed_dictionaries({
            "tokens": st.lists(token, min_size=n, max_size=n),
            "token_logprobs": st.lists(log_probabilities(), min_size=n, max_size=n),
            "top_logprobs": st.lists(st.dictionaries(token, log_probabilities(), max_size=3),
                                     min_size=n, max_size=n),
            "text_offset": st.lists(st.integers(0, 10), min_size=n, max_size=n)})

    return st.one_of(st.integers(1, 3).flatmap(shaped), st.integers(1, 3).flatmap(shaped),
                     st.fixed_dictionaries({"tokens": hostile(), "token_logprobs": hostile(),
                                            "top_logprobs": hostile()}))


def chat_logprobs() -> st.SearchStrategy[Any]:
    entry = st.fixed_dictionaries({
        "token": st.one_of(st.just("a"), text_values()),
        "logprob": st.one_of(log_probabilities(), hostile()),
        "top_logprobs": st.lists(st.fixed_dictionaries({
            "token": text_values(), "logprob": st.one_of(log_probabilities(), hostile())}),
            max_size=3)})
    return st.fixed_dictionaries({"content": st.lists(entry, min_size=1, max_size=3)})


def completions() -> st.SearchStrategy[tuple[int, Any, bool]]:
    """(status, reply, quote the Authorization header) for every completion request."""
    text = st.one_of(st.just("#### 42"), st.just(ECHO), text_values(), text_values(),
                     st.none(), hostile())
    choice = st.fixed_dictionaries(
        {"text": text, "finish_reason": st.one_of(st.sampled_from(["stop", "length"]),
                                                  hostile()),
         "message": st.one_of(st.none(), st.fixed_dictionaries(
             {"content": text}, optional={"reasoning_content": text}))},
        optional={"index": hostile()}).flatmap(lambda c: st.fixed_dictionaries({
            **{k: st.just(v) for k, v in c.items()},
            "logprobs": st.one_of(legacy_logprobs(), legacy_logprobs(), chat_logprobs(),
                                  st.none(), hostile())}))
    usage = st.one_of(st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens"]),
                                      st.one_of(st.integers(), numbers()), min_size=1),
                      st.none(), hostile())
    reply = st.fixed_dictionaries({"choices": st.lists(choice, min_size=1, max_size=2),
                                   "usage": usage}, optional={"model": hostile()})
    error = st.fixed_dictionaries({"error": st.fixed_dictionaries(
        {"message": st.one_of(st.just(f"bad credentials {ECHO}"), text_values())})})
    return st.one_of(
        st.tuples(st.just(200), reply, st.booleans()),
        st.tuples(st.just(200), reply, st.booleans()),
        st.tuples(st.just(200), reply, st.booleans()),
        st.tuples(st.sampled_from([400, 404, 429, 500, 503]), error, st.just(True)),
        st.tuples(st.just(200), json_body(), st.just(False)))


def script(models: tuple[int, bytes], gets: dict[str, bytes],
           reply: tuple[int, Any, bool]) -> Script:
    status, body, echo = reply

    def post(request: dict[str, Any], auth: str) -> tuple[int, bytes]:
        if isinstance(body, bytes):
            return status, body
        text = dumps(body)
        return status, text.replace(ECHO, json.dumps(auth)[1:-1] if echo else "x").encode(
            "utf-8", "surrogatepass")

    listed = (models[0], models[1].replace(ECHO.encode(), f"Bearer {SECRET}".encode()))
    return Script(gets={"/v1/models": listed, **{p: (200, b) for p, b in gets.items()}},
                  post=post)


GETS = st.dictionaries(st.sampled_from(["/props", "/version", "/metrics"]),
                       st.one_of(json_body(), text_values().map(
                           lambda t: f'vllm:cache_config_info{{x="{t}"}} 1\n'.encode(
                               "utf-8", "surrogatepass"))), max_size=3)


def run_and_check(capsys: Any, folder: Path, url: str, *extra: str) -> tuple[int, Path]:
    prompts = folder / "p.txt"
    prompts.write_text("Say one.\nSay two.\n")
    out = folder / "r.jsonl"
    code, stdout, stderr = kveval(capsys, "run", "--endpoint", url, "--task", "prompts",
                                  "--prompts", str(prompts), "-o", str(out), "--retries", "0",
                                  "--timeout", "5", *extra)
    check("run", code, stdout, stderr, written=[out],
          secrets=[*masking.forms(SECRET, url), *spellings(SECRET), *spellings(PASSWORD)])
    return code, out


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVEVAL_API_KEY", SECRET)


@given(models=model_lists(), gets=GETS, reply=completions(),
       password=st.booleans(), extra=st.sampled_from(
           [(), ("--logprobs", "2"), ("--api", "chat"), ("--api", "chat", "--logprobs", "2")]))
def test_fuzz_a_hostile_server(capsys: Any, models: tuple[int, bytes], gets: dict[str, bytes],
                               reply: tuple[int, Any, bool], password: bool,
                               extra: tuple[str, ...]) -> None:
    with tempfile.TemporaryDirectory() as tmp, \
            HostileServer("scripted", script=script(models, gets, reply)) as server:
        url = server.base_url.replace("http://", f"http://u:{PASSWORD}@") if password \
            else server.base_url
        code, out = run_and_check(capsys, Path(tmp), url, *extra)
        event(f"run exit {code}, file {'written' if out.exists() else 'absent'}")
        if not out.exists():
            assert code == 2
            return
        run = read_run(out)  # what kveval writes, kveval reads back
        assert len(run.items) == 2 or code == 2
        check("compare", *kveval(capsys, "compare", str(out), str(out), "--show", "2"),
              secrets=[*masking.forms(SECRET, url), *spellings(SECRET)])
        again, _ = run_and_check(capsys, Path(tmp), url, "--resume", *extra)
        assert again in (0, 1, 2)


SUITE_KEYS = ["name", "adapter", "label", "limit", "api", "max_tokens", "temperature", "stop",
              "data", "params", "logprobs", "lengths", "depths", "trials", "shots", "fewshot"]


def toml_value(value: Any) -> str:
    """A TOML rendering of a JSON value (TOML has no null: a string stands in)."""
    if value is None or isinstance(value, Deep):
        return '"' + "x" * 3 + '"' if value is None else "[" * value.levels + "]" * value.levels
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = repr(value)
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(text, text)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}"
                           for k, v in value.items()) + "}"


@given(st.dictionaries(st.sampled_from(SUITE_KEYS), hostile(), max_size=3),
       st.dictionaries(text_values(), hostile(), max_size=2),
       st.dictionaries(text_values(), hostile(), max_size=2))
def test_fuzz_suite_tomls(capsys: Any, task: dict[str, Any], setup: dict[str, Any],
                          extra_body: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp, \
            HostileServer("scripted", script=script(
                (200, answer({"data": [{"id": "m"}]})), {},
                (200, {"choices": [{"text": "#### 1", "finish_reason": "stop"}]}, False))
            ) as server:
        folder = Path(tmp)
        prompts = folder / "p.txt"
        prompts.write_text("Say one.\n")
        table = {"name": "prompts", "data": str(prompts), **task}
        lines = ["[[task]]"] + [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
        lines += ["[setup]"] + [f"{json.dumps(k)} = {toml_value(v)}" for k, v in setup.items()]
        lines += ["[extra_body]"] + [f"{json.dumps(k)} = {toml_value(v)}"
                                     for k, v in extra_body.items()]
        suite = folder / "s.toml"
        suite.write_text("\n".join(lines) + "\n", errors="surrogatepass")
        out = folder / "r.jsonl"
        code, stdout, stderr = kveval(capsys, "run", "--endpoint", server.base_url, "--suite",
                                      str(suite), "-o", str(out), "--retries", "0",
                                      "--timeout", "5")
        check("run", code, stdout, stderr, written=[out], secrets=[SECRET])
        event(f"suite run exit {code}")
        if out.exists():
            read_run(out)


def test_the_fuzz_servers_secret_forms_are_what_it_is_sent() -> None:
    """The property's secrets are the key and every form of the URL's credentials."""
    forms = masking.forms(SECRET, f"http://u:{PASSWORD}@h/v1")
    assert SECRET in forms and PASSWORD in forms and f"u:{PASSWORD}" in forms
    assert os.environ["KVEVAL_API_KEY"] == SECRET


def replies() -> st.SearchStrategy[Any]:
    """A completion body as the client decodes it (json.loads: NaN, lone surrogates and
    all), built from the shapes `completions()` draws."""
    return completions().map(lambda found: found[1] if not isinstance(found[1], bytes)
                             else {"choices": [{"text": found[1].decode("latin-1")}]}).map(
        lambda body: json.loads(dumps(body)) if not _too_deep(body) else body)


def _too_deep(value: Any) -> bool:
    return "Deep(" in repr(value)


@settings(max_examples=5 * settings.default.max_examples)
@given(reply=replies(), k=st.sampled_from([0, 2]), chat=st.booleans())
def test_fuzz_what_a_server_sends_is_written_and_read_back(reply: Any, k: int,
                                                           chat: bool) -> None:
    """Any reply the client parses becomes a record that its own reader reads back whole:
    never a line that is not JSON, not UTF-8 or refused on read. Cheap, so it draws five
    times the profile's examples."""
    import io

    from kveval.adapters.base import Item
    from kveval.formats.reader import Shared, parse_items
    from kveval.formats.writer import line
    from kveval.run.client import parse_reply
    from kveval.run.runner import Job, to_record
    from kveval.run.tasks import builtin_spec

    spec = builtin_spec("prompts")
    item = Item(task="prompts", item_id="p0", messages=({"role": "user", "content": "hi"},)
                if chat else None, prompt=None if chat else "hi")
    job = Job(spec, item, {"model": "m", "prompt": "hi"})
    record = to_record(job, parse_reply(reply, 0.1, k))
    for lean in (None, Shared()):
        kept, cut = parse_items(io.BytesIO(line(record)), Path("r.jsonl"), lean)
        (back,) = kept.items
        assert not cut and back.status == record.status
    assert (record.output is None) == (record.status == "error" or reply_is_null(reply))


def reply_is_null(reply: Any) -> bool:
    """An ok record without output: the server's content was null."""
    try:
        choice = reply["choices"][0]
        message = choice.get("message")
        return (message.get("content") if message is not None else choice["text"]) is None
    except (KeyError, IndexError, TypeError, AttributeError):
        return False
