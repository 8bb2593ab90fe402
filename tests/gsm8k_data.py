"""A GSM8K-shaped data folder for the tests, made from what the repository holds: train.jsonl
and test.jsonl with GSM8K's own sizes (7,473 and 1,319 rows) and shape (a question, a worked
answer with `<<calculator>>` notes ending in `#### N`).

GSM8K's own rows stand at their own places where a test needs them verbatim
(tests/fixtures/gsm8k/rows.jsonl: the first 50 questions, the bundled slice's shots and the
exemplars lm-eval draws for those questions), so prompts built on this folder are lm-eval's
byte for byte; every other row is generated, different from every other.
"""

from __future__ import annotations

import json
from pathlib import Path

ROWS = Path(__file__).parent / "fixtures" / "gsm8k" / "rows.jsonl"
SIZES = {"train": 7473, "test": 1319}


def generated(split: str, index: int) -> dict[str, str]:
    """A row of GSM8K's shape whose question names its split and place."""
    rolls, days, sold = 12 + index % 89, 2 + index % 7, 3 + index % 11
    made = rolls * days
    question = (f"A bakery ({split} {index}) bakes {rolls} rolls a day for {days} days and "
                f"sells {sold} of them. How many rolls are left?")
    answer = (f"The bakery bakes {rolls}*{days} = <<{rolls}*{days}={made}>>{made} rolls.\n"
              f"After selling {sold}, {made}-{sold} = <<{made}-{sold}={made - sold}>>"
              f"{made - sold} rolls are left.\n#### {made - sold}")
    return {"question": question, "answer": answer}


def _real() -> dict[tuple[str, int], dict[str, str]]:
    rows = [json.loads(line) for line in ROWS.read_text().splitlines()]
    return {(r["split"], r["index"]): {"question": r["question"], "answer": r["answer"]}
            for r in rows}


def write_gsm8k(folder: Path) -> Path:
    """train.jsonl and test.jsonl in `folder` (made if missing); the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    real = _real()
    for split, size in SIZES.items():
        rows = (real.get((split, i)) or generated(split, i) for i in range(size))
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder
