"""The cases of bench/hostile/inputs.py that need no server: hostile run files, answer
arrays, a named pipe, /dev/zero, a file-size ulimit. Each builds its input in a
folder of its own and judges what the verdict commands did with it."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kit import (
    Outcome,
    Result,
    first_failing,
    header,
    item,
    judged,
    kveval,
    prompt_item,
    read,
    spliced,
    task,
    unsaid_regression,
    write_run,
)

NEEDLE = [task("needle")]
PROMPTS = [task("prompts", api="chat")]


def good_run(folder: Path, name: str = "a.jsonl") -> str:
    return write_run(folder / name, header(), [item(i) for i in range(4)])


def deep_run(folder: Path, field: str, levels: int) -> str:
    """Four good items, then one whose `field` holds `levels` nested arrays."""
    path = folder / "b.jsonl"
    write_run(path, header(), [item(i) for i in range(4)])
    with path.open("a") as f:
        f.write(spliced(item(9, **{field: {"x": "DEEP"}}), levels) + "\n")
    return str(path)


def verdicts(tree: Path, folder: Path, base: str, cand: str) -> Outcome:
    """compare, score and gate on one bad candidate: each must be one line and exit 2."""
    runs = {"compare": ("compare", base, cand), "score": ("score", cand),
            "gate": ("gate", "--baseline", base, "--candidate", cand)}
    return first_failing((name, judged(kveval(tree, folder, *args)))
                         for name, args in runs.items())


def deep_meta(tree: Path, folder: Path) -> Outcome:
    return verdicts(tree, folder, good_run(folder), deep_run(folder, "meta", 1000))


def deep_request(tree: Path, folder: Path) -> Outcome:
    return judged(kveval(tree, folder, "score", deep_run(folder, "request", 200_000)))


def deep_answer_array(tree: Path, folder: Path) -> Outcome:
    (folder / "a.json").write_text('["x"]')
    (folder / "b.json").write_text("[" * 100_000 + "]" * 100_000)
    return judged(kveval(tree, folder, "compare", "a.json", "b.json"))


# ---------------------------------------------------------------- long-context metadata


def needle_run(path: Path, label: str, bad: dict[str, Any] | None = None) -> str:
    rows = []
    for length in (1024, 2048, 4096):
        for depth in (0, 50, 100):
            for trial in range(5):
                meta = {"target_tokens": length, "depth": depth, "trial": trial,
                        "measured_tokens": length - 10, **(bad or {})}
                rows.append(item(0, task="needle", item_id=f"needle/L{length}/D{depth}/T{trial}",
                                 prompt_sha256=f"n{length}-{depth}-{trial}", output="4172",
                                 extracted="4172", reference="4172", meta=meta))
    return write_run(path, header(label=label, tasks=NEEDLE), rows)


def needle_pair(folder: Path, bad: dict[str, Any]) -> tuple[str, str]:
    return needle_run(folder / "b.jsonl", "b"), needle_run(folder / "c.jsonl", "c", bad)


def passed_then_failed(r: Result) -> str | None:
    return "printed PASS, then failed" if r.code != 0 and "PASS" in r.out else None


def needle_score(bad: dict[str, Any]) -> Callable[[Path, Path], Outcome]:
    def case(tree: Path, folder: Path) -> Outcome:
        base, cand = needle_pair(folder, bad)
        runs = {"score": ("score", cand, "--baseline", base),
                "report": ("report", "--baseline", base, "--candidate", cand,
                           "-o", str(folder / "page.html"))}
        return first_failing((name, judged(kveval(tree, folder, *args)))
                             for name, args in runs.items())
    return case


def needle_gate_html(tree: Path, folder: Path) -> Outcome:
    base, cand = needle_pair(folder, {"depth": "deep"})
    page = folder / "page.html"
    r = kveval(tree, folder, "gate", "--baseline", base, "--candidate", cand, "--html", str(page))
    unwritten = None if "CANNOT JUDGE" in read(page) else "no page saying it cannot judge"
    return judged(r, (2,), passed_then_failed(r), unwritten)


def min_recovery(tree: Path, folder: Path) -> Outcome:
    base, cand = needle_pair(folder, {"target_tokens": "abc"})
    r = kveval(tree, folder, "gate", "--baseline", base, "--candidate", cand,
               "--min-recovery", "0.9")
    return judged(r, (2,), "PASS" if "PASS" in r.out else None)


# ---------------------------------------------------------------- devices, pipes, sizes


def dev_zero(tree: Path, folder: Path) -> Outcome:
    r = kveval(tree, folder, "gate", "--baseline", good_run(folder), "--candidate", "/dev/zero",
               timeout=60, ulimits="-v 3000000")
    return judged(r)


def fifo(folder: Path) -> str:
    os.mkfifo(folder / "pipe.jsonl")
    return str(folder / "pipe.jsonl")


def fifo_score(tree: Path, folder: Path) -> Outcome:
    return judged(kveval(tree, folder, "score", fifo(folder)))


def fifo_gate(tree: Path, folder: Path) -> Outcome:
    return judged(kveval(tree, folder, "gate", "--baseline", good_run(folder),
                         "--candidate", fifo(folder)))


def long_answer(tree: Path, folder: Path) -> Outcome:
    """Two runs whose one answer is a 100 MB word; compare --show 1 prints it side by side."""
    big = "x" * 100_000_000
    a = write_run(folder / "a.jsonl", header("a", PROMPTS), [prompt_item(0, big)])
    b = write_run(folder / "b.jsonl", header("b", PROMPTS), [prompt_item(0, "y" + big[1:])])
    r = kveval(tree, folder, "compare", a, b, "--show", "1", timeout=45, ulimits="-v 8000000")
    return judged(r, (0,), note=f"{r.seconds:.1f} s" if r.code is not None else "")


def long_answer_of_words(tree: Path, folder: Path) -> Outcome:
    """Two runs whose one answer is 100 MB of short words, compared under `ulimit -v`."""
    words = "ab " * 33_000_000
    a = write_run(folder / "a.jsonl", header("a", PROMPTS), [prompt_item(0, words)])
    b = write_run(folder / "b.jsonl", header("b", PROMPTS), [prompt_item(0, "y" + words[1:])])
    r = kveval(tree, folder, "compare", a, b, "--show", "1", timeout=45, ulimits="-v 4000000")
    return judged(r, (0,), note=f"{r.seconds:.1f} s" if r.code is not None else "")


def page_past_ulimit(tree: Path, folder: Path) -> Outcome:
    """gate --html under `ulimit -f 10`: the page cannot be written whole."""
    gsm = [task("gsm8k", limit=200)]
    rows = [item(i, output=f"Natalia sold {i} clips in April.\n#### {i}") for i in range(200)]
    base = write_run(folder / "a.jsonl", header("a", gsm), rows)
    cand = write_run(folder / "b.jsonl", header("b", gsm), rows)
    page = folder / "page.html"
    r = kveval(tree, folder, "gate", "--baseline", base, "--candidate", cand, "--html",
               str(page), ulimits="-f 10")
    text = read(page)
    half = "a half-written page left" if text and "</html>" not in text[-200:] else None
    return judged(r, (2,), passed_then_failed(r), half)


# ---------------------------------------------------------------- verdicts on bad input


def cut_baseline(tree: Path, folder: Path) -> Outcome:
    """A baseline cut to 1 of its header's 30 items, against a candidate that lost 20."""
    gsm = [task("gsm8k", limit=30, items=30)]
    base = write_run(folder / "a.jsonl", header("a", gsm), [item(0)])
    wrong = [item(i, output="#### 999", extracted="999", correct=i >= 20,
                  correct_strict=i >= 20) for i in range(30)]
    cand = write_run(folder / "b.jsonl", header("b", gsm, fingerprint={"kv": "fp8"}), wrong)
    r = kveval(tree, folder, "gate", "--baseline", base, "--candidate", cand)
    return judged(r, (2,), "PASS" if "PASS" in r.out else None)


