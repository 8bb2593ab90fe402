"""The context task: documents read (and refused), items built, runs judged by position.

Runs are synthetic run files: a document of N positions whose every position's top-K the
test chooses, so the candidate's rise (and where it starts) is known."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kveval.adapters.base import BuildContext, TaskSpec
from kveval.adapters.context import ADAPTER, ContextData, Document
from kveval.errors import DataError
from kveval.formats.records import ItemRecord, RunHeader, to_json
from kveval.run.documents import bundled, load_documents
from tests.clirun import kveval

LENGTHS = [128, 256, 512]
TOKENS = 512  # positions 1..511 scored


# ---------------------------------------------------------------- documents


def test_the_bundled_documents_fill_32k_tokens_each() -> None:
    data = load_documents(None)
    assert len(data.documents) >= 4
    assert all(len(d.text) > 32768 * 4 for d in data.documents)  # about 4 characters a token
    assert data.source == "bundled SQLite documentation"
    assert (bundled() / "README.md").is_file()


def test_a_folder_of_text_and_markdown_files_is_a_set_of_documents(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Second\n\nMore text.\n")
    (tmp_path / "a.txt").write_text("First document.\n")
    (tmp_path / "skip.csv").write_text("not,a,document\n")
    data = load_documents(str(tmp_path))
    assert [d.name for d in data.documents] == ["a", "b"]


def test_jsonl_documents_take_their_text_and_id(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "x", "text": "one"}) + "\n\n" +
                    json.dumps({"text": "two"}) + "\n")
    assert [(d.name, d.text) for d in load_documents(str(path)).documents] == [
        ("x", "one"), ("3", "two")]


@pytest.mark.parametrize(("content", "says"), [
    (b"\x00\x01\x02binary", "control character"),
    (b"text with a bell \x07 in it", "control character"),
    (b"\xff\xfe not utf-8", "not UTF-8"),
    (b"   \n\n", "empty document"),
    (b"text \xc2\x85 with a C1 control", "control character"),
])
def test_a_file_that_is_no_text_document_is_one_line(tmp_path: Path, content: bytes,
                                                     says: str) -> None:
    path = tmp_path / "doc.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=says):
        load_documents(str(path))


def test_a_document_past_the_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    with path.open("wb") as fh:  # sparse: 2 GiB on no disk
        fh.truncate(2 << 30)
    with pytest.raises(DataError, match="cap on files kveval reads"):
        load_documents(str(path))


def test_a_jsonl_line_without_text_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": "fine"}\n{"body": "no text field"}\n')
    with pytest.raises(DataError, match=r"docs.jsonl:2: .*\"text\" field"):
        load_documents(str(path))


def test_hostile_documents_through_run_are_exit_2_and_write_nothing(
        capsys: Any, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "bad.txt").write_bytes(b"\x1b[31mred\x1b[0m")
    suite = tmp_path / "suite.toml"
    suite.write_text(f'[[task]]\nname = "context"\ndata = "{tmp_path / "docs"}"\n')
    out = tmp_path / "run.jsonl"
    code, _, err = kveval(capsys, "run", "--endpoint", "http://127.0.0.1:9/v1", "--suite",
                          str(suite), "-o", str(out))
    assert code == 2 and "control character" in err and "\x1b" not in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


# ---------------------------------------------------------------- items


def spec(**params: Any) -> TaskSpec:
    return TaskSpec("context", "context", max_tokens=1, params=params)


def test_items_are_documents_cut_to_the_longest_length_the_context_holds() -> None:
    data = ContextData((Document("a", "word " * 50_000), Document("b", "text " * 50_000)), "x")
    items = ADAPTER.build(spec(lengths=[1024, 4096, 16384]), BuildContext(data, None, 8192))
    assert [i.item_id for i in items] == ["context/a", "context/b"]
    assert items[0].meta == {"document": "a", "tokens": 4096, "lengths": [1024, 4096]}
    assert ADAPTER.skipped_lengths(spec(lengths=[1024, 4096, 16384]),
                                   BuildContext(data, None, 8192)) == [16384]
    exactly = ADAPTER.build(spec(lengths=[1024, 4096]), BuildContext(data, None, 4096))
    assert exactly[0].meta["tokens"] == 4095  # one position is the reply's


# ---------------------------------------------------------------- judged by position


def position_lp(kl_shift: float) -> tuple[list[str], list[float]]:
    """A position's top-2 and its own token's log-probability: the candidate moves mass
    from "a" to "b" by `kl_shift`."""
    p = 0.9 - kl_shift
    return ["a", "b"], [math.log(p), math.log(1 - p - 0.05)]


def document(shift: Any, tokens: int = TOKENS) -> dict[str, Any]:
    """Compact log-probabilities of a document's positions 1..tokens-1; `shift(position)`."""
    tops = [position_lp(shift(i + 1)) for i in range(tokens - 1)]
    return {"k": 2, "tokens": ["a"] * (tokens - 1), "logprobs": [lp[1][0] for lp in tops],
            "top_tokens": [lp[0] for lp in tops], "top_logprobs": [lp[1] for lp in tops]}


