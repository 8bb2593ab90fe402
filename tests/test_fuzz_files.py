"""Fuzz: run files, seed-format answer arrays and lm-eval sample and results logs, built from
the valid shapes with fields replaced by hostile values (tests/fuzz.py), through every
verdict command (compare, score, gate, report, run --resume and the lm-eval readers)."""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.clirun import kveval
from tests.fuzz import (
    LINE_EDITS,
    LMEVAL_SECRET,
    any_type,
    check,
    dumps,
    edited,
    hostile,
    log_probabilities,
    mutated_lines,
    mutations,
    numbers,
    text_values,
    texts_or_none,
)

TASKS = [{"name": name, "adapter": name, "api": "completions", "max_tokens": 64, "stop": [],
          "temperature": 0.0, "limit": None, "params": {}}
         for name in ("gsm8k", "needle", "prompts")]


def header(label: str) -> dict[str, Any]:
    return {"type": "run", "schema_version": 1, "label": label, "endpoint": "http://h:8000/v1",
            "model": "m", "tasks": json.loads(json.dumps(TASKS)),
            "sampling": {"temperature": 0.0, "seed": 1234, "extra_body": None},
            "concurrency": 4, "fingerprint": {"models": [{"id": "m"}], "props": {"n_ctx": 4096}},
            "created": "2026-01-01T00:00:00+00:00", "kveval_version": "0.1.0",
            "setup": {"kv": label}, "order": "data", "order_seed": None}


def record(task: str, item_id: str, output: str, **fields: Any) -> dict[str, Any]:
    return {"type": "item", "task": task, "item_id": item_id, "prompt_sha256": f"h-{item_id}",
            "request": {"prompt": f"Q {item_id}", "max_tokens": 64}, "status": "ok",
            "output": output, "finish_reason": "stop", "usage": {"completion_tokens": 5},
            "latency_s": 0.2, "meta": {}, **fields}


def logprobs(shift: float) -> dict[str, Any]:
    top = [math.log(0.6 - shift), math.log(0.3 + shift)]
    return {"k": 2, "tokens": ["a", " b", " c"], "logprobs": [round(top[0], 4)] * 3,
            "top_tokens": [["a", "z"], [" b", "z"], [" c", "z"]],
            "top_logprobs": [[round(v, 4) for v in top]] * 3}


def run_records(label: str, lost: int, shift: float) -> list[dict[str, Any]]:
    rows = [header(label)]
    for i in range(8):
        right = i >= lost
        rows.append(record("gsm8k", f"gsm8k/test/{i:04d}", f"so {i}\n#### {i if right else 0}",
                           extracted=str(i if right else 0), reference=str(i), correct=right,
                           correct_strict=right, meta={"index": i}))
    for length in (1024, 2048):
        for depth in (0, 50):
            for trial in range(5):
                found = not (lost and length == 2048 and trial < lost)
                rows.append(record(
                    "needle", f"needle/L{length}/D{depth}/T{trial}",
                    "4172" if found else "no idea", extracted="4172" if found else None,
                    reference="4172", correct=found,
                    meta={"target_tokens": length, "depth": depth, "trial": trial,
                          "measured_tokens": length - 7, "needle_class":
                          "exact" if found else "no_answer"}))
    for i in range(6):
        rows.append(record("prompts", f"p{i}", "a b c" if i >= lost else "a b d",
                           logprobs=logprobs(shift)))
    return rows


RUNS = {"baseline": run_records("base", 0, 0.0), "noise": run_records("noise", 0, 0.01),
        "candidate": run_records("cand", 3, 0.1)}
