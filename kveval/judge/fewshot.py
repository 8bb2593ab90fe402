"""Pairing an lm-eval log with a kveval run: the same questions, but were the prompts the same?

lm-eval's default sampler draws new exemplars for every question; kveval's default puts the
first N train items before each. Paired items whose prompts differ are not comparable, and
the fix is one option away, so the refusal names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

from kveval.errors import IncomparableError
from kveval.judge.compare import Side

LMEVAL_SEED = 1234


def is_lmeval(side: Side) -> bool:
    return side.header is not None and "lm_eval" in side.header.fingerprint


def _params(side: Side, task: str) -> dict[str, Any]:
    spec = side.header.task(task) if side.header else None
    params = spec.get("params") if spec else None
    return params if isinstance(params, dict) else {}


def _api(side: Side, task: str) -> str:
    spec = side.header.task(task) if side.header else None
    return str(spec.get("api")) if spec else "completions"


def _mismatched(a: Side, b: Side) -> tuple[str, int, int]:
    """The first task with differing prompts, how many paired items differ, of how many."""
    theirs = {item.key: item for item in b.items}
    pairs = [(x, theirs[x.key]) for x in a.items if x.key in theirs]
    differing = [x.task for x, y in pairs if x.prompt_sha256 != y.prompt_sha256]
    return (differing[0] if differing else "", len(differing), len(pairs))


def _describe(side: Side, task: str) -> str:
    params = _params(side, task)
    mode = params.get("fewshot", "first")
    shots = params.get("shots", 8)
    if mode == "lm-eval":
        return f"--fewshot lm-eval --shots {shots} --fewshot-seed {params.get('fewshot_seed')}"
    return f"--fewshot first --shots {shots}: the first {shots} train questions before each"


def _one_turn(side: Side, task: str) -> bool:
    """lm-eval 0.4.0-0.4.2 and --apply_chat_template without multi-turn few-shot sent the
    whole few-shot prompt as one user message."""
    first = next((item for item in side.items if item.task == task), None)
    messages = first.request.get("messages") if first else None
    return isinstance(messages, list) and len(messages) == 1


def _advice(ours: Side, lmeval: Side, task: str) -> str:
    if _api(lmeval, task) == "chat" and _one_turn(lmeval, task):
        return ("lm-eval sent each few-shot prompt as one user message, which kveval does not "
                "build; pair it with another lm-eval log")
    params = _params(lmeval, task)
    shots = params.get("shots")
    seed = params.get("fewshot_seed", LMEVAL_SEED)
    flags = f"--fewshot lm-eval --shots {shots}"
    if seed not in (None, LMEVAL_SEED):
        flags += f" --fewshot-seed {seed}"
    if _api(lmeval, task) != _api(ours, task):
        flags += f" --api {_api(lmeval, task)}"
    if _describe(ours, task).startswith(flags):
        return ("both use lm-eval's sampler, so the questions or train split differ: run "
                "kveval on the same GSM8K data (--data) in the same order")
    return f"rerun kveval with {flags} to send lm-eval's prompts"


def check_pair(a: Side, b: Side) -> None:
    if is_lmeval(a) == is_lmeval(b):
        return
    ours, lmeval = (b, a) if is_lmeval(a) else (a, b)
    task, differing, paired = _mismatched(ours, lmeval)
    if not differing:
        return
    theirs = _params(lmeval, task)
    raise IncomparableError(
        f"the few-shot exemplars differ: {differing} of {paired} paired {task} prompts are not "
        f"the same in {ours.path} (kveval {_describe(ours, task)}) and the lm-eval log "
        f"{lmeval.path} (lm-eval's sampler, {theirs.get('shots')} shots, seed "
        f"{theirs.get('fewshot_seed', LMEVAL_SEED)}); {_advice(ours, lmeval, task)}"
    )


def check_fewshot(sides: Sequence[Side | None]) -> None:
    """Raise IncomparableError when an lm-eval log and a kveval run pair different prompts."""
    present = [side for side in sides if side is not None]
    for a, b in combinations(present, 2):
        check_pair(a, b)
