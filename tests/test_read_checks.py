"""What a run file's types cannot say, checked on read: long-context metadata of the wrong type
and log-probabilities that are not probabilities are exit 2 naming file, line and field,
so judging never sees them (no TypeError in score or report, no PASS, no KL judged)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kveval.formats.checks import logprobs_problem, meta_problem
from tests.clirun import kveval
from tests.test_reader import header, item, lines, write

NEEDLE_TASK = [{"name": "needle", "adapter": "needle", "api": "completions",
                "max_tokens": 32, "stop": [], "temperature": 0.0, "limit": None, "params": {}}]
PROMPTS_TASK = [{**NEEDLE_TASK[0], "name": "prompts", "adapter": "prompts"}]


def needle(path: Path, label: str, bad: dict[str, Any] | None = None) -> str:
    rows = []
    for length in (1024, 2048, 4096):
        for depth in (0, 50, 100):
            for trial in range(5):
                meta = {"target_tokens": length, "depth": depth, "trial": trial,
                        "measured_tokens": length - 10, **(bad or {})}
                rows.append(item(0, task="needle", item_id=f"needle/L{length}/D{depth}/T{trial}",
                                 prompt_sha256=f"n{length}-{depth}-{trial}", output="4172",
                                 extracted="4172", reference="4172", meta=meta))
    return write(path, lines(header(label=label, tasks=NEEDLE_TASK), rows))


BAD_META = [({"depth": "deep"}, "meta.depth: expected a number from 0 to 100, got 'deep'"),
            ({"depth": [1]}, "meta.depth"), ({"depth": None}, "meta.depth"),
            ({"target_tokens": None}, "meta.target_tokens: expected an integer >= 1, got None"),
            ({"target_tokens": "abc"}, "meta.target_tokens"),
            ({"target_tokens": True}, "meta.target_tokens"),
            ({"measured_tokens": "abc"}, "meta.measured_tokens"),
            ({"score": "abc"}, "meta.score"), ({"score": 7}, "meta.score")]


@pytest.mark.parametrize(("bad", "message"), BAD_META)
@pytest.mark.parametrize("command", ["score", "report", "gate"])
def test_long_context_metadata_of_the_wrong_type_is_exit_2(
        capsys: Any, tmp_path: Path, bad: dict[str, Any], message: str, command: str) -> None:
    base = needle(tmp_path / "b.jsonl", "b")
    cand = needle(tmp_path / "c.jsonl", "c", bad)
    page = tmp_path / "page.html"
    args = {"score": ("score", cand, "--baseline", base),
            "report": ("report", "--baseline", base, "--candidate", cand, "-o", str(page)),
            "gate": ("gate", "--baseline", base, "--candidate", cand, "--html", str(page),
                     "--min-recovery", "0.9")}
    code, out, err = kveval(capsys, *args[command])
    assert code == 2 and "Traceback" not in err and "PASS" not in out
    assert f"c.jsonl:2: {message}" in err
    if command != "score":  # the page says it cannot judge, and why
        assert "CANNOT JUDGE" in page.read_text() and "meta." in page.read_text()


def test_good_metadata_passes() -> None:
    assert meta_problem({"target_tokens": 1024, "depth": 33.3, "measured_tokens": 0,
                         "score": 1, "distractors": [{"key": "a"}]}) is None


LP = {"k": 2, "tokens": ["red", " green", " blue"], "logprobs": [-0.5, -0.5, None],
      "top_tokens": [["red", "x"], [" green", "x"], [" blue", "x"]],
      "top_logprobs": [[-0.5, -1.5], [-0.5, -1.5], [-0.5, -9999.0]]}
BAD_LOGPROBS = [
    ({"logprobs": [5.0, -0.5, -0.5]}, "logprobs.logprobs[0]: expected float <= 0.0001"),
    ({"top_logprobs": [[5.0, 5.0]] * 3}, "logprobs.top_logprobs[0][0]"),
    ({"top_logprobs": [[-0.1, -0.2]] * 3},
     "logprobs.top_logprobs[0]: the top-K's probabilities sum to 1.724"),
    ({"top_tokens": [["x", "x"]] * 3}, "logprobs.top_tokens[0]: a token listed twice"),
    ({"top_logprobs": [[-0.5, -1.5], [-0.5], [-0.5, -1.5]]},
     "logprobs.top_logprobs[1]: 1 values for 2 top_tokens"),
    ({"tokens": ["red"]},
     "logprobs: tokens, logprobs, top_tokens, top_logprobs differ in length (1, 3, 3, 3)"),
    ({"tokens": [1, 2, 3]}, "logprobs.tokens[0]: expected str"),
]


@pytest.mark.parametrize(("change", "message"), BAD_LOGPROBS)
def test_log_probabilities_that_are_not_probabilities_are_exit_2(
        capsys: Any, tmp_path: Path, change: dict[str, Any], message: str) -> None:
    def run(name: str, lp: dict[str, Any]) -> str:
        rows = [item(i, task="prompts", item_id=f"p{i}", output="red green blue",
                     extracted=None, reference=None, correct=None, correct_strict=None,
                     logprobs=lp) for i in range(12)]
        return write(tmp_path / f"{name}.jsonl",
                     lines(header(label=name, tasks=PROMPTS_TASK), rows))

    base, noise, cand = run("b", LP), run("n", LP), run("c", {**LP, **change})
    code, out, err = kveval(capsys, "gate", "--baseline", base, "--candidate", cand,
                            "--noise", noise, "--max-kl", "0.01")
    assert code == 2 and "Traceback" not in err and "KL" not in out
    assert f"c.jsonl:2: {message}" in err, err


def test_good_log_probabilities_pass() -> None:
    assert logprobs_problem(LP) is None
    assert logprobs_problem({**LP, "top_logprobs": [[-0.0, -30.0]] * 3}) is None
    wide = {"k": 5, "tokens": ["a"] * 20, "logprobs": [-0.1] * 20,
            "top_tokens": [list("abcde")] * 20, "top_logprobs": [[-1.61] * 5] * 20}
    assert logprobs_problem(wide) is None  # 5 x 0.1999: within rounding of 1
    assert "sum to" in (logprobs_problem({**wide, "top_logprobs": [[-1.55] * 5] * 20}) or "")


def test_the_reader_names_the_field_once(tmp_path: Path) -> None:
    from kveval.errors import RunFileError
    from kveval.formats.reader import read_run

    bad = json.loads(json.dumps(LP))
    bad["top_tokens"][1] = ["y", "y"]
    path = write(tmp_path / "r.jsonl", lines(header(), [item(0), item(1, logprobs=bad)]))
    with pytest.raises(RunFileError, match=r"r.jsonl:3: logprobs.top_tokens\[1\]"):
        read_run(path)
    with pytest.raises(RunFileError, match=r"r.jsonl:3: logprobs.top_tokens\[1\]"):
        read_run(path, judging=True)
