"""Task adapters, listed in one plain dict. Each builds items and scores answers, purely."""

from __future__ import annotations

from kveval.adapters.base import Adapter

ADAPTERS: dict[str, Adapter] = {}


def _register() -> None:
    from kveval.adapters import context, copy, evidence, gsm8k, mrcr, needle, prompts

    adapters: tuple[Adapter, ...] = (gsm8k.ADAPTER, prompts.ADAPTER, needle.ADAPTER,
                                     needle.MULTIKEY_ADAPTER, evidence.ADAPTER,
                                     copy.ADAPTER, mrcr.ADAPTER, context.ADAPTER)
    for adapter in adapters:
        ADAPTERS[adapter.name] = adapter


_register()
