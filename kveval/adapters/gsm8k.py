r"""GSM8K, 8-shot, greedy: prompts as lm-evaluation-harness builds them, two extractions.

Few-shot exemplars: `first` (default) puts the first N train items before every question
(lm-eval's `first_n` sampler, vLLM's gsm8k_eval.py), so a server can reuse one cached prefix;
`lm-eval` draws them as lm-eval's default sampler does, so prompts are byte-identical to
lm-eval's and each item's prompt_sha256 equals lm-eval's prompt_hash.

`correct` is the flexible match (the last number in the answer, compared as a number),
robust to chat models that drop the `#### N` format. `correct_strict` is lm-evaluation-
harness's strict-match: its regex `#### (\-?[0-9\.\,]+)`, the first match, compared as
its exact_match does (`,` and `$` removed, one trailing `.` removed). Before either, a
`<think>` block is removed and the unicode minus sign (U+2212) becomes `-`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from kveval.adapters.base import BuildContext, Item, Message, Score, TaskSpec
from kveval.adapters.text import strip_thinking

_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")  # lm-eval's strict-match, verbatim
# lm-eval gsm8k.yaml's regexes_to_ignore for exact_match, in its order
_IGNORED = tuple(re.compile(p) for p in (",", r"\$", r"(?s).*#### ", r"\.$"))
MINUS = "\u2212"  # the unicode minus sign, read as "-"
_NUMBER = re.compile(r"-?\$?[0-9][0-9,]*(?:\.[0-9]+)?|-?\$?\.[0-9]+")


@dataclass(frozen=True)
class Gsm8kData:
    """The two splits, each a list of {"question", "answer"} dicts, and where they came from."""

    train: Sequence[Mapping[str, str]]
    test: Sequence[Mapping[str, str]]
    source: str


def normalize_number(text: str | None) -> Decimal | None:
    """'$1,000.00', '1000' and '1000.' are one number; None when text is no number."""
    if text is None:
        return None
    cleaned = text.strip().replace(",", "").replace("$", "").rstrip(".")
    if not cleaned or cleaned in {"-", "."}:
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def same_number(a: str | None, b: str | None) -> bool:
    x, y = normalize_number(a), normalize_number(b)
    return x is not None and y is not None and x == y


def answer_text(output: str) -> str:
    """The answer without its thinking, the unicode minus sign read as "-"."""
    return strip_thinking(output).replace(MINUS, "-")


def extract_strict(output: str) -> str | None:
    """lm-eval's strict-match: the first `#### N` (so `#### $18` is none)."""
    match = _STRICT.search(answer_text(output))
    return match.group(1).strip() if match else None


def lm_eval_exact(prediction: str | None, reference: str | None) -> bool:
    """lm-eval's exact_match for GSM8K: both sides without `,`, `$`, a trailing `.`, any case."""
    if prediction is None or reference is None:
        return False
    return _lm_eval_normal(prediction) == _lm_eval_normal(reference)


def _lm_eval_normal(text: str) -> str:
    for pattern in _IGNORED:
        text = pattern.sub("", text)
    return text.lower()


def extract_flexible(output: str) -> str | None:
    """The last number in the answer (thinking removed); see README for how it differs from
    lm-eval's flexible-extract."""
    numbers = _NUMBER.findall(answer_text(output))
    for candidate in reversed(numbers):
        if normalize_number(candidate) is not None:
            return candidate.replace("$", "")
    return None


def reference_answer(worked: str) -> str:
    """The final answer of a GSM8K worked solution (the text after '####')."""
    return worked.split("####")[-1].strip().replace(",", "")


FEWSHOT_MODES = ("first", "lm-eval")
LMEVAL_SEED = 1234  # lm-eval's default --fewshot_seed


def shots(train: Sequence[Mapping[str, str]], n: int, seed: int | None) -> list[Mapping[str, str]]:
    """The first n train items, or n sampled with random.Random(seed) when a seed is given."""
    if seed is None:
        return list(train[:n])
    return random.Random(seed).sample(list(train), n)


