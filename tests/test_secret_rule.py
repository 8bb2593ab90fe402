"""What is a secret: by its name, by its form (URL credentials, key prefixes) or by the
user's word; every other value a setting in clear (run/ab/env.py). Masking works inside
string values before they are serialized: never a number, a boolean, null, a key or the
structure changed (kveval/masking.py `masked`, kveval/sink.py `json_text`)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kveval import masking, secret_sources
from kveval.masking import MIN_ANYWHERE, MIN_TEXT, OWN_KEYS
from kveval.run.ab.env import Names, recorded_argv, secret_values, shown
from kveval.sink import file_text, json_text

SALT = "0123456789abcdef"


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    masking.forget()
    yield
    masking.forget()


@pytest.mark.parametrize(("name", "value"), [
    ("MY_FLAG", "false"), ("EXTRA_ARGS", "null"), ("ENABLE_X", "true"), ("RUN_SEED", "1234"),
    ("PORT", "{port}"), ("DATASET", "gsm8k"), ("VLLM_ATTENTION_BACKEND", "FLASHINFER"),
    ("TOKENIZERS_PARALLELISM", "false"), ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("ENABLE_AUTH", "false"), ("LLAMA_ARG_MODEL_URL", "https://host/m.gguf"),
])
def test_a_setting_is_recorded_in_clear_and_masks_nothing(name: str, value: str) -> None:
    assert shown(name, value, SALT) == value
    assert secret_values([(name, value)], []) == []


@pytest.mark.parametrize(("name", "value"), [
    ("HF_TOKEN", "hf-token-value-1"), ("VLLM_API_KEY", "local-key-99"),
    ("PGPASSWORD", "hunter2secret"), ("DB_PASS", "pass-word-2"), ("APP_SECRET", "s3cr3t-v"),
    ("PROXY_AUTH", "user-pass-3"), ("SESSION_COOKIE", "c00kie-value"),
    ("GCP_CREDENTIALS", "cred-json-4"), ("AWS_SECRET_ACCESS_KEY", "aws-secret-55"),
    ("MYSQL_PWD", "1234567"),
])
def test_a_value_is_a_secret_by_its_name(name: str, value: str) -> None:
    assert shown(name, value, SALT).startswith("scrypt:")
    assert value in secret_values([(name, value)], [])


@pytest.mark.parametrize(("name", "value", "secret"), [
    ("LLAMA_ARG_MODEL_URL", "https://user:pw-model-1@hf.example/m.gguf", "pw-model-1"),
    ("VLLM_REMOTE_URL", "http://svc:pw-remote-2@svc.local:9000/v1", "pw-remote-2"),
    ("OLLAMA_HOST", "http://admin:pw-ollama-3@127.0.0.1:11434", "pw-ollama-3"),
    ("VLLM_EXTRA_KEYS", "a=1,b=sk-extra-key-123456789", "sk-extra-key-123456789"),
    ("SOME_PATH", "hf_abcdefghijklmnop1234", "hf_abcdefghijklmnop1234"),
])
def test_a_credential_is_a_secret_by_its_form_under_any_name(name: str, value: str,
                                                              secret: str) -> None:
    assert shown(name, value, SALT).startswith("scrypt:")
    assert shown(name, value, SALT, Names(record=(name,))).startswith("scrypt:")
    assert secret in secret_values([(name, value)], [])


def test_the_users_word_makes_a_secret_or_a_setting() -> None:
    assert shown("MODEL_REV", "abc123", SALT, Names(secret=("MODEL_REV",))).startswith("scrypt:")
    assert secret_values([("MODEL_REV", "abc123")], [], Names(secret=("MODEL_REV",))) == \
        ["abc123"]
    assert shown("HF_TOKEN", "read-only-x", SALT, Names(record=("HF_TOKEN",))) == "read-only-x"


def test_a_command_line_is_recorded_with_each_secret_fingerprinted() -> None:
    argv = ["env", "-S", "APP_SECRET=s3cret-split-1 FOO=bar", "PORT={port}", "srv",
            "--api-key", "K", "--port", "{port}", "--hf-token=hf-tok-2222",
            "--model-url", "https://u:pw-url-3333@h/m.gguf", "--alias", "sk-alias-key-44445555",
            "--no-auth", "--threads", "8"]
    words = recorded_argv(argv, SALT)
    kept = {0, 1, 3, 4, 5, 7, 8, 10, 12, 14, 15, 16}
    assert [words[i] for i in sorted(kept)] == [argv[i] for i in sorted(kept)]
    assert words[2].startswith("APP_SECRET=scrypt:") and words[2].endswith(" FOO=bar")
    assert words[6].startswith("scrypt:") and words[9].startswith("--hf-token=scrypt:")
    assert words[11].startswith("scrypt:") and words[13].startswith("scrypt:")
    found = secret_values([], argv)
    assert {"s3cret-split-1", "K", "hf-tok-2222", "pw-url-3333", "sk-alias-key-44445555"} \
        <= set(found)
    assert not {"{port}", "8", "bar", "srv"} & set(found)


def test_a_changed_secret_is_a_changed_record_and_the_same_one_the_same() -> None:
    one = recorded_argv(["srv", "--api-key", "key-one-1"], SALT)
    assert one == recorded_argv(["srv", "--api-key", "key-one-1"], SALT)
    assert one != recorded_argv(["srv", "--api-key", "key-two-2"], SALT)
    assert one != recorded_argv(["srv", "--api-key", "key-one-1"], "another-salt")


URL_USER, URL_PASSWORD = "alice", "pw-spelled-77x"
KEY = "sk-spelled-key-0123456789"


def spellings(plain: str) -> list[str]:
    return [plain, quote(plain, safe=""), "".join(f"%{b:02x}" for b in plain.encode()),
            "".join(f"\\u{ord(c):04x}" for c in plain), json.dumps(plain)[1:-1]]


def unescaped(text: str) -> str:
    text = re.sub(r"\\\\?u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text)
    return re.sub(r"%([0-9a-fA-F]{2})", lambda m: chr(int(m[1], 16)), text)


@pytest.mark.parametrize("where", ["env", "serve"])
def test_url_credentials_and_keys_are_masked_in_every_spelling(where: str) -> None:
    url = f"https://{URL_USER}:{URL_PASSWORD}@models.example/m.gguf"
    env = [("LLAMA_ARG_MODEL_URL", url), ("VLLM_EXTRA_KEYS", KEY)] if where == "env" else []
    argv = ["srv", "--model-url", url, "--alias", KEY] if where == "serve" else ["srv"]
    masking.register_secrets(secret_values(env, argv))
    basic = base64.b64encode(f"{URL_USER}:{URL_PASSWORD}".encode()).decode()
    bearer = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    for plain in (URL_PASSWORD, f"{URL_USER}:{URL_PASSWORD}", KEY, basic, bearer):
        for spelled in spellings(plain):
            text = f"echo: {spelled} (end)"
            assert plain not in unescaped(file_text(text)), spelled
            value = json.loads(json_text({"answer": text}))["answer"]
            assert plain not in unescaped(value), spelled


def test_a_child_process_registers_the_same_secrets_in_every_spelling() -> None:
    masking.register_secrets([KEY, *secret_sources.url_secrets(f"http://u:{URL_PASSWORD}@h/v1")])
    forms, given_ = masking.registered(), masking.secrets()
    masking.forget()
    masking.register_secrets(given_)  # what ab --parallel's child does with them
    assert masking.registered() == forms
    assert KEY not in unescaped(masking.mask("".join(f"\\u{ord(c):04X}" for c in KEY)))


SECRETS = ["1234", "false", "null", "seed", "gsm8k", "sk-prop-key-12345678"]


def json_values(secrets: list[str]) -> st.SearchStrategy[Any]:
    """JSON values whose keys and strings hold `secrets`, whole and inside other text."""
    keys = st.sampled_from([*secrets, "seed", "model", "tasks"]) | st.text(max_size=6)
    leaves = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
              | st.sampled_from(secrets) | st.text(max_size=12)
              | st.builds("{}{}{}".format, st.text(max_size=4), st.sampled_from(secrets),
                          st.text(max_size=4)))
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(keys, inner, max_size=3), max_leaves=10)


def held(secret: str, text: str) -> bool:
    """Whether `text` still shows `secret` where masking must hide it: anywhere for a long
    one, as a word (no letter or digit beside it) for a short one."""
    if len(secret) >= MIN_ANYWHERE:
        return secret in text
    return re.search(r"(?<![^\W_])" + re.escape(secret) + r"(?![^\W_])", text) is not None


def same_but_strings(before: Any, after: Any, secrets: list[str] = SECRETS) -> None:
    """`after` is `before` with only its strings changed: none is a secret too short to mask
    inside text, none holds a longer one."""
    if isinstance(before, str):
        assert isinstance(after, str) and after not in [s for s in secrets if len(s) < MIN_TEXT]
        assert not any(held(s, after) for s in secrets if len(s) >= MIN_TEXT)
    elif isinstance(before, dict):
        assert isinstance(after, dict) and list(after) == list(before)
        for key in before:
            if key in OWN_KEYS:  # kveval's own identifiers and times: never masked
                assert after[key] == before[key]
            else:
                same_but_strings(before[key], after[key], secrets)
    elif isinstance(before, list):
        assert isinstance(after, list) and len(after) == len(before)
        for one, other in zip(before, after, strict=True):
            same_but_strings(one, other, secrets)
    else:
        assert after == before and type(after) is type(before)


@given(json_values(SECRETS))
def test_masking_never_changes_a_number_a_boolean_null_a_key_or_the_structure(
        value: Any) -> None:
    masking.forget()
    masking.register_secrets(SECRETS)
    written = json_text(value)
    same_but_strings(value, json.loads(written))
    same_but_strings(value, json.loads(json_text(value, indent=2)))


def test_nothing_registered_masks_nothing() -> None:
    value = {"seed": 1234, "run": False, "tasks": [{"name": "gsm8k"}]}
    assert masking.masked(value) is value
    assert json.loads(json_text(value)) == value


def test_a_secret_holding_a_port_or_slot_is_masked_as_the_server_gets_it() -> None:
    masking.register_secrets(secret_values([("API_TOKEN", "tok-{port}-{gpu}-x")], []))
    masking.register_filled("{port}", "8123")
    masking.register_filled("{gpu}", "3")
    assert file_text("env API_TOKEN=tok-8123-3-x") == "env API_TOKEN=***"
