"""`compare` reads runs leanly (judging=True); its JSON must be what the full records give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kveval.cli.cli import main
from kveval.formats import lean as lean_records
from kveval.formats import reader
from kveval.formats.reader import Shared, read_run

HEADER = {
    "type": "run", "schema_version": 1, "endpoint": "http://h/v1", "model": "m",
    "tasks": [{"name": "gsm8k", "adapter": "gsm8k"}], "sampling": {"temperature": 0.0},
    "concurrency": 4, "fingerprint": {}, "created": "2026-01-01T00:00:00+00:00",
    "kveval_version": "0.1.0",
}


def item(i: int, output: str | None, status: str = "ok") -> dict[str, Any]:
    return {
        "type": "item", "task": "gsm8k", "item_id": f"gsm8k/test/{i:04d}",
        "prompt_sha256": f"sha{i}", "request": {"prompt": f"Q{i}", "max_tokens": 8},
        "status": status, "output": output, "finish_reason": "stop" if output else "length",
        "usage": {"completion_tokens": 3}, "latency_s": 0.5,
        "extracted": output.rsplit(" ", 1)[-1] if output else None, "reference": "18",
        "correct": bool(output and output.endswith("18")), "correct_strict": True,
        "meta": {"index": i, "extracted_strict": "18"},
        "error": "timeout" if status == "error" else None,
    }


def write_run(path: Path, label: str, changed: set[int]) -> Path:
    items = [item(i, f"So {i} eggs {'and more ' if i in changed else ''}= 18\n#### 18")
             for i in range(40)]
    items += [item(40, None), item(41, "#### 7", "error" if label == "fp8" else "ok")]
    text = [json.dumps({**HEADER, "label": label})] + [json.dumps(x) for x in items]
    path.write_text("\n".join(text) + "\n")
    return path


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    return [write_run(tmp_path / "bf16a.jsonl", "bf16a", set()),
            write_run(tmp_path / "fp8.jsonl", "fp8", {1, 2, 3, 5, 8, 13, 21, 34}),
            write_run(tmp_path / "bf16b.jsonl", "bf16b", {2, 30})]


def compare_json(paths: list[Path], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(paths[0]), str(paths[1]), "--noise", str(paths[2]), "--show", "3",
              "--json"])
    assert exit_info.value.code in (0, None)
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_compare_json_is_the_same_as_from_full_records(runs, capsys, monkeypatch):
    lean = compare_json(runs, capsys)
    full_read = reader.read_run
    monkeypatch.setattr(reader, "read_run", lambda path, **_: full_read(path))
    full = compare_json(runs, capsys)  # every field of every record (judging=False)
    assert lean == full
    assert lean["tasks"][0]["task"] == "gsm8k"


def test_lean_records_keep_what_judging_reads(runs):
    lean, full = read_run(runs[1], judging=True), read_run(runs[1], judging=False)
    assert [(x.key, x.status, x.output, x.extracted, x.correct) for x in lean.items] == \
        [(x.key, x.status, x.output, x.extracted, x.correct) for x in full.items]
    assert all(x.request == {} and x.usage is None for x in lean.items)
    unjudged = lean_records.UNJUDGED_META
    assert [x.meta for x in lean.items] == [
        {k: v for k, v in x.meta.items() if k not in unjudged} for x in full.items]


def test_no_verdict_reads_the_meta_left_out_when_judging():
    root = Path(reader.__file__).parents[1]
    sources = [p for folder in ("judge", "show", "cli") for p in (root / folder).rglob("*.py")]
    sources += [root / "formats" / "unforced.py"]
    for key in lean_records.UNJUDGED_META:
        assert not [p for p in sources if f'"{key}"' in p.read_text()], key


FIELDS = ("task", "item_id", "prompt_sha256", "status", "output", "finish_reason", "extracted",
          "reference", "correct", "correct_strict", "error", "meta", "reasoning", "logprobs")


def values(record: Any) -> tuple[Any, ...]:
    return tuple(getattr(record, name) for name in FIELDS)


def test_runs_read_together_share_what_is_alike_and_keep_what_differs(runs):
    shared = Shared()
    base, cand, noise = (read_run(path, shared=shared) for path in runs)
    alone = [read_run(path, judging=True) for path in runs]
    for together, apart in zip((base, cand, noise), alone, strict=True):
        assert [values(x) for x in together.items] == [values(x) for x in apart.items]
    first, changed, same = base.items[1], cand.items[1], cand.items[0]
    assert changed.output != first.output and changed.meta is base.items[1].meta
    assert same.output is base.items[0].output and same.prompt_sha256 is base.items[0].prompt_sha256
    assert noise.items[2].output != base.items[2].output  # changed in the noise run too