def lmeval_draws(train: Sequence[Mapping[str, str]], n: int, seed: int,
                 count: int) -> list[list[Mapping[str, str]]]:
    """lm-eval's default ContextSampler: one random.Random(seed) stream shared by all
    questions in question order; question i gets the i-th draw of n train items. (The
    sampler leaves the question itself out only when it samples from the test split.)"""
    rnd = random.Random(seed)
    pool = list(train)
    return [rnd.sample(pool, n) if n else [] for _ in range(count)]


def lmeval_chat_messages(exemplars: Sequence[Mapping[str, str]],
                         question: str) -> tuple[Message, ...]:
    """lm-eval's chat prompt (--apply_chat_template, few-shot as multiple turns)."""
    messages: list[Message] = []
    for s in exemplars:
        messages.append({"role": "user", "content": f"Question: {s['question']}\nAnswer:"})
        messages.append({"role": "assistant", "content": s["answer"]})
    messages.append({"role": "user", "content": f"Question: {question}\nAnswer:"})
    return tuple(messages)


def lmeval_chat_hash_body(messages: Sequence[Message]) -> str:
    """The text lm-eval hashes into prompt_hash for a chat prompt: its JSON of the messages."""
    return json.dumps(list(messages), ensure_ascii=False)


def completion_prompt(exemplars: Sequence[Mapping[str, str]], question: str) -> str:
    parts = [f"Question: {s['question']}\nAnswer: {s['answer']}\n\n" for s in exemplars]
    return "".join(parts) + f"Question: {question}\nAnswer:"


def chat_messages(exemplars: Sequence[Mapping[str, str]], question: str) -> tuple[Message, ...]:
    messages: list[Message] = []
    for s in exemplars:
        messages.append({"role": "user", "content": f"Question: {s['question']}"})
        messages.append({"role": "assistant", "content": f"Answer: {s['answer']}"})
    messages.append({"role": "user", "content": f"Question: {question}"})
    return tuple(messages)


class Gsm8k:
    name = "gsm8k"
    description = "grade-school maths, 8-shot, greedy: accuracy (flexible and strict `#### N`)"

    def build(self, spec: TaskSpec, ctx: BuildContext) -> list[Item]:
        data: Gsm8kData = ctx.data
        params: dict[str, Any] = spec.params
        split = params.get("split", "test")
        rows = data.test if spec.limit is None else data.test[: spec.limit]
        lmeval = params.get("fewshot", "first") == "lm-eval"
        draws = self._draws(data, params, len(rows), lmeval)
        return [self._item(spec, draws[i], split, i, row, lmeval) for i, row in enumerate(rows)]

    @staticmethod
    def _draws(data: Gsm8kData, params: dict[str, Any], count: int,
               lmeval: bool) -> Sequence[Sequence[Mapping[str, str]]]:
        n = int(params.get("shots", 8))
        if lmeval:
            return lmeval_draws(data.train, n, int(params.get("fewshot_seed", LMEVAL_SEED)),
                                count)
        return [shots(data.train, n, params.get("shot_seed"))] * count

    def _item(self, spec: TaskSpec, exemplars: Sequence[Mapping[str, str]], split: str,
              index: int, row: Mapping[str, str], lmeval: bool = False) -> Item:
        question = row["question"]
        common: dict[str, Any] = {
            "task": spec.name,
            "item_id": f"{spec.name}/{split}/{index:04d}",
            "reference": reference_answer(row["answer"]),
            "meta": {"index": index},
        }
        if spec.api == "chat" and lmeval:
            messages = lmeval_chat_messages(exemplars, question)
            return Item(messages=messages, hash_body=lmeval_chat_hash_body(messages), **common)
        if spec.api == "chat":
            return Item(messages=chat_messages(exemplars, question), **common)
        return Item(prompt=completion_prompt(exemplars, question), **common)

    def score(self, item: Item, output: str) -> Score:
        flexible = extract_flexible(output)
        strict = extract_strict(output)
        return Score(
            extracted=flexible,
            correct=same_number(flexible, item.reference),
            correct_strict=lm_eval_exact(strict, item.reference),
            meta={"extracted_strict": strict},
        )


ADAPTER = Gsm8k()
