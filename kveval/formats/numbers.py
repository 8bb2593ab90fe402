"""Numbers read from a server (its log, /metrics, /props, a reply's usage), parsed once and
bounded: a count or an amount that is not one, or lies outside a sane range, is None
(unknown), never a ValueError, an OverflowError or a TypeError further on. Pure.

- `count`: a whole number from 0 (or 1) up to LARGEST, given as an int or as its digits
  (thousands separated by commas, as vLLM logs them); never a bool.
- `amount`: a finite number above 0 up to LARGEST (MiB, GiB, seconds), given as an int, a
  float or a plain decimal (`47.81`); `1.2.3`, `1..5`, `1e999`, `nan` are None.
"""

from __future__ import annotations

import math
import re
from typing import Any

LARGEST = 10 ** 15  # a figure above this (tokens, blocks, bytes, tokens/s) is not one
_DIGITS = re.compile(r"\d{1,3}(?:,\d{3})+|\d{1,16}")
_DECIMAL = re.compile(r"\d{1,16}(?:\.\d{1,16})?")


def count(value: Any, least: int = 0) -> int | None:
    """A count from `least` to LARGEST, else None."""
    if isinstance(value, str):
        text = value.strip()
        value = int(text.replace(",", "")) if _DIGITS.fullmatch(text) else None
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if least <= value <= LARGEST else None


def amount(value: Any) -> float | None:
    """A finite amount above 0 and up to LARGEST, else None."""
    if isinstance(value, str):
        text = value.strip()
        value = float(text) if _DECIMAL.fullmatch(text) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not 0 < value <= LARGEST:
        return None
    number = float(value)
    return number if math.isfinite(number) and 0 < number <= LARGEST else None


def usage_counts(usage: dict[str, Any]) -> dict[str, Any]:
    """A reply's usage with each `*_tokens` count bounded (None where it is not one)."""
    return {key: count(value) if isinstance(key, str) and key.endswith("_tokens") else value
            for key, value in usage.items()}
