"""Session records through the store: strict decoding, a decode cache, compare-and-set saves."""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable
from typing import TypeVar

from agentskit_chat.conversation import (
    ChatDefinition,
    DefinitionMismatchError,
    Message,
    RecordEncoder,
    ResponseSealer,
    Role,
    SealedResponseError,
    SessionRecord,
    SessionRecordError,
    decode_session_record,
)
from agentskit_chat.storage import (
    HistoryChange,
    HistoryMode,
    SessionExistsError,
    Store,
    StoreCorruptError,
    StoredMessage,
    StoredSession,
    StoreUnavailableError,
)

from ._cache import Entry, SessionCache
from ._catalog import Catalog
from ._errors import Reason, ServiceError, conflict
from ._loaded import Loaded as Loaded  # Where the other service modules find it.
from ._published import PublishedRevisions
from ._tenancy import current_principal
from ._tool_codec import decode_tools, encode_tools

T = TypeVar("T")


def now_ms() -> int:
    """Wall-clock milliseconds, as leases and turn records use them."""
    return time.time_ns() // 1_000_000


def check_expected_cursor(loaded: Loaded, expected_cursor: int | None) -> None:
    """Raise CONFLICT when the request expects another cursor than the stored one."""
    if expected_cursor is not None and expected_cursor != loaded.cursor:
        raise conflict(loaded.cursor)


def refuse_if_leased(loaded: Loaded, at: int, turn_id: str | None = None) -> None:
    """Raise ABORTED while a turn holds an unexpired lease on the session.

    The reason is TURN_IN_PROGRESS when that turn is `turn_id` itself, SESSION_BUSY otherwise.
    """
    lease = loaded.record.lease
    if lease is None or lease.expires_at_ms <= at:
        return
    busy = lease.turn_id != turn_id
    raise ServiceError(
        Reason.SESSION_BUSY if busy else Reason.TURN_IN_PROGRESS,
        "another turn holds the session" if busy else "this turn is still running",
        retry_after_ms=lease.expires_at_ms - at,
    )


