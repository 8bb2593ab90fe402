"""What every forcing method's reply becomes: one scored position per answer token."""

from __future__ import annotations

import math
from typing import Any

from kveval.run.forcing.token_ids import ForcedFailure

# one scored position: the answer token's text, its log-probability (None: outside the
# top-K), and the top-K {text: log-probability}, two ids of one text summed (logprobs.outcomes)
Scored = tuple[str, float | None, dict[str, float]]


def compact_scored(scored: list[Scored], k: int) -> dict[str, Any]:
    """The scored positions as a record's compact log-probabilities (run/logprobs.py), a
    position outside the top-K kept with its own log-probability unknown."""
    from kveval.run.logprobs import from_legacy

    return from_legacy({"tokens": [s[0] for s in scored],
                        "token_logprobs": [s[1] for s in scored],
                        "top_logprobs": [s[2] for s in scored]}, k, keep_unknown=True)


def logprob(value: Any) -> float:
    """A log-probability: a number, not NaN, not +infinity (-infinity is a probability of 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ForcedFailure(f"a log-probability that is not a number: {str(value)[:40]}")
    if math.isnan(value) or value == math.inf:
        raise ForcedFailure(f"a log-probability of {value}")
    return float(value)