def write_run(path: Path, label: str, shift: Any, documents: int = 3,
              ids: str = "same") -> Path:
    header = RunHeader(label=label, endpoint="http://127.0.0.1:1/v1", model="m",
                       tasks=[{"name": "context", "adapter": "context", "version": 1,
                               "api": "completions", "max_tokens": 1, "stop": [],
                               "temperature": 0.0, "params": {"lengths": LENGTHS}}],
                       sampling={"temperature": 0.0, "seed": 0, "extra_body": None},
                       concurrency=1, fingerprint={}, created="2026-01-01T00:00:00Z",
                       kveval_version="0")
    items = [ItemRecord(task="context", item_id=f"context/d{d}", prompt_sha256=f"s{d}",
                        request={}, status="ok", output="a" * (TOKENS - 1),
                        logprobs=document(shift),
                        meta={"document": f"d{d}", "tokens": TOKENS, "lengths": LENGTHS,
                              "teacher_forced": {"method": "prompt_logprobs", "ids": ids}})
             for d in range(documents)]
    path.write_text("\n".join(to_json(r) for r in (header, *items)) + "\n")
    return path


def gate_json(capsys: Any, tmp_path: Path, cand: Any, *extra: str,
              noise: Any = lambda i: 0.0) -> tuple[int, dict[str, Any]]:
    base = write_run(tmp_path / "base.jsonl", "base", lambda i: 0.0)
    other = write_run(tmp_path / "cand.jsonl", "cand", cand)
    restart = write_run(tmp_path / "noise.jsonl", "noise", noise)
    code, out, _ = kveval(capsys, "gate", "--baseline", str(base), "--candidate", str(other),
                          "--noise", str(restart), "--json", *extra)
    return code, json.loads(out)


def context_entry(data: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in data["tasks"] if t["task"] == "context")["context"]


def test_a_rise_that_starts_at_256_is_shown_where_it_starts(capsys: Any,
                                                           tmp_path: Path) -> None:
    code, data = gate_json(capsys, tmp_path, lambda i: 0.2 if i >= 256 else 0.0)
    assert code == 2  # shown, not gated: no check of answers judges the task
    entry = context_entry(data)
    assert entry["rise_starts"] == "256-512"
    buckets = entry["candidate"]["buckets"]
    assert [b["label"] for b in buckets] == ["0-128", "128-256", "256-512"]
    assert buckets[0]["kl_mean"] == 0 and buckets[2]["kl_mean"] > 0.05
    assert buckets[2]["ppl_change_pct"] > 0 and buckets[0]["same_top"] == 1
    assert [b["positions"] for b in buckets] == [3 * 127, 3 * 128, 3 * 256]
    check = next(c for c in data["checks"] if "context" in c["check"])
    assert check["p_value"] < 0.01 and check["adjusted_p"] < 0.05
    code, _ = gate_json(capsys, tmp_path, lambda i: 0.2 if i >= 256 else 0.0, "--max-kl", "0")
    assert code == 1


def test_max_ppl_rise_fails_a_rise_beyond_it_and_passes_one_within(capsys: Any,
                                                                   tmp_path: Path) -> None:
    small = lambda i: 0.01  # noqa: E731 - about +1.1% perplexity at every position
    code, data = gate_json(capsys, tmp_path, small, "--max-ppl-rise", "0.5")
    assert code == 1 and any(c["check"] == "context-ppl" for c in data["checks"])
    code, data = gate_json(capsys, tmp_path, small, "--max-ppl-rise", "5")
    assert code == 0, data.get("summary", data)


@settings(max_examples=15, deadline=None)
@given(noise=st.floats(0.0, 0.2))
def test_a_copy_of_the_baseline_never_fails(noise: float, tmp_path_factory: Any) -> None:
    """The candidate identical to the baseline, whatever a restart does: exit 0 with
    --max-kl 0 and --max-ppl-rise 0."""
    import contextlib
    import io

    from kveval.cli.cli import main

    folder = tmp_path_factory.mktemp("copy")
    base = write_run(folder / "base.jsonl", "base", lambda i: 0.0)
    restart = write_run(folder / "noise.jsonl", "noise", lambda i: noise)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit) as exit_:
        main(["gate", "--baseline", str(base), "--candidate", str(base), "--noise",
              str(restart), "--max-kl", "0", "--max-ppl-rise", "0"])
    assert exit_.value.code == 0


