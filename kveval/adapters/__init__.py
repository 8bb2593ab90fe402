"""Task adapters, listed in one plain dict. Each builds items and scores answers, purely."""

from __future__ import annotations

from kveval.adapters.base import Adapter

ADAPTERS: dict[str, Adapter] = {}


def _register() -> None:
    from kveval.adapters import gsm8k, prompts

    for module in (gsm8k, prompts):
        ADAPTERS[module.ADAPTER.name] = module.ADAPTER


_register()
