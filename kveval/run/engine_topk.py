"""The embedded engine's top-K log-probabilities by numpy, without Python's sort of the vocabulary.

llama-cpp-python picks each position's top K by `sorted(zip(logprobs, range(n)), reverse=True)`
over the whole vocabulary (49,152 pairs for the bundled model, per token) and keeps the first K.
`install` puts a `sorted` into its module that answers exactly that call from the array the
zip holds (np.partition, then the candidates ordered as the sort orders them: by value, then
by index, both descending) and hands every other call to the built-in. The values are the
array's own, so the log-probabilities are the same to the last bit; only the sort is gone.
"""

from __future__ import annotations

import builtins
import sys
from typing import Any

import numpy as np


def top_pairs(values: np.ndarray, k: int) -> list[tuple[Any, int]]:
    """`sorted(zip(values, range(len(values))), reverse=True)[:k]`, for an array without NaN."""
    k = min(k, len(values))
    if k <= 0:
        return []
    kth = np.partition(values, len(values) - k)[len(values) - k]
    candidates = np.flatnonzero(values >= kth)
    order = candidates[np.lexsort((-candidates, -values[candidates]))][:k]
    return [(values[i], int(i)) for i in order]


def _array(pairs: Any) -> np.ndarray | None:
    """The 1-D array of a fresh `zip(array, range(len(array)))`, or None for anything else."""
    if type(pairs) is not zip:
        return None
    parts = pairs.__reduce__()[1]
    if len(parts) != 2:
        return None
    first, second = (part.__reduce__() for part in parts)
    array, span = first[1][0], second[1][0]
    fresh = len(first) == 3 and first[2] == 0 and len(second) == 3 and second[2] == 0
    if not (fresh and isinstance(array, np.ndarray) and array.ndim == 1
            and span == range(len(array))) or np.isnan(array).any():
        return None
    return array


def _sorted(iterable: Any, /, *, key: Any = None, reverse: bool = False) -> list[Any]:
    asked = sys._getframe(1).f_locals.get("logprobs")
    array = _array(iterable) if key is None and reverse else None
    if array is None or type(asked) is not int:
        return builtins.sorted(iterable, key=key, reverse=reverse)
    return top_pairs(array, asked)


def install() -> None:
    """Answer llama-cpp-python's top-K sort with `top_pairs` (its module's `sorted` only)."""
    import llama_cpp.llama

    llama_cpp.llama.sorted = _sorted  # type: ignore[attr-defined, unused-ignore]
