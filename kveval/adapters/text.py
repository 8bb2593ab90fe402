"""Text helpers shared by adapters."""

from __future__ import annotations

import re

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_STRAY_CLOSE = re.compile(r"^.*?</think>", re.DOTALL)


def strip_thinking(text: str) -> str:
    """Remove `<think>...</think>` blocks; an unclosed block runs to the end.

    Some templates open the block in the prompt, so a lone `</think>` ends thinking too.
    """
    text = _THINK.sub("", text)
    if "</think>" in text:
        text = _STRAY_CLOSE.sub("", text, count=1)
    return text
