"""What every forcing method's reply becomes: one scored position per answer token."""

from __future__ import annotations

import math
from typing import Any

from kveval.run.forcing.token_ids import ForcedFailure

# one scored position: the answer token's text, its log-probability (None: outside the
# top-K), and the top-K {text: log-probability}, two ids of one text summed (logprobs.outcomes)
Scored = tuple[str, float | None, dict[str, float]]


def logprob(value: Any) -> float:
    """A log-probability: a number, not NaN, not +infinity (-infinity is a probability of 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ForcedFailure(f"a log-probability that is not a number: {str(value)[:40]}")
    if math.isnan(value) or value == math.inf:
        raise ForcedFailure(f"a log-probability of {value}")
    return float(value)
