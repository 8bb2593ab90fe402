"""One door out: a registered secret is masked in every spelling a server or a proxy can echo
it (property tests over secrets and the text around them), the Door in front of stdout and
stderr masks a secret split across writes and strips C0/C1 controls, JSON leaves with C1
escaped and its meaning kept, and secrets are registered from every source at start-up."""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kveval import masking, secret_sources
from kveval.sink import Door, file_text, json_text
from tests.clirun import kveval

SECRETS = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters="\x7f"
                                ), min_size=8, max_size=24) | st.sampled_from(
    ["p@ss w/rd:X9!", "sk-very/secret+key=0", "hunter2 hunter2", "ключ-секрет-99"])
AROUND = st.text(max_size=30)


@pytest.fixture(autouse=True)
def nothing_registered() -> Iterator[None]:
    masking.forget()
    yield
    masking.forget()


def percent(secret: str, lower: bool = False) -> str:
    text = "".join(f"%{b:02X}" for b in secret.encode())
    return text.lower() if lower else text


def spelled(secret: str) -> dict[str, str]:
    """The issue's spellings, written out apart from masking.py."""
    encoded = quote(secret, safe="")
    return {"raw": secret, "Bearer": f"Bearer {secret}", "URL": encoded,
            "URL lower-case": re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), encoded),
            "form": quote_plus(secret, safe=""), "every byte": percent(secret),
            "every byte lower-case": percent(secret, lower=True),
            "JSON \\u": "".join(f"\\u{ord(c):04x}" for c in secret),
            "JSON \\u upper": "".join(f"\\u{ord(c):04X}" for c in secret),
            "JSON": json.dumps(secret)[1:-1]}


def recoverable(text: str, secret: str) -> bool:
    """Whether base64 anywhere in `text`, at any alignment, decodes to bytes holding it."""
    data = secret.encode()
    for run in re.findall(r"[A-Za-z0-9+/_-]{8,}", text):
        for start in range(4):
            piece = run[start:].replace("-", "+").replace("_", "/")
            piece = piece[: len(piece) - len(piece) % 4]
            try:
                if data in base64.b64decode(piece):
                    return True
            except (binascii.Error, ValueError):
                continue
    return False


@given(SECRETS, AROUND, AROUND, st.sampled_from(list(spelled("x"))))
def test_every_spelling_of_a_registered_secret_is_masked(secret: str, before: str, after: str,
                                                         how: str) -> None:
    masking.forget()
    masking.register_secrets([secret])
    shown = spelled(secret)[how]
    assert shown not in masking.mask(f"{before}{shown}{after}")


@given(SECRETS, st.binary(max_size=12), st.binary(max_size=12))
def test_base64_of_any_text_holding_a_secret_gives_it_back_nowhere(secret: str, before: bytes,
                                                                   after: bytes) -> None:
    """base64 of the whole header (`Bearer KEY`, `Basic ...`), of a body quoting it: at any
    of the three alignments, what is left does not decode to the secret."""
    masking.forget()
    masking.register_secrets([secret])
    for prefix in (before, b"Bearer ", b"Authorization: Basic "):
        encoded = base64.b64encode(prefix + secret.encode() + after).decode()
        for text in (encoded, encoded.replace("+", "-").replace("/", "_")):
            assert not recoverable(masking.mask(f"seen {text} ok"), secret)


def test_the_url_credentials_in_every_spelling() -> None:
    url = "http://alice:p%40ss%20w%2Frd%3AX9%21@h/v1"
    masking.register_secrets(secret_sources.url_secrets(url))
    pair = "alice:p@ss w/rd:X9!"
    for text in ("p@ss w/rd:X9!", "p%40ss+w%2Frd%3AX9%21", "p%40ss%20w%2frd%3ax9%21".replace(
            "x9", "X9"), pair, base64.b64encode(pair.encode()).decode(), "%70%40ss w/rd:X9!"):
        assert "rd:X9" not in masking.mask(text) and "w%2" not in masking.mask(text), text


def test_a_key_with_a_line_break_is_masked_in_each_part() -> None:
    masking.register_secrets(["sk-crlf-secret-4455\r\n"])
    assert "sk-crlf" not in masking.mask("Invalid header value b'Bearer sk-crlf-secret-4455\\r\\n'")


def test_secrets_come_from_every_variable_that_holds_one() -> None:
    found = secret_sources.from_environment({
        "KVEVAL_API_KEY": "sk-one-11111", "OPENAI_API_KEY": "sk-two-22222",
        "HF_TOKEN": "hf_three33333", "http_proxy": "http://bob:proxy-pass-1@p:3128",
        "KVEVAL_ENDPOINT": "http://u:endpoint-pass-2@h/v1", "PWD": "/home/x"})
    assert {"sk-one-11111", "sk-two-22222", "hf_three33333", "proxy-pass-1",
            "endpoint-pass-2"} <= set(found)
    assert "/home/x" not in found