ints = st.one_of(st.integers(-5, 5000), numbers())
ITEM_PATHS = {
    ("task",): st.sampled_from(["gsm8k", "needle", "prompts"]) | text_values(),
    ("item_id",): text_values(), ("prompt_sha256",): text_values(),
    ("request",): hostile(), ("status",): st.sampled_from(["ok", "error"]),
    ("output",): texts_or_none(), ("reasoning",): texts_or_none(),
    ("finish_reason",): st.sampled_from(["stop", "length", None]) | text_values(),
    ("usage",): st.dictionaries(text_values(), ints, max_size=2), ("latency_s",): numbers(),
    ("extracted",): texts_or_none(), ("reference",): texts_or_none(),
    ("correct",): st.sampled_from([True, False, None]),
    ("correct_strict",): st.sampled_from([True, False, None]), ("error",): texts_or_none(),
    ("meta",): st.dictionaries(text_values(), hostile(), max_size=2),
    ("meta", "target_tokens"): any_type(), ("meta", "depth"): any_type(),
    ("meta", "measured_tokens"): any_type(), ("meta", "score"): any_type(),
    ("meta", "trial"): any_type(), ("meta", "needle_class"): any_type(),
    ("meta", "index"): any_type(),
    ("logprobs",): st.none(), ("logprobs", "k"): ints,
    ("logprobs", "tokens"): st.lists(text_values(), max_size=4),
    ("logprobs", "logprobs"): st.lists(log_probabilities() | st.none(), max_size=4),
    ("logprobs", "top_tokens"): st.lists(st.lists(text_values(), max_size=3), max_size=4),
    ("logprobs", "top_logprobs"): st.lists(st.lists(log_probabilities(), max_size=3),
                                           max_size=4),
    ("logprobs", "top_logprobs", 0): st.lists(log_probabilities(), max_size=3),
    ("logprobs", "top_logprobs", 1, 0): log_probabilities(),
    ("logprobs", "top_tokens", 2, 1): text_values(),
    ("logprobs", "logprobs", 0): log_probabilities(),
    ("request", "prompt"): text_values(), ("request", "messages"): hostile(),
}
HEADER_PATHS = {
    ("label",): text_values(), ("endpoint",): text_values(), ("model",): text_values(),
    ("tasks",): st.lists(hostile(), max_size=2), ("sampling",): hostile(),
    ("concurrency",): ints, ("fingerprint",): hostile(), ("created",): text_values(),
    ("kveval_version",): text_values(), ("setup",): st.dictionaries(text_values(),
                                                                    text_values(), max_size=2),
    ("order",): st.sampled_from(["data", "shuffle"]) | text_values(), ("order_seed",): ints,
    ("schema_version",): st.sampled_from([1, 2, "1", None]), ("type",): text_values(),
    ("tasks", 0, "name"): text_values(), ("tasks", 1, "max_tokens"): ints,
    ("tasks", 2, "params"): hostile(), ("sampling", "temperature"): numbers(),
    ("sampling", "seed"): ints, ("fingerprint", "props"): hostile(),
    ("fingerprint", "models", 0): hostile(), ("setup", "kv"): text_values(),
}
GATE_FLAGS = st.sampled_from([(), ("--max-kl", "0.5"), ("--min-recovery", "0.5"),
                              ("--policy", "paired", "--margin", "10"), ("--markdown",),
                              ("--json",), ("--skip", "needle", "--max-error-rate", "0.5")])


def write_runs(folder: Path, target: str, changes: list[Any], edit: str,
               at: int) -> dict[str, str]:
    paths = {}
    for role, records in RUNS.items():
        path = folder / f"{role}.jsonl"
        lines = mutated_lines(records, changes) if role == target else [
            json.dumps(r) for r in records]
        path.write_bytes(edited(lines, edit, at) if role == target else
                         edited(lines, "none", 0))
        paths[role] = str(path)
    return paths


COMMANDS = ["report", "score", "gate", "compare", "compare --json"]


