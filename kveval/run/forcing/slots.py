"""llama-server's slots, shared by a run's forced-decoding items (run/forcing/decoding.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class SlotPool:
    """llama-server's slots, one item at a time on each, so an item's positions reuse the
    prefix its slot holds. None slots: the server picks (it prefers the best cached match)."""

    def __init__(self, slots: int | None) -> None:
        self.slots = slots
        self._free: asyncio.Queue[int] | None = None

    @contextlib.asynccontextmanager
    async def take(self) -> AsyncIterator[int | None]:
        if self.slots is None:
            yield None
            return
        if self._free is None:
            self._free = asyncio.Queue()
            for slot in range(self.slots):
                self._free.put_nowait(slot)
        slot = await self._free.get()
        try:
            yield slot
        finally:
            self._free.put_nowait(slot)
