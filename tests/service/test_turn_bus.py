"""The expiry sweep of stored turn events, on a real SQLite store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentskit_chat.conversation import ResponseSealer
from agentskit_chat.service._limits import Limits
from agentskit_chat.service._turn_bus import TurnBus
from agentskit_chat.storage import EventBatch, TurnKey, open_sqlite_store
from agentskit_chat.storage._turn_events import EXPIRE_LIMIT

KEY = TurnKey("", "s1", "t1@1")


def test_the_sweep_drops_more_than_one_calls_limit_at_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await open_sqlite_store(tmp_path / "store.db")
        count = 2 * EXPIRE_LIMIT + 500
        for n in range(1, count + 1):
            await store.append_events(KEY, EventBatch(n, n, b"x"), expires_at_ms=1)
        bus = TurnBus(store, "holder", Limits(), ResponseSealer(b"k" * 32))
        bus.sweep()
        try:
            async with asyncio.timeout(10):  # far below the sweep's period
                while await store.read_events(KEY):
                    await asyncio.sleep(0.05)
        finally:
            await bus.close()
            await store.close()

    asyncio.run(scenario())
