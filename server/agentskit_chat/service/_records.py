"""Session records through the store: strict decoding, a decode cache, compare-and-set saves."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import TypeVar

from agentskit_chat.conversation import (
    ChatDefinition,
    DefinitionMismatchError,
    Message,
    Role,
    SessionRecord,
    SessionRecordError,
    decode_session_record,
    encode_session_record,
)
from agentskit_chat.storage import (
    HistoryChange,
    HistoryMode,
    SessionExistsError,
    Store,
    StoredMessage,
    StoredSession,
    StoreUnavailableError,
)

from ._catalog import Catalog
from ._errors import Reason, ServiceError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Loaded:
    """A verified session record with its definition and storage metadata."""

    definition: ChatDefinition
    record: SessionRecord
    history_mode: HistoryMode

    @property
    def cursor(self) -> int:
        """The stored cursor this record was read at."""
        return self.record.cursor


def now_ms() -> int:
    """Wall-clock milliseconds, as leases and turn records use them."""
    return time.time_ns() // 1_000_000


class Records:
    """Loads and saves session records; every save is a compare-and-set on the cursor."""

    def __init__(self, store: Store, catalog: Catalog, *, cache_size: int = 4096) -> None:
        self.store = store
        self.catalog = catalog
        self._cache: OrderedDict[str, tuple[bytes, SessionRecord]] = OrderedDict()
        self._cache_size = cache_size

    async def create(
        self, definition: ChatDefinition, session_id: str, mode: HistoryMode
    ) -> Loaded:
        """Store a new session at the definition's initial state."""
        record = SessionRecord.new(definition, session_id)
        stored = self._stored(record, mode)
        try:
            await _guard(self.store.create(stored))
        except SessionExistsError:
            raise ServiceError(Reason.SESSION_EXISTS, "a session with this id exists") from None
        self._remember(stored.record, record)
        return Loaded(definition, record, mode)

    async def load(self, session_id: str) -> Loaded:
        """The verified record of `session_id`; raises ServiceError when unusable."""
        stored = await _guard(self.store.load(session_id))
        if stored is None:
            raise ServiceError(Reason.SESSION_NOT_FOUND, "no session has this id")
        definition = self.catalog.find(stored.definition_id)
        if definition is None or definition.revision != stored.revision:
            raise ServiceError(
                Reason.REVISION_MISMATCH,
                "the session was stored for a definition revision this server does not serve",
                definition_revision=stored.revision,
            )
        cached = self._cache.get(session_id)
        if cached is not None and cached[0] == stored.record:
            self._cache.move_to_end(session_id)
            return Loaded(definition, cached[1], stored.history_mode)
        try:
            record = decode_session_record(
                stored.record, definition=definition, session_id=session_id
            )
        except DefinitionMismatchError:
            raise ServiceError(
                Reason.REVISION_MISMATCH,
                "the session record was written for another definition revision",
            ) from None
        except SessionRecordError as exc:
            raise ServiceError(
                Reason.SESSION_CORRUPT, "the stored session record is unusable", code=exc.code
            ) from None
        if record.cursor != stored.cursor:
            raise ServiceError(
                Reason.SESSION_CORRUPT,
                "the stored session record is unusable",
                code="cursor_mismatch",
            )
        self._remember(stored.record, record)
        return Loaded(definition, record, stored.history_mode)

    async def save(
        self, loaded: Loaded, record: SessionRecord, history: HistoryChange | None = None
    ) -> Loaded | None:
        """Store `record` if nobody wrote since `loaded`; None when the compare-and-set lost."""
        saved = replace(record, cursor=loaded.cursor + 1)
        stored = self._stored(saved, loaded.history_mode)
        won = await _guard(
            self.store.compare_and_set(stored, expected_cursor=loaded.cursor, history=history)
        )
        if not won:
            self._cache.pop(record.session_id, None)
            return None
        self._remember(stored.record, saved)
        return Loaded(loaded.definition, saved, loaded.history_mode)

    async def delete(self, session_id: str) -> bool:
        """Remove the session and its messages."""
        self._cache.pop(session_id, None)
        return await _guard(self.store.delete(session_id))

    async def messages(self, session_id: str) -> list[Message]:
        """The server-held history of `session_id`."""
        stored = await _guard(self.store.list_messages(session_id))
        return [Message(m.message_id, Role(m.role), m.content) for m in stored]

    def _stored(self, record: SessionRecord, mode: HistoryMode) -> StoredSession:
        return StoredSession(
            session_id=record.session_id,
            definition_id=record.definition_id,
            revision=record.revision,
            history_mode=mode,
            cursor=record.cursor,
            record=encode_session_record(record),
            updated_at_ms=now_ms(),
        )

    def _remember(self, data: bytes, record: SessionRecord) -> None:
        self._cache[record.session_id] = (data, record)
        self._cache.move_to_end(record.session_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)


def to_stored(message: Message) -> StoredMessage:
    """A history message as the store keeps it."""
    return StoredMessage(message.id, str(message.role), message.content)


async def _guard(call: Awaitable[T]) -> T:
    try:
        return await call
    except StoreUnavailableError:
        raise ServiceError(
            Reason.STORE_UNAVAILABLE, "the session store is unavailable; retry later"
        ) from None
