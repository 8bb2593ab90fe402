"""The door's spellings no literal list holds, fuzzed: a key as JSON \\u escapes (its
backslash doubled too, as a JSON file holds an answer's escape), the Basic and Bearer headers'
base64 in \\u escapes, a key split by one line break; a server's log relayed in any chunking
with the key wrapped over two lines; an -o DIR of any kind of path. Never the secret on file
or on a terminal; never an error but the one line that names the path."""

from __future__ import annotations

import base64
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kveval import masking, secret_sources
from kveval.atomic import output_folder
from kveval.errors import RunFileError
from kveval.run.relay import Relay
from kveval.sink import file_text, json_text

KEY = "sk-fuzz-door-4f2a9c71"
USER, PASSWORD = "puser", "pw-fuzz-93b1"
AROUND = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_ESCAPES = re.compile(r"\\\\?u([0-9a-fA-F]{4})")


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    masking.forget()
    masking.register_secrets([KEY, *secret_sources.url_secrets(f"http://{USER}:{PASSWORD}@h/v1")])
    yield
    masking.forget()


def escaped(text: str, upper: bool) -> str:
    return "".join((f"\\u{ord(c):04X}" if upper else f"\\u{ord(c):04x}") for c in text)


def unescaped(text: str) -> str:
    """What a reader of the text sees: its \\u escapes decoded."""
    return _ESCAPES.sub(lambda m: chr(int(m[1], 16)), text)


def spelled(kind: str, upper: bool) -> tuple[str, str]:
    """A spelling of a secret and the plain text it decodes to."""
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    bearer = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    plain = {"key": KEY, "basic": basic, "bearer": bearer}[kind]
    return escaped(plain, upper), plain


def leaked(text: str, plain: str) -> bool:
    seen = unescaped(text)
    return plain in seen or plain in seen.replace("\\\\", "\\")


@given(st.sampled_from(["key", "basic", "bearer"]), st.booleans(), AROUND, AROUND)
def test_a_secret_in_u_escapes_is_masked_on_file_and_terminal(kind: str, upper: bool,
                                                              before: str, after: str) -> None:
    text, plain = spelled(kind, upper)
    answer = before + text + after
    assert not leaked(file_text(answer), plain)
    written = json_text({"output": answer})
    assert not leaked(written, plain)
    assert plain not in unescaped(json.loads(written)["output"])


@given(st.integers(1, len(KEY) - 1), st.sampled_from(["\n", "\r\n"]), AROUND, AROUND)
def test_a_key_split_by_one_line_break_is_masked(at: int, brk: str, before: str,
                                                 after: str) -> None:
    answer = f"{before} {KEY[:at]}{brk}{KEY[at:]} {after}"
    assert masking.MASK in file_text(answer)
    assert KEY[:at] + brk + KEY[at:] not in file_text(answer)
    written = json_text({"output": answer})
    assert KEY not in json.loads(written)["output"].replace("\r", "").replace("\n", "")


@given(st.integers(1, len(KEY) - 1), st.lists(st.integers(0, 200), max_size=6),
       st.sampled_from(["\n", "\r\n"]))
def test_a_log_relayed_in_any_chunks_never_holds_the_wrapped_key(
        at: int, cuts: list[int], brk: str) -> None:
    log = (f"INFO starting{brk}request auth: {KEY[:at]}{brk}{KEY[at:]} (end){brk}"
           f"INFO done{brk}").encode()
    out = io.BytesIO()
    relay = Relay(out)  # type: ignore[arg-type]
    edges = sorted({min(c, len(log)) for c in cuts})
    for start, end in zip([0, *edges], [*edges, len(log)], strict=True):
        relay.add(log[start:end])
    relay.end()
    written = out.getvalue().decode()
    assert KEY not in written.replace("\r", "").replace("\n", "")
    assert written.startswith("INFO starting") and written.rstrip().endswith("INFO done")


KINDS = st.sampled_from(["new", "folder", "file", "fifo", "under-file", "device-link",
                         "folder-link", "dangling-link"])


def make(root: Path, kind: str) -> Path:
    path = root / kind
    if kind == "folder":
        path.mkdir()
    elif kind == "file":
        path.write_text("x")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "under-file":
        (root / "plain").write_text("x")
        path = root / "plain" / "sub"
    elif kind == "device-link":
        path.symlink_to("/dev/null")
    elif kind == "folder-link":
        (root / "real").mkdir()
        path.symlink_to(root / "real")
    elif kind == "dangling-link":
        path.symlink_to(root / "nowhere" / "deeper")
    return path


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(KINDS, st.booleans())
def test_an_output_folder_of_any_kind_is_made_kept_or_one_line(tmp_path_factory, kind: str,  # type: ignore[no-untyped-def]
                                                               nested: bool) -> None:
    root = tmp_path_factory.mktemp("o")
    path = make(root, kind)
    path = path / "inner" if nested else path
    try:
        made = output_folder(path)
    except RunFileError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: ") and "\n" not in message
        assert kind in ("file", "fifo", "under-file", "device-link")
        return
    assert made.is_dir() and kind in ("new", "folder", "folder-link", "dangling-link") or nested
