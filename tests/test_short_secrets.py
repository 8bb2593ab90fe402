"""Short secrets (kveval/masking.py MIN_TEXT): a secret of any length, known by its name, its
form or the user's word, is masked where it is a whole value (a JSON string: an env record,
an argv item, a header field; a whole text); one of MIN_TEXT characters or more inside text
too, in every spelling and across a line break, through the same linear masking as a long
one; a shorter one is named in one line, never shown. Masking still never changes a number,
a boolean, a key or the structure of JSON, on file or on a terminal (`--json`)."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kveval import masking, secret_sources
from kveval.run.ab.env import Names, masked_argv, named_values, secret_values
from kveval.run.relay import Relay
from kveval.sink import Door, echo_json, file_text, json_text
from tests.test_secret_rule import json_values, same_but_strings

# no `*` (the mask's own), `%` or `\` (what an escape is written with): a secret holding
# them reads as another spelling of itself once decoded
ALPHABET = st.characters(min_codepoint=33, max_codepoint=0x2FF,
                         exclude_characters="*%\\\x7f")
_ESCAPE = re.compile(r"\\\\?u([0-9a-fA-F]{4})|%([0-9a-fA-F]{2})")


@pytest.fixture(autouse=True)
def nothing_registered() -> Iterator[None]:
    masking.forget()
    yield
    masking.forget()


def decoded(text: str) -> str:
    """What a reader of `text` sees: its \\u and %XX escapes decoded, its line breaks gone."""
    def one(m: re.Match[str]) -> str:
        return chr(int(m[1], 16)) if m[1] else bytes([int(m[2], 16)]).decode("latin-1")
    plain = _ESCAPE.sub(one, text)
    return re.sub(r"\r|\n|\\n|\\r", "", plain)


def utf8_decoded(text: str) -> str:
    """%XX escapes read as UTF-8 bytes (a URL's), \\u escapes as characters."""
    text = re.sub(r"\\\\?u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text)
    data = re.sub(r"(?:%[0-9a-fA-F]{2})+", lambda m: bytes.fromhex(
        m.group().replace("%", "")).decode("utf-8", "replace"), text)
    return re.sub(r"\r|\n|\\n|\\r", "", data)


def spellings(secret: str) -> list[str]:
    """A secret as a server's log or error may spell it, written out apart from masking.py."""
    data = secret.encode()
    return [secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret),
            "".join(f"%{b:02X}" for b in data), "".join(f"%{b:02x}" for b in data),
            "".join(f"\\u{ord(c):04x}" for c in secret),
            "".join(f"\\\\u{ord(c):04X}" for c in secret),  # as a JSON file holds an answer's
            secret[:1] + "\n" + secret[1:], secret[:-1] + "\\n" + secret[-1:]]


def identified(how: str, secret: str) -> tuple[list[tuple[str, str]], list[str], Names]:
    """A server's environment and command line giving `secret` by its name, by its form (a
    URL's password) or by the user's word."""
    if how == "name":
        return [("DB_PASSWORD", secret)], ["srv"], Names()
    if how == "flag":
        return [], ["srv", "--api-key", secret], Names()
    if how == "word":
        return [("MODEL_REV", secret)], ["srv"], Names(secret=("MODEL_REV",))
    return [("LLAMA_ARG_MODEL_URL", f"https://u:{quote(secret, safe='')}@h.example/m")], \
        ["srv"], Names()


def relayed(text: str) -> str:
    out = io.BytesIO()
    relay = Relay(out)  # type: ignore[arg-type]
    relay.add(text.encode("utf-8", "surrogatepass") + b"\n")
    relay.end()
    return out.getvalue().decode()


HOW = st.sampled_from(["name", "flag", "word", "url"])
AROUND = st.sampled_from(["", "env DB_PASSWORD=", "argv --api-key ", "error: bad key '",
                          "INFO: ", " (end)", "', retry\n"])


def usable(secret: str) -> bool:
    """A secret the rule calls one: not a placeholder, not a flag of its own."""
    return secret.strip().lower() not in secret_sources.PLACEHOLDERS and not secret.startswith("-")


@given(st.text(ALPHABET, min_size=3, max_size=7), HOW, AROUND, AROUND,
       st.integers(0, 9))
def test_a_secret_of_three_characters_or_more_is_masked_in_text_in_every_spelling(
        secret: str, how: str, before: str, after: str, which: int) -> None:
    if not usable(secret):
        return
    masking.forget()
    env, argv, names = identified(how, secret)
    masking.register_secrets(secret_values(env, argv, names))
    text = before + spellings(secret)[which] + after
    for written in (file_text(text), relayed(text), json.loads(json_text({"t": text}))["t"]):
        assert secret not in decoded(written) and secret not in utf8_decoded(written), written


@given(st.text(ALPHABET, min_size=1, max_size=2), HOW)
def test_a_shorter_secret_is_masked_where_it_is_a_whole_value(secret: str, how: str) -> None:
    if not usable(secret):
        return
    masking.forget()
    env, argv, names = identified(how, secret)
    masking.register_secrets(secret_values(env, argv, names))
    record = {"env": secret, "argv": ["--api-key", secret], "header": {"model": secret},
              "count": 7, "flag": True, secret: "a key stays"}
    written = json.loads(json_text(record))
    assert written == {"env": "***", "argv": ["--api-key", "***"], "header": {"model": "***"},
                       "count": 7, "flag": True, secret: "a key stays"}
    assert file_text(secret) == "***"
    assert secret not in masked_argv(argv, names)


def test_a_short_secret_is_never_shown_in_its_server_command() -> None:
    argv = ["env", "PGPASSWORD=ab", "srv", "--api-key", "x", "--port", "{port}",
            "--model-url", "https://u:q7@h/m", "--threads", "8"]
    assert masked_argv(argv) == ["env", "PGPASSWORD=***", "srv", "--api-key", "***", "--port",
                                 "{port}", "--model-url", "***", "--threads", "8"]


def test_what_holds_a_short_secret_is_named_in_one_line_without_it() -> None:
    found = named_values([("PGPASSWORD", "ab"), ("MY_FLAG", "false"), ("API_TOKEN", "q7z"),
                          ("PIN", "7")], ["srv", "--api-key", "xy"], Names(secret=("PIN",)))
    assert ("API_TOKEN", "q7z") in found
    line = masking.too_short(found, "the servers' logs")
    assert line is not None and "\n" not in line
    assert line.startswith("kveval: PGPASSWORD, PIN, --api-key: too short to mask in the "
                           "servers' logs")
    assert not {"ab", "7", "xy", "q7z", "API_TOKEN"} & set(re.findall(r"[\w-]+", line))
    assert masking.too_short([("API_TOKEN", "q7z")], "the servers' logs") is None


def test_a_three_character_secret_is_masked_across_a_line_break_and_in_escapes() -> None:
    masking.register_secrets(secret_values([("DB_PASSWORD", "q7z")], []))
    log = "env DB_PASSWORD=q7\nz\nkey=\\u0071\\u0037z url=%71%37%7A q7z-suffix\n"
    assert "q7" not in file_text(log).replace("***", "")
    assert file_text("a placeholder stays: EMPTY, none, 0") == "a placeholder stays: EMPTY, none, 0"


def test_a_child_process_registers_a_short_secret_again() -> None:
    masking.register_secrets(["ab", "q7z"])
    given_ = masking.secrets()
    masking.forget()
    masking.register_secrets(given_)  # what ab --parallel's child does with them
    assert json.loads(json_text(["ab", "q7z!"])) == ["***", "***!"]


SECRETS = ["7", "ab", "q7z", "123", "true1", "sk-prop-key-12345678"]


@given(json_values(SECRETS))
def test_masking_short_secrets_never_changes_a_number_a_boolean_a_key_or_the_structure(
        value: Any) -> None:
    masking.forget()
    masking.register_secrets(SECRETS)
    same_but_strings(value, json.loads(json_text(value)), SECRETS)
    shown = io.StringIO()
    before, sys.stdout = sys.stdout, Door(shown)  # type: ignore[assignment]
    try:
        echo_json(json_text(value, indent=2))  # --json on a terminal: never masked again
    finally:
        sys.stdout = before
    same_but_strings(value, json.loads(shown.getvalue()), SECRETS)


def test_a_placeholder_under_a_secrets_name_in_model_args_is_no_secret() -> None:
    """lm-eval's `use_auth_token=True`, `api_key=EMPTY`: masking them would turn every True
    and EMPTY of a run into ***; a short real key is one."""
    args = {"use_auth_token": "True", "api_key": "EMPTY", "key": "q7", "token": "1"}
    assert secret_sources.named_secrets(args) == ["q7"]


def test_a_short_secret_never_rewrites_kvevals_own_times_and_ids() -> None:
    """DB_PASSWORD=202 and a PIN of 0000: a start's time, an item's id and a word of a digit
    run hold them by chance, and masking them made a resume refuse its own files; as words
    in a log they are still masked."""
    masking.forget()
    masking.register_secrets(["202", "0000"])
    record = {"at": "2026-12-05T02:02:02+00:00", "item_id": "gsm8k/test/0000",
              "output": "the 2026 answer is 10000", "note": "password 202 and pin 0000"}
    back = json.loads(json_text(record))
    assert back["at"] == record["at"] and back["item_id"] == record["item_id"]
    assert back["output"] == record["output"]
    assert back["note"] == "password *** and pin ***"
    masking.forget()


def test_a_token_given_as_a_urls_userinfo_alone_is_a_secret() -> None:
    masking.forget()
    masking.register_secrets(secret_sources.url_secrets("https://ghp_tok3n1234@host/v1"))
    assert masking.mask("clone of https://ghp_tok3n1234@host failed") == \
        "clone of https://***@host failed"
    masking.forget()
