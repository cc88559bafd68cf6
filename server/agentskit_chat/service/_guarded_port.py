"""The store's live-turn port as the service calls it: a store error is a ServiceError
(STORE_UNAVAILABLE, or SESSION_CORRUPT for what cannot be read back), as for the records."""

from __future__ import annotations

from collections.abc import Collection

from agentskit_chat.storage._turn_events import EventBatch, TurnEventStore, TurnKey, TurnSignal

from ._records import guard


class GuardedPort:
    """A `TurnEventStore` whose store errors are ServiceErrors."""

    def __init__(self, port: TurnEventStore) -> None:
        self.port = port

    async def append_events(self, key: TurnKey, batch: EventBatch, *, expires_at_ms: int) -> bool:
        return await guard(self.port.append_events(key, batch, expires_at_ms=expires_at_ms))

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        return await guard(self.port.read_events(key, after, now_ms=now_ms))

    async def newest_run(self, tenant: str, session_id: str, turn_id: str) -> str | None:
        return await guard(self.port.newest_run(tenant, session_id, turn_id))

    async def send_signal(self, signal: TurnSignal, *, expires_at_ms: int) -> None:
        await guard(self.port.send_signal(signal, expires_at_ms=expires_at_ms))

    async def take_signals(self, holder: str) -> tuple[TurnSignal, ...]:
        return await guard(self.port.take_signals(holder))

    async def expire(self, now_ms: int) -> int:
        return await guard(self.port.expire(now_ms))

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        await guard(self.port.wait(topics, timeout))
