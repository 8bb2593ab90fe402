"""Reading run files: every field validated, one clear line and exit 2 for any bad file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kveval.errors import RunFileError
from kveval.formats.reader import read_run
from tests.clirun import kveval


def header(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "run", "schema_version": 1, "label": "x", "endpoint": "http://h/v1",
        "model": "m", "tasks": [{"name": "gsm8k", "adapter": "gsm8k"}],
        "sampling": {"temperature": 0.0, "seed": 0}, "concurrency": 4, "fingerprint": {},
        "created": "2026-01-01T00:00:00+00:00", "kveval_version": "0.1.0",
    }
    data.update(changes)
    return data


def item(i: int, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "item", "task": "gsm8k", "item_id": f"gsm8k/test/{i:04d}",
        "prompt_sha256": f"sha{i}", "request": {"prompt": f"Q{i}", "max_tokens": 8},
        "status": "ok", "output": f"#### {i}", "finish_reason": "stop",
        "usage": {"completion_tokens": 3}, "latency_s": 0.5, "extracted": str(i),
        "reference": str(i), "correct": True, "correct_strict": True, "meta": {"index": i},
    }
    data.update(changes)
    return data


def lines(head: dict[str, Any], items: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in [head, *items]).encode()


def write(path: Path, content: bytes) -> str:
    path.write_bytes(content)
    return str(path)


def good(n: int = 4) -> bytes:
    return lines(header(), [item(i) for i in range(n)])


def with_item(index: int, **changes: Any) -> bytes:
    return lines(header(), [item(i, **changes) if i == index else item(i) for i in range(4)])


BAD_FILES: dict[str, tuple[Callable[[], bytes], str]] = {
    "empty file": (lambda: b"", "empty file"),
    "binary file": (lambda: bytes(range(256)) * 4, "line 1 is not JSON"),
    "non-UTF-8 byte": (lambda: good().replace(b"#### 2", b"#### \xff2"), ":4: not UTF-8 text"),
    "output 42": (lambda: with_item(1, output=42), ":3: output: expected str, got int"),
    "item_id list": (lambda: with_item(0, item_id=["x"]), ":2: item_id: expected str, got array"),
    "sampling null": (lambda: lines(header(sampling=None), [item(0)]),
                      ":1: sampling: expected object, got null"),
    "correct no": (lambda: with_item(3, correct="no"), ":5: correct: expected bool, got str"),
    "status maybe": (lambda: with_item(0, status="maybe"), ":2: status: invalid value 'maybe'"),
    "nested request": (lambda: with_item(0, request=[1]), ":2: request: expected object"),
    "no request": (lambda: lines(header(), [item(0), {k: v for k, v in item(1).items()
                                                      if k != "request"}]),
                   ":3: missing field request"),
    "not an object": (lambda: good() + b"[1, 2]\n", ":6: expected object, got array"),
    "bad JSON inside": (lambda: good().replace(b'"output": "#### 1"', b'"output": #### 1'),
                        ":3: line is not JSON"),
    "different duplicate": (lambda: lines(header(), [item(0), item(1), item(0, output="#### 9")]),
                            ":4: gsm8k gsm8k/test/0000 appears twice with different content"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_run_file_is_one_line(case: str, tmp_path: Path) -> None:
    make, message = BAD_FILES[case]
    path = write(tmp_path / "fp8.jsonl", make())
    with pytest.raises(RunFileError) as error:
        read_run(path)
    assert str(error.value).startswith(str(path))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("case", sorted(BAD_FILES))
@pytest.mark.parametrize("command", ["compare", "score", "gate"])
def test_every_verdict_command_exits_2_on_a_bad_file(case: str, command: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    make, message = BAD_FILES[case]
    base = write(tmp_path / "bf16.jsonl", good())
    bad = write(tmp_path / "fp8.jsonl", make())
    argv = {"compare": ["compare", base, bad], "score": ["score", bad, "--baseline", base],
            "gate": ["gate", "--baseline", base, "--candidate", bad]}[command]
    code, out, err = kveval(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("kveval: error: ")
    assert message in err and "Traceback" not in err + out


def test_unknown_fields_are_read_and_ignored(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", lines(header(future={"a": 1}),
                                             [item(0, added_later=[1, 2]), item(1)]))
    run = read_run(path)
    assert [i.item_id for i in run.items] == ["gsm8k/test/0000", "gsm8k/test/0001"]
    assert run.items[0].meta == {"index": 0} and run.header.label == "x"


def test_a_torn_last_line_is_skipped_and_reported(tmp_path: Path) -> None:
    content = good(3) + json.dumps(item(3)).encode()[:50]
    run = read_run(write(tmp_path / "r.jsonl", content))
    assert run.truncated_tail and len(run.items) == 3


def test_a_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    run = read_run(write(tmp_path / "r.jsonl", good(3) + json.dumps(item(3)).encode()))
    assert not run.truncated_tail and len(run.items) == 4


def test_a_garbage_line_with_its_newline_is_no_torn_tail(tmp_path: Path) -> None:
    with pytest.raises(RunFileError, match=r":5: line is not JSON"):
        read_run(write(tmp_path / "r.jsonl", good(3) + b'{"type": "item", "ta\n'))


def test_identical_duplicates_are_kept_once(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", lines(header(), [item(0), item(1), item(0)]))
    for run in (read_run(path), read_run(path, judging=True)):
        assert [i.item_id for i in run.items] == ["gsm8k/test/0000", "gsm8k/test/0001"]


def test_judging_leaves_out_what_judging_never_reads(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", good(2))
    full, judged = read_run(path).items[1], read_run(path, judging=True).items[1]
    assert full.request == {"prompt": "Q1", "max_tokens": 8} and full.usage is not None
    assert judged.request == {} and judged.usage is None and judged.latency_s is None
    assert (judged.output, judged.correct, judged.finish_reason) == (
        full.output, full.correct, full.finish_reason)
    assert full.meta == {"index": 1} and judged.meta == {}  # the adapter's own, unjudged


def test_judging_still_validates_every_judged_field(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", with_item(2, correct_strict=1))
    with pytest.raises(RunFileError, match=r":4: correct_strict: expected bool, got int"):
        read_run(path, judging=True)


def test_a_null_answer_stays_null(tmp_path: Path) -> None:
    path = write(tmp_path / "r.jsonl", with_item(0, output=None, finish_reason="length"))
    assert read_run(path).items[0].output is None
    assert read_run(path, judging=True).items[0].output is None