def judge(capsys: Any, command: str, runs: dict[str, str], folder: Path,
          flags: tuple[str, ...]) -> None:
    b, c, n = runs["baseline"], runs["candidate"], runs["noise"]
    page = folder / "page.html"
    args = {"compare": ("compare", b, c, "--noise", n, "--show", "2"),
            "compare --json": ("compare", b, c, "--json"),
            "score": ("score", c, "--baseline", b),
            "gate": ("gate", "--baseline", b, "--candidate", c, "--noise", n, *flags),
            "report": ("report", "--baseline", b, "--candidate", c, "--noise", n,
                       "-o", str(page))}[command]
    code, out, err = kveval(capsys, *args)
    event(f"{command} exit {code}")
    said = page.read_text(errors="replace") if page.exists() else None
    check(command.split()[0], code, out, err, verdict_text=said,
          json_out="--json" in args)
    if command == "report":
        assert page.exists(), "report leaves a page on pass, regression and cannot judge"


def area(prefix: str) -> dict[tuple[Any, ...], Any]:
    return {path: value for path, value in ITEM_PATHS.items() if path[0] == prefix}


# Each area draws its changes from a few paths, so its examples meet them often.
AREAS = {
    "meta": (area("meta"), {}),
    "logprobs": (area("logprobs"), {}),
    "fields": ({p: v for p, v in ITEM_PATHS.items() if p[0] not in ("meta", "logprobs")}, {}),
    "header": ({}, HEADER_PATHS),
}


def changes_in(name: str) -> st.SearchStrategy[list[Any]]:
    items, head = AREAS[name]
    if not items:
        return mutations({("output",): text_values()}, head).map(
            lambda found: [m for m in found if m.line == 0] or found)
    if not head:
        return mutations(items, {("label",): text_values()}).map(
            lambda found: [m for m in found if m.line != 0] or found)
    return mutations(items, head)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", list(AREAS))