class Records:
    """Loads and saves session records; every save is a compare-and-set on the cursor.

    A bounded cache keeps, per session, the last record this process read or wrote, its
    encoder and its server-held history. `load` always reads the stored bytes and only
    skips decoding them when they equal the cached bytes, so a record changed or damaged
    in the store (its cursor unchanged) is decoded, and refused when it does not verify,
    rather than written over from the cache. A write may instead rest on what the cache
    holds without reading (`held`): its compare-and-set then also requires the stored
    record to be the held bytes, so the same change or damage makes it lose, and the read
    that follows refuses the record as `load` would.

    Every session is read and written under the tenant of the current principal
    (`current_principal()`), and a session of a definition the principal may not use reads
    as missing: this is the one place tenancy is applied.
    """

    def __init__(
        self,
        store: Store,
        catalog: Catalog,
        *,
        sealer: ResponseSealer,
        cache: SessionCache | None = None,
        published: PublishedRevisions | None = None,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self._sealer = sealer
        self._cache = cache or SessionCache()
        self.published = published
        """Where sessions of revisions this process does not serve find their definition."""

    async def create(
        self, definition: ChatDefinition, session_id: str, mode: HistoryMode
    ) -> Loaded:
        """Store a new session at the definition's initial state."""
        record = SessionRecord.new(definition, session_id)
        if mode == HistoryMode.SERVER:
            record = record.evolve(messages=0)
        encoder = RecordEncoder(self._sealer)
        tenant = current_principal().tenant
        loaded = Loaded(definition, record, mode, secrets.token_hex(8), tenant)
        stored = self._stored(loaded, record, encoder)
        try:
            await guard(self.store.create(stored))
        except SessionExistsError:
            raise ServiceError(Reason.SESSION_EXISTS, "a session with this id exists") from None
        self._remember(Entry(stored.record, loaded, encoder, ()))
        return loaded

    async def load(self, session_id: str) -> Loaded:
        """The verified stored record of `session_id`, without its history (one small read);
        raises ServiceError when unusable."""
        tenant = current_principal().tenant
        stored = await guard(self.store.load(session_id, tenant=tenant))
        await self._find_published(stored)
        return self._accept(session_id, tenant, stored)

    async def load_with_messages(self, session_id: str) -> tuple[Loaded, tuple[Message, ...]]:
        """The verified stored record of `session_id` and the server-held history that goes
        with it (empty for a client-held history), both as of one moment.

        The history is read in the same snapshot as the record unless the cache holds the
        history of these very bytes: a turn committing between two separate reads would make
        an intact history look short or long. SESSION_CORRUPT when the store holds another
        number of messages than the record counts (rows removed or added behind the service).
        """
        tenant = current_principal().tenant
        stored, messages = await self._read(session_id, tenant)
        await self._find_published(stored)
        loaded = self._accept(session_id, tenant, stored)
        if loaded.history_mode != HistoryMode.SERVER:
            return loaded, ()
        expected = loaded.record.messages
        if expected is not None and len(messages) != expected:
            self._cache.pop(session_id, tenant)  # read again once the rows are repaired
            raise _history_mismatch()
        entry = self._cache.get(session_id, tenant)
        if entry is not None and entry.loaded is loaded:
            self._cache.attach(entry, messages)
        return loaded, messages

    def held(self, session_id: str) -> Entry | None:
        """What this process holds of `session_id` (for the current principal), without
        reading the store: the entry of the bytes it last read or wrote, when it holds the
        history too (server-held sessions) and the definition they were verified with is
        still the one this process serves (a revision another process publishes is read
        again at every load, to learn whether it is still published). A write of something
        decided on it must pass the entry's bytes to `save` as `held`; None when nothing
        usable is held."""
        principal = current_principal()
        entry = self._cache.get(session_id, principal.tenant)
        if entry is None:
            return None
        loaded = entry.loaded
        record = loaded.record
        if (
            (entry.messages is None and loaded.history_mode == HistoryMode.SERVER)
            or not principal.may_use(record.definition_id)
            or self.catalog.find(record.definition_id, record.revision) is not loaded.definition
        ):
            return None
        return entry

    def _accept(self, session_id: str, tenant: str, stored: StoredSession | None) -> Loaded:
        """`stored` verified, or ServiceError (NOT_FOUND for what the principal may not use)."""
        if stored is None or not current_principal().may_use(stored.definition_id):
            self._cache.pop(session_id, tenant)
            raise ServiceError(Reason.SESSION_NOT_FOUND, "no session has this id")
        try:
            return self._verify(session_id, stored)
        except ServiceError:
            self._cache.pop(session_id, tenant)
            raise

    async def _read(
        self, session_id: str, tenant: str
    ) -> tuple[StoredSession | None, tuple[Message, ...]]:
        """The stored session and its server-held history as of one moment: the cached
        history when the stored bytes are the cached ones, else both read in one snapshot."""
        entry = self._cache.get(session_id, tenant)
        if entry is not None and (
            entry.messages is not None or entry.loaded.history_mode == HistoryMode.CLIENT
        ):
            stored = await guard(self.store.load(session_id, tenant=tenant))
            if stored is None or stored.history_mode == HistoryMode.CLIENT:
                return stored, ()
            entry = self._cache.get(session_id, tenant)  # as it is now, after the read
            if (
                entry is not None
                and entry.messages is not None
                and stored.record == entry.data
                and stored.incarnation == entry.loaded.incarnation
            ):
                return stored, entry.messages
        found = await guard(self.store.load_with_messages(session_id, tenant=tenant))
        if found is None:
            return None, ()
        return found[0], tuple(_message(m) for m in found[1])

    async def _find_published(self, stored: StoredSession | None) -> None:
        """Read the definition of `stored`'s revision from what other processes publish,
        when this process does not serve it (see `_verify`)."""
        if (
            stored is not None
            and self.published is not None
            and self.catalog.find(stored.definition_id, stored.revision) is None
            and current_principal().may_use(stored.definition_id)
        ):
            await self.published.fetch(stored.definition_id, stored.revision)

    def definition_of(self, definition_id: str, revision: int) -> ChatDefinition | None:
        """The definition of a revision this process serves, or another process publishes
        (as read lately), or None."""
        found = self.catalog.find(definition_id, revision)
        if found is None and self.published is not None:
            found = self.published.cached(definition_id, revision)
        return found

    def _verify(self, session_id: str, stored: StoredSession) -> Loaded:
        tenant = stored.tenant
        definition = self.definition_of(stored.definition_id, stored.revision)
        if definition is None:
            raise ServiceError(
                Reason.REVISION_MISMATCH,
                "the session was stored for a definition revision no server serves",
                definition_revision=stored.revision,
            )
        entry = self._cache.get(session_id, tenant)
        if (
            entry is not None
            and entry.data == stored.record
            and entry.loaded.definition is definition
            and entry.loaded.history_mode == stored.history_mode
            and entry.loaded.incarnation == stored.incarnation
        ):
            return entry.loaded
        try:
            record = decode_session_record(
                stored.record, definition=definition, session_id=session_id, sealer=self._sealer
            )
        except DefinitionMismatchError:
            raise ServiceError(
                Reason.REVISION_MISMATCH,
                "the session record was written for another definition revision",
            ) from None
        except SealedResponseError:
            raise ServiceError(
                Reason.SESSION_CORRUPT,
                "the stored session record does not open with this server's key",
                code=SealedResponseError.code,
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
        loaded = Loaded(definition, record, stored.history_mode, stored.incarnation, tenant)
        self._remember(Entry(stored.record, loaded, RecordEncoder(self._sealer)))
        return loaded

    async def save(
        self,
        loaded: Loaded,
        record: SessionRecord,
        history: HistoryChange | None = None,
        *,
        definition: ChatDefinition | None = None,
        held: bytes | None = None,
    ) -> Loaded | None:
        """Store `record` if nobody wrote since `loaded`; None when the compare-and-set lost.
        `definition`: the revision the record now belongs to, when it migrated. `held`: the
        bytes `loaded` was held as (`held()`) when it was not read for this write; the
        stored record must then still be those bytes, else the write loses (and the next
        read compares and verifies what is stored, as every read does)."""
        session_id, tenant = record.session_id, loaded.tenant
        entry = self._cache.get(session_id, tenant)
        known = entry is not None and entry.loaded is loaded
        encoder = entry.encoder if entry is not None and known else RecordEncoder(self._sealer)
        saved = record.evolve(cursor=loaded.cursor + 1)
        if history is not None:
            saved = saved.evolve(messages=history.keep + len(history.append))
        stored = self._stored(loaded, saved, encoder)
        try:
            won = await guard(
                self.store.compare_and_set(
                    stored, expected_cursor=loaded.cursor, history=history, expected_record=held
                )
            )
        except ValueError:
            if history is None:
                raise
            # The history change keeps messages the store no longer holds: rows were
            # removed behind this process. Forget what it held so the next read sees the store.
            self._cache.pop(session_id, tenant)
            raise ServiceError(
                Reason.SESSION_CORRUPT,
                "the stored history is missing messages the session holds",
                code="history_mismatch",
            ) from None
        if not won:
            self._cache.pop(session_id, tenant)
            return None
        messages = entry.messages if entry is not None and known else None
        if history is not None and messages is not None:
            kept = messages[: history.keep]
            messages = (
                *kept,
                *map(_message, history.append),
            )
        after = Loaded(
            definition or loaded.definition, saved, loaded.history_mode, loaded.incarnation, tenant
        )
        self._remember(Entry(stored.record, after, encoder, messages))
        return after

    async def delete(self, session_id: str, expected_cursor: int | None = None) -> bool:
        """Remove the session and its messages; False when it does not exist (for the
        current principal), CONFLICT when its cursor is not `expected_cursor` (when given)."""
        principal = current_principal()
        tenant = principal.tenant
        self._cache.pop(session_id, tenant)
        if principal.definitions is not None:
            stored = await guard(self.store.load(session_id, tenant=tenant))
            if stored is None or not principal.may_use(stored.definition_id):
                return False
        deleted = self.store.delete(session_id, tenant=tenant, expected_cursor=expected_cursor)
        if await guard(deleted):
            return True
        if expected_cursor is None:
            return False
        stored = await guard(self.store.load(session_id, tenant=tenant))
        if stored is None:
            return False
        raise conflict(stored.cursor)

    def _stored(
        self, loaded: Loaded, record: SessionRecord, encoder: RecordEncoder
    ) -> StoredSession:
        return StoredSession(
            session_id=record.session_id,
            definition_id=record.definition_id,
            revision=record.revision,
            history_mode=loaded.history_mode,
            cursor=record.cursor,
            record=encoder.encode(record),
            updated_at_ms=now_ms(),
            incarnation=loaded.incarnation,
            tenant=loaded.tenant,
        )

    def _remember(self, entry: Entry) -> None:
        self._cache.put(entry)


def _history_mismatch() -> ServiceError:
    return ServiceError(
        Reason.SESSION_CORRUPT,
        "the stored history does not hold the messages the session record counts",
        code="history_mismatch",
    )


def _message(stored: StoredMessage) -> Message:
    if not stored.tools:
        return Message(stored.message_id, Role(stored.role), stored.content)
    calls, call_id = decode_tools(stored.tools)
    return Message(stored.message_id, Role(stored.role), stored.content, calls, call_id)


def to_stored(message: Message) -> StoredMessage:
    """A history message as the store keeps it."""
    tools = encode_tools(message)
    return StoredMessage(message.id, str(message.role), message.content, tools)


async def guard(call: Awaitable[T]) -> T:
    try:
        return await call
    except StoreCorruptError:
        raise ServiceError(
            Reason.SESSION_CORRUPT, "the stored session is unusable", code="store_corrupt"
        ) from None
    except StoreUnavailableError:
        raise ServiceError(
            Reason.STORE_UNAVAILABLE, "the session store is unavailable; retry later"
        ) from None