LP = {"k": 5, "tokens": ["red", " green", " blue"], "logprobs": [-0.5, -0.5, -0.5],
      "top_tokens": [[t, "a", "b", "c", "d"] for t in ("red", " green", " blue")],
      "top_logprobs": [[-0.5, -2.0, -2.5, -3.0, -3.5]] * 3}


def bad_logprobs(change: dict[str, Any]) -> Callable[[Path, Path], Outcome]:
    """A baseline, a noise run and a candidate of 12 answers; the candidate's
    log-probabilities changed; gate --max-kl judges divergence."""
    def case(tree: Path, folder: Path) -> Outcome:
        def run(name: str, lp: dict[str, Any]) -> str:
            rows = [prompt_item(i, "red green blue", logprobs=lp) for i in range(12)]
            return write_run(folder / f"{name}.jsonl", header(name, PROMPTS), rows)
        base, noise, cand = run("b", LP), run("n", LP), run("c", {**LP, **change})
        r = kveval(tree, folder, "gate", "--baseline", base, "--candidate", cand,
                   "--noise", noise, "--max-kl", "0.01")
        return judged(r, (2,), "KL judged" if "KL" in r.out else None)
    return case


def huge_logprob(tree: Path, folder: Path) -> Outcome:
    """A baseline log-probability of -1e308 against a candidate and a noise run of usual
    ones: compare --json must stay JSON."""
    lp = {"k": 2, "tokens": ["a"], "logprobs": [-1e308], "top_tokens": [["a", "b"]],
          "top_logprobs": [[-1e308, -1e308]]}
    fine = {**lp, "logprobs": [-0.1], "top_logprobs": [[-0.1, -3.0]]}
    a = write_run(folder / "a.jsonl", header("a", PROMPTS),
                  [prompt_item(i, "a", logprobs=lp) for i in range(3)])
    b = write_run(folder / "b.jsonl", header("b", PROMPTS),
                  [prompt_item(i, "a", logprobs=fine) for i in range(3)])
    r = kveval(tree, folder, "compare", a, b, "--noise", b, "--json")
    problems = ["Infinity on stdout" if "Infinity" in r.out else None,
                "a RuntimeWarning on stderr" if "RuntimeWarning" in r.err else None]
    return judged(r, (0, 2), *problems, not_json(r))


def not_json(r: Result) -> str | None:
    def refuse(name: str) -> None:
        raise ValueError(name)

    if r.code != 0:
        return None
    try:
        json.loads(r.out, parse_constant=refuse)
    except ValueError:
        return "stdout is not JSON"
    return None


def split_marker(tree: Path, folder: Path) -> Outcome:
    """The page's first-difference marker on an answer that starts with an escape."""
    base = write_run(folder / "b.jsonl", header("b", PROMPTS),
                     [prompt_item(0, "RED"), prompt_item(1, "x")])
    cand = write_run(folder / "c.jsonl", header("c", PROMPTS),
                     [prompt_item(0, "\x1b[31mRED"), prompt_item(1, "x")])
    noise = write_run(folder / "n.jsonl", header("n", PROMPTS),
                      [prompt_item(0, "RED"), prompt_item(1, "x")])
    page = folder / "page.html"
    r = kveval(tree, folder, "report", "--baseline", base, "--candidate", cand, "--noise",
               noise, "-o", str(page))
    text = read(page)
    split = "<mark></mark>" in text or "[31m" in text
    return judged(r, (0, 1), unsaid_regression(r),
                  "the marker splits the escape: <mark></mark>[31mRED" if split else None)
