"""GSM8K scoring beside lm-evaluation-harness's: where they agree, and the documented places
where they differ. The lm-eval columns were computed with lm-eval 0.4.13 itself (its
RegexFilter for strict-match and flexible-extract, and exact_match with gsm8k.yaml's
regexes_to_ignore) on these outputs."""

from __future__ import annotations

import pytest

from kveval.adapters.base import Item
from kveval.adapters.gsm8k import ADAPTER

# output, reference, lm-eval strict-match correct, lm-eval flexible-extract correct
LM_EVAL = [
    ("She makes $18.\n#### 18", "18", True, True),
    ("#### $18", "18", False, True),
    ("#### 18.00", "18", False, False),
    ("#### 1,000.", "1000", True, True),
    ("#### -7", "-7", True, True),
    ("#### \u22127", "-7", False, False),
    ("The answer is 18.", "18", False, True),
    ("So 18...", "18", False, False),
    ("It costs $18, total.", "18", False, True),
    ("#### 5\n#### 6", "5", True, False),
    ("Answer: 18.0", "18", False, False),
    ("#### 18\nQuestion", "18", True, True),
    ("No number", "3", False, False),
    ("She pays $1,000.00 in all.", "1000", False, False),
    ("It is 0.5.", "0.5", False, True),
    ("The answer is 12 $,", "12", False, False),
]
MINUS_SIGN = {"#### \u22127"}  # kveval reads U+2212 as "-"; lm-eval does not
# kveval's flexible match compares numbers as numbers and skips a last match that is no number
FLEXIBLE_DIFFERS = {"#### 18.00", "#### \u22127", "So 18...", "Answer: 18.0",
                    "She pays $1,000.00 in all.", "The answer is 12 $,"}


@pytest.mark.parametrize(("output", "reference", "strict", "flexible"), LM_EVAL)
def test_scores_beside_lm_eval(output: str, reference: str, strict: bool,
                               flexible: bool) -> None:
    score = ADAPTER.score(Item(task="gsm8k", item_id="x", prompt="p", reference=reference),
                          output)
    assert score.correct_strict is (strict or output in MINUS_SIGN)
    assert score.correct is (flexible or output in FLEXIBLE_DIFFERS)
    if output in FLEXIBLE_DIFFERS:
        assert score.correct and not flexible  # kveval only ever counts more as correct here
