"""A store that hands every call to a real one; tests override the calls they watch."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from agentskit_chat.storage import (
    DEFAULT_TENANT,
    EventBatch,
    FoundDefinition,
    HistoryChange,
    PublishedDefinition,
    Store,
    StoredMessage,
    StoredSession,
    TurnKey,
    TurnSignal,
)


class Forwarding:
    """Every `Store` call, passed on to `store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(self, session: StoredSession) -> None:
        await self.store.create(session)

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        return await self.store.load(session_id, tenant=tenant)

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        return await self.store.compare_and_set(
            session,
            expected_cursor=expected_cursor,
            history=history,
            expected_record=expected_record,
        )

    async def delete(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT, expected_cursor: int | None = None
    ) -> bool:
        return await self.store.delete(session_id, tenant=tenant, expected_cursor=expected_cursor)

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        return await self.store.load_with_messages(session_id, tenant=tenant)

    async def list_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> Sequence[StoredMessage]:
        return await self.store.list_messages(session_id, tenant=tenant)

    async def append_events(self, key: TurnKey, batch: EventBatch, *, expires_at_ms: int) -> bool:
        return await self.store.append_events(key, batch, expires_at_ms=expires_at_ms)

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        return await self.store.read_events(key, after, now_ms=now_ms)

    async def newest_run(self, tenant: str, session_id: str, turn_id: str) -> str | None:
        return await self.store.newest_run(tenant, session_id, turn_id)

    async def send_signal(self, signal: TurnSignal, *, expires_at_ms: int) -> None:
        await self.store.send_signal(signal, expires_at_ms=expires_at_ms)

    async def take_signals(self, holder: str) -> tuple[TurnSignal, ...]:
        return await self.store.take_signals(holder)

    async def expire(self, now_ms: int) -> int:
        return await self.store.expire(now_ms)

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        await self.store.wait(topics, timeout)

    async def publish_definitions(
        self,
        publisher: str,
        definitions: Sequence[PublishedDefinition],
        *,
        expires_at_ms: int,
        now_ms: int,
    ) -> None:
        await self.store.publish_definitions(
            publisher, definitions, expires_at_ms=expires_at_ms, now_ms=now_ms
        )

    async def published_definition(
        self, definition_id: str, revision: int, *, now_ms: int
    ) -> FoundDefinition | None:
        return await self.store.published_definition(definition_id, revision, now_ms=now_ms)

    async def close(self) -> None:
        await self.store.close()