def test_runs_that_forced_other_tokens_cannot_be_judged(capsys: Any, tmp_path: Path) -> None:
    base = write_run(tmp_path / "base.jsonl", "base", lambda i: 0.0)
    other = write_run(tmp_path / "cand.jsonl", "cand", lambda i: 0.0, ids="other")
    code, _, err = kveval(capsys, "gate", "--baseline", str(base), "--candidate", str(other),
                          "--noise", str(base))
    assert code == 2 and "forced different tokens" in err


def test_the_text_shows_the_table_by_bucket(capsys: Any, tmp_path: Path) -> None:
    base = write_run(tmp_path / "base.jsonl", "base", lambda i: 0.0)
    other = write_run(tmp_path / "cand.jsonl", "q4_0", lambda i: 0.2)
    restart = write_run(tmp_path / "noise.jsonl", "f16-b", lambda i: 0.001)
    code, out, _ = kveval(capsys, "gate", "--baseline", str(base), "--candidate", str(other),
                          "--noise", str(restart))
    assert "by position" in out and "256-512" in out and "perplexity" in out
    assert "context KL +" in out.splitlines()[-1]  # the headline names the rise


def test_plan_says_what_the_documents_and_restarts_can_show(capsys: Any,
                                                            tmp_path: Path) -> None:
    base = write_run(tmp_path / "base.jsonl", "base", lambda i: 0.0)
    restart = write_run(tmp_path / "noise.jsonl", "noise", lambda i: 0.001)
    code, out, _ = kveval(capsys, "plan", str(base), "--noise", str(restart))
    assert code == 0
    assert "context: 3 document(s) to 512 tokens, 48 blocks of 32 positions" in out
    assert "names where a rise starts from 160 positions" in out
    assert "context drift" not in out  # judged by position, not as a prompt file


def test_blocks_to_name_a_bucket_fall_with_restarts() -> None:
    from kveval.show.context_plan import blocks_to_name

    assert blocks_to_name(0, 0.05) is None
    assert blocks_to_name(1, 0.05) == 5 and 0.5 ** 5 < 0.05 < 0.5 ** 4
    assert blocks_to_name(3, 0.05) == 3


def test_a_document_shorter_than_the_grid_ends_its_last_bucket_and_is_named(
        capsys: Any, tmp_path: Path) -> None:
    def run(path: Path, label: str, shift: Any) -> Path:
        write_run(path, label, shift)
        lines = path.read_text().splitlines()
        short = json.loads(lines[1])  # d0 ends at 300 tokens
        short["logprobs"] = {k: v[:299] if isinstance(v, list) else v
                             for k, v in short["logprobs"].items()}
        path.write_text("\n".join([lines[0], json.dumps(short), *lines[2:]]) + "\n")
        return path

    base = run(tmp_path / "base.jsonl", "base", lambda i: 0.0)
    cand = run(tmp_path / "cand.jsonl", "cand", lambda i: 0.1)
    noise = run(tmp_path / "noise.jsonl", "noise", lambda i: 0.001)
    code, out, _ = kveval(capsys, "gate", "--baseline", str(base), "--candidate", str(cand),
                          "--noise", str(noise))
    assert code == 2 and "context/d0 (299 positions)" in out
    assert "256-512" in out and "0-128" in out


def test_the_page_escapes_what_runs_and_documents_name(capsys: Any, tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>"
    base = write_run(tmp_path / "base.jsonl", hostile, lambda i: 0.0)
    cand = write_run(tmp_path / "cand.jsonl", f"q4 {hostile}", lambda i: 0.2)
    noise = write_run(tmp_path / "noise.jsonl", "noise", lambda i: 0.001)
    for path in (base, cand, noise):  # a document named by a hostile JSONL id
        path.write_text(path.read_text().replace("context/d0", f"context/{hostile}"))
    page = tmp_path / "page.html"
    code, _, err = kveval(capsys, "report", "--baseline", str(base), "--candidate", str(cand),
                          "--noise", str(noise), "-o", str(page))
    html = page.read_text()
    assert code == 2, err  # the verdict's: a rise shown that no threshold gates
    assert 'id="by-position"' in html and "<script>alert" not in html
    assert "&lt;script&gt;" in html