def test_lmeval_model_args_secrets_by_any_name_at_any_depth() -> None:
    args = {"model": "m", "headers": {"Authorization": "Bearer abc-header-1"},
            "key": "abc-key-2", "passphrase": "abc-phrase-3", "apiKey": "abc-camel-4",
            "accessToken": "abc-token-5", "note": "uses sk-shaped-credential-6",
            "tokenizer": "gpt2", "max_tokens": 256, "detokenize": True}
    found = secret_sources.named_secrets(args)
    assert set(found) == {"Bearer abc-header-1", "abc-key-2", "abc-phrase-3", "abc-camel-4",
                          "abc-token-5", "uses sk-shaped-credential-6"}
    shown = masking.mask_named(args)
    assert shown["headers"] == {"Authorization": "***"} and shown["key"] == "***"
    assert shown["tokenizer"] == "gpt2" and shown["max_tokens"] == 256
    assert shown["detokenize"] is True


def door() -> tuple[Door, io.StringIO]:
    inner = io.StringIO()
    return Door(inner), inner  # type: ignore[arg-type]


def test_a_secret_split_across_writes_never_reaches_the_stream() -> None:
    masking.register_secrets(["sk-split-secret-77"])
    stream, inner = door()
    for piece in ("model sk-spl", "it-sec", "ret-77 ok\n"):
        stream.write(piece)
        stream.flush()
    stream.drain()
    assert "sk-split" not in inner.getvalue() and inner.getvalue() == "model *** ok\n"


def test_a_flush_shows_what_cannot_begin_a_secret_at_once() -> None:
    masking.register_secrets(["sk-split-secret-77"])
    stream, inner = door()
    stream.write("\rrun x:  50%|#####     | 1/2 sk-")
    stream.flush()
    assert inner.getvalue() == "\rrun x:  50%|#####     | 1/2 "  # a progress bar, at once
    stream.write("other\n")
    stream.drain()
    assert inner.getvalue().endswith("sk-other\n")


@given(st.text(max_size=40))
def test_the_door_passes_no_c0_or_c1_control_but_tab_newline_and_cr(text: str) -> None:
    stream, inner = door()
    stream.write(text)
    stream.drain()
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", inner.getvalue())


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.text(max_size=5), inner, max_size=3), max_leaves=8))
def test_json_leaves_with_c1_escaped_and_means_the_same(value: Any) -> None:
    text = json_text(value)
    assert not re.search("[\x7f-\x9f\u2028\u2029]", text)
    assert json.loads(text) == value


def test_file_text_masks_and_strips() -> None:
    masking.register_secrets(["sk-page-secret-1"])
    assert file_text("a\x9b31m sk-page-secret-1 \x1b\tb\r\n") == "a31m *** \tb\r\n"


def test_every_command_registers_the_environments_secrets_at_start_up(
        capsys: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A key nothing sends still cannot be printed: `compare` of a file quoting it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent-31337")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(["answer sk-never-sent-31337 one", "b"]))
    b.write_text(json.dumps(["answer sk-never-sent-31337 two", "c"]))
    code, out, err = kveval(capsys, "compare", str(a), str(b), "--show", "2")
    assert code == 0 and "answer *** one" in out and "sk-never-sent" not in out + err


def test_a_placeholder_key_is_not_a_secret(capsys: Any, monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Any) -> None:
    """OPENAI_API_KEY=none (what a server that checks no key is given) masks no word."""
    found = secret_sources.from_environment({"OPENAI_API_KEY": "none", "KVEVAL_API_KEY": "EMPTY"})
    assert found == []
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(["none of them", "b"]))
    b.write_text(json.dumps(["none at all", "c"]))
    code, out, _ = kveval(capsys, "compare", str(a), str(b), "--show", "2")
    assert code == 0 and "none of them" in out and "***" not in out


def test_a_100_kb_key_costs_linear_time(capsys: Any, monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Any) -> None:
    """A 100 KB key once cost minutes before the first request (a regular expression of
    every character's spellings); masked in every spelling, raw, in \\u escapes, split by
    a line break, within seconds."""
    key = "sk-" + "".join(f"{i:05d}" for i in range(20_000))
    escaped = "".join(f"\\u{ord(c):04x}" for c in key)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps([f"one {key} %41", "b"]))
    b.write_text(json.dumps([f"two {key[:50_000]}\n{key[50_000:]} {escaped}", "c"]))
    started = time.monotonic()
    code, out, err = kveval(capsys, "compare", str(a), str(b), "--show", "2", "--json")
    assert time.monotonic() - started < 10
    seen = (out + err).replace("\\\\", "\\")
    assert code == 0 and "one ***" in seen and "two ***" in seen
    for part in (key[:50_000], key[50_000:], escaped[:1000], key[-1000:], key[:20]):
        assert part not in seen


def test_json_out_keeps_a_number_or_a_key_that_holds_a_secret(
        capsys: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """`--json` on the terminal and gate.json on file are masked inside their strings only:
    a password `0.05` leaves alpha 0.05 and a key `0.05` as they are."""
    from kveval.cli.ab_sweep import write_json

    monkeypatch.setenv("KVEVAL_ENDPOINT", "http://u:0.05@h/v1")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(["said 0.05", "b"]))
    b.write_text(json.dumps(["said 0.05", "c"]))
    code, out, _ = kveval(capsys, "compare", str(a), str(b), "--json")
    assert code == 0 and json.loads(out)["alpha"] == 0.05
    masking.register_secrets(["0.05"])
    write_json(tmp_path / "gate.json", {"alpha": 0.05, "0.05": "said 0.05"})
    assert json.loads((tmp_path / "gate.json").read_text()) == {"alpha": 0.05, "0.05": "said ***"}