def test_fuzz_run_files_through_every_verdict_command(capsys: Any, name: str,
                                                     command: str) -> None:
    """Each area with each command: 20 tests, each drawing a third of the profile's
    examples (the one that breaks is a field, a value and a command together)."""
    @settings(max_examples=max(5, settings.default.max_examples // 3))
    @given(target=st.sampled_from(["candidate", "candidate", "baseline", "noise"]),
           changes=changes_in(name), edit=LINE_EDITS, at=st.integers(0, 10_000),
           flags=GATE_FLAGS)
    def fuzz(target: str, changes: list[Any], edit: str, at: int,
             flags: tuple[str, ...]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            runs = write_runs(folder, target, changes, edit, at)
            judge(capsys, command, runs, folder, flags)

    fuzz()


@given(changes=mutations(ITEM_PATHS, HEADER_PATHS), edit=LINE_EDITS, at=st.integers(0, 10_000))
def test_fuzz_a_hostile_run_file_resumed(capsys: Any, changes: list[Any], edit: str,
                                         at: int) -> None:
    """`run --resume` reads the whole file (request and usage too) before the network: a
    dead endpoint, so every outcome is decided by the file."""
    with tempfile.TemporaryDirectory() as tmp:
        path, prompts = Path(tmp) / "r.jsonl", Path(tmp) / "p.txt"
        path.write_bytes(edited(mutated_lines(RUNS["candidate"], changes), edit, at))
        prompts.write_text("Say one.\n")
        code, out, err = kveval(capsys, "run", "--endpoint", "http://127.0.0.1:9/v1",
                                "--task", "prompts", "--prompts", str(prompts), "-o",
                                str(path), "--resume", "--retries", "0", "--timeout", "1")
        check("run", code, out, err)
        assert code == 2


@given(st.lists(st.one_of(hostile(), st.text(max_size=10)), max_size=6),
       st.sampled_from(["compare", "gate"]))
def test_fuzz_seed_format_answer_arrays(capsys: Any, answers: list[Any], command: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.json", Path(tmp) / "b.json"
        a.write_text(json.dumps(["x"] * len(answers) or ["x"]))
        b.write_text(dumps(answers), errors="surrogatepass")
        args = ("compare", str(a), str(b)) if command == "compare" else (
            "gate", "--baseline", str(a), "--candidate", str(b))
        check(command, *kveval(capsys, *args))


# ---------------------------------------------------------------- lm-eval logs

LMEVAL = Path(__file__).parent / "fixtures" / "lmeval" / "0.4.13" / "completions-a"
SAMPLE_PATHS = [(k,) for k in ("doc_id", "doc", "target", "arguments", "resps",
                                "filtered_resps", "filter", "metrics", "doc_hash",
                                "prompt_hash", "target_hash", "exact_match")]
SAMPLE_PATHS += [("arguments", "gen_args_0", "arg_0"), ("arguments", "gen_args_0", "arg_1"),
                 ("arguments", "gen_args_0", "arg_1", "until"), ("resps", 0), ("resps", 0, 0),
                 ("filtered_resps", 0), ("doc", "answer")]
RESULT_PATHS = [(k,) for k in ("results", "configs", "config", "versions", "n-shot", "date",
                                "model_name", "model_name_sanitized", "task_hashes",
                                "lm_eval_version")]
RESULT_PATHS += [("configs", "gsm8k"), ("configs", "gsm8k", "filter_list"),
                 ("configs", "gsm8k", "filter_list", 0), ("configs", "gsm8k", "filter_list",
                                                          0, "name"),
                 ("config", "model"), ("config", "model_args"), ("config", "model_args", "seed"),
                 ("config", "model_args", "num_concurrent"), ("config", "gen_kwargs"),
                 ("config", "fewshot_seed"), ("n-shot", "gsm8k"), ("versions", "gsm8k")]


def lmeval_copy(folder: Path, name: str) -> Path:
    """The fixture with an API key in its model_args: it must never be shown."""
    target = folder / name
    shutil.copytree(LMEVAL, target)
    (results,) = target.rglob("results_*.json")
    data = json.loads(results.read_text())
    data["config"]["model_args"]["api_key"] = LMEVAL_SECRET
    results.write_text(json.dumps(data))
    return target


@given(samples=st.lists(st.builds(lambda line, path, value: (line, path, value),
                                  st.integers(0, 60), st.sampled_from(SAMPLE_PATHS),
                                  st.one_of(text_values(), hostile())), max_size=3),
       results=st.lists(st.builds(lambda path, value: (path, value),
                                  st.sampled_from(RESULT_PATHS), hostile()), max_size=2),
       edit=LINE_EDITS, at=st.integers(0, 10_000),
       command=st.sampled_from(["compare", "score", "gate", "report"]))
def test_fuzz_lmeval_logs(capsys: Any, samples: list[Any], results: list[Any], edit: str,
                          at: int, command: str) -> None:
    from tests.fuzz import plant

    with tempfile.TemporaryDirectory() as tmp:
        base, cand = lmeval_copy(Path(tmp), "base"), lmeval_copy(Path(tmp), "cand")
        (sample_file,) = cand.rglob("samples_*.jsonl")
        rows = [json.loads(line) for line in sample_file.read_text().splitlines()]
        for line, path, value in samples:
            plant(rows[line % len(rows)], path, value)
        sample_file.write_bytes(edited([dumps(r) for r in rows], edit, at))
        (result_file,) = cand.rglob("results_*.json")
        data = json.loads(result_file.read_text())
        for path, value in results:
            plant(data, path, value)
        result_file.write_text(dumps(data), errors="surrogatepass")
        page = Path(tmp) / "page.html"
        args = {"compare": ("compare", str(base), str(cand), "--show", "1"),
                "score": ("score", str(cand), "--baseline", str(base)),
                "gate": ("gate", "--baseline", str(base), "--candidate", str(cand), "--json"),
                "report": ("report", "--baseline", str(base), "--candidate", str(cand),
                           "-o", str(page))}[command]
        code, out, err = kveval(capsys, *args)
        said = page.read_text(errors="replace") if page.exists() else None
        check(command, code, out, err, written=[page], secrets=[LMEVAL_SECRET],
              verdict_text=said, json_out="--json" in args)
