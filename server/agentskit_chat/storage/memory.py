"""In-process backend: dictionaries of immutable values, for tests and single-process use."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from ._ports import (
    DEFAULT_TENANT,
    HistoryChange,
    HistoryMode,
    SessionExistsError,
    StoredMessage,
    StoredSession,
    StoreUnavailableError,
)
from ._published import FoundDefinition, PublishedDefinition, check_published
from ._turn_events import (
    EventBatch,
    TurnKey,
    TurnSignal,
    holder_topic,
    newest_run,
    turn_topic,
)
from ._wakeups import Wakeups


class MemoryStore:
    """A `Store` held in memory by one event loop.

    No method awaits (but `wait`), so every operation, compare-and-set included, runs to
    completion without interleaving. Stored values are frozen dataclasses, bytes and
    tuples: nothing a caller receives can change what is stored. Wake-ups are futures of
    this process: a store is the bus of one process only. Closing drops all data and
    wakes every waiter.
    """

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], StoredSession] = {}
        self._messages: dict[tuple[str, str], tuple[StoredMessage, ...]] = {}
        self._events: dict[TurnKey, list[tuple[EventBatch, int]]] = {}
        """Each turn's batches in order of their first sequence, with their expiry."""
        self._signals: dict[str, dict[TurnSignal, int]] = {}
        """Each holder's signals, oldest first, with their expiry."""
        self._published: dict[str, tuple[tuple[PublishedDefinition, ...], int]] = {}
        """Each publisher's definitions, with their expiry."""
        self._wakeups = Wakeups()
        self._closed = False

    async def create(self, session: StoredSession) -> None:
        """Insert a new session; raises SessionExistsError when its tenant has the id."""
        self._check_open()
        key = (session.tenant, session.session_id)
        if key in self._sessions:
            raise SessionExistsError("a session with this id already exists")
        self._sessions[key] = _frozen(session)
        self._wakeups.notify_session(session.tenant, session.session_id)

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        """The tenant's stored session, or None."""
        self._check_open()
        return self._sessions.get((tenant, session_id))

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        """Replace the session if its stored cursor equals `expected_cursor` (and its record
        `expected_record`, when given).

        Raises ValueError when `session.cursor` is not `expected_cursor + 1`, when
        `history.keep` is negative, or when it exceeds the stored history's length.
        """
        _check_compare_and_set(session, expected_cursor, history)
        self._check_open()
        key = (session.tenant, session.session_id)
        current = self._sessions.get(key)
        if (
            current is None
            or current.cursor != expected_cursor
            or current.incarnation != session.incarnation
            or (expected_record is not None and current.record != expected_record)
        ):
            return False
        if history is not None:
            kept = self._messages.get(key, ())
            if history.keep > len(kept):
                raise ValueError("history.keep exceeds the number of stored messages")
            messages = kept[: history.keep] + tuple(history.append)
            if messages:
                self._messages[key] = messages
            else:
                self._messages.pop(key, None)
        self._sessions[key] = _frozen(session)
        self._wakeups.notify_session(session.tenant, session.session_id)
        return True

    async def delete(
        self,
        session_id: str,
        *,
        tenant: str = DEFAULT_TENANT,
        expected_cursor: int | None = None,
    ) -> bool:
        """Remove the tenant's session, its messages and its turns' events; False,
        removing nothing, when it does not exist or its cursor differs from
        `expected_cursor`."""
        self._check_open()
        key = (tenant, session_id)
        stored = self._sessions.get(key)
        if stored is None or expected_cursor not in (None, stored.cursor):
            return False
        self._messages.pop(key, None)
        del self._sessions[key]
        for turn in [k for k in self._events if (k.tenant, k.session_id) == key]:
            del self._events[turn]  # its turns' events go with it
        self._wakeups.notify_session(tenant, session_id)
        return True

    async def list_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> Sequence[StoredMessage]:
        """The session's messages, oldest first, as a tuple; empty when there are none."""
        self._check_open()
        return self._messages.get((tenant, session_id), ())

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        """The tenant's session and its messages, as of one moment; None when missing."""
        self._check_open()
        key = (tenant, session_id)
        stored = self._sessions.get(key)
        return None if stored is None else (stored, self._messages.get(key, ()))

    async def append_events(self, key: TurnKey, batch: EventBatch, *, expires_at_ms: int) -> bool:
        """Store `batch`; False, writing nothing, when a stored batch of the turn holds one
        of its sequences or ended the turn, or when `batch` is final and a stored batch
        follows it. ValueError for a batch whose sequences are not 1 <= first <= last."""
        check_batch(batch)
        self._check_open()
        stored = self._events.get(key, [])
        if any(refuses(kept, batch) for kept, _ in stored):
            return False
        stored.append((frozen_batch(batch), expires_at_ms))
        stored.sort(key=lambda entry: entry[0].first)
        self._events[key] = stored
        self._wakeups.notify(turn_topic(key))
        return True

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        """The turn's stored batches holding a sequence after `after`, in order, but for
        those expired at `now_ms`."""
        self._check_open()
        return tuple(
            batch
            for batch, expires_at_ms in self._events.get(key, ())
            if batch.last > after and expires_at_ms > now_ms
        )

    async def newest_run(self, tenant: str, session_id: str, turn_id: str) -> str | None:
        """The name of the newest stored run of `turn_id`, or None."""
        self._check_open()
        names = [
            k.turn_id for k in self._events if (k.tenant, k.session_id) == (tenant, session_id)
        ]
        return newest_run(names, turn_id)

    async def send_signal(self, signal: TurnSignal, *, expires_at_ms: int) -> None:
        """Leave `signal` for its holder; a repeated one keeps its place and the later
        of the two expiries."""
        self._check_open()
        signals = self._signals.setdefault(signal.holder, {})
        signals[signal] = max(expires_at_ms, signals.get(signal, expires_at_ms))
        self._wakeups.notify(holder_topic(signal.holder))

    async def take_signals(self, holder: str) -> tuple[TurnSignal, ...]:
        """Remove and return the signals left for `holder`, oldest first."""
        self._check_open()
        return tuple(self._signals.pop(holder, {}))

    async def expire(self, now_ms: int) -> int:
        """Drop the batches and signals whose expiry is at or before `now_ms`; how many."""
        self._check_open()
        dropped = 0
        for key in list(self._events):
            kept = [entry for entry in self._events[key] if entry[1] > now_ms]
            dropped += len(self._events[key]) - len(kept)
            if kept:
                self._events[key] = kept
            else:
                del self._events[key]
        for holder in list(self._signals):
            signals = self._signals[holder]
            alive = {signal: expiry for signal, expiry in signals.items() if expiry > now_ms}
            dropped += len(signals) - len(alive)
            if alive:
                self._signals[holder] = alive
            else:
                del self._signals[holder]
        return dropped

    async def publish_definitions(
        self,
        publisher: str,
        definitions: Sequence[PublishedDefinition],
        *,
        expires_at_ms: int,
        now_ms: int,
    ) -> None:
        """Make `definitions` the publisher's until `expires_at_ms`; drop expired ones."""
        self._check_open()
        check_published(definitions)
        self._published = {
            name: entry for name, entry in self._published.items() if entry[1] > now_ms
        }
        self._published.pop(publisher, None)
        if definitions:
            self._published[publisher] = (tuple(definitions), expires_at_ms)

    async def published_definition(
        self, definition_id: str, revision: int, *, now_ms: int
    ) -> FoundDefinition | None:
        """The document of a revision some unexpired publisher serves, or None."""
        self._check_open()
        found = [
            FoundDefinition(d.document, expiry)
            for definitions, expiry in self._published.values()
            if expiry > now_ms
            for d in definitions
            if (d.definition_id, d.revision) == (definition_id, revision)
        ]
        return max(found, key=lambda f: f.expires_at_ms, default=None)

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        """Return when one of `topics` is written by this store, or after `timeout`."""
        self._check_open()
        await self._wakeups.wait(topics, timeout)

    async def close(self) -> None:
        """Drop all data and wake every waiter; later calls raise StoreUnavailableError.
        Idempotent."""
        self._closed = True
        self._sessions.clear()
        self._messages.clear()
        self._events.clear()
        self._signals.clear()
        self._published.clear()
        self._wakeups.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailableError("the memory store is closed")


def _check_compare_and_set(
    session: StoredSession, expected_cursor: int, history: HistoryChange | None
) -> None:
    """Reject compare-and-set arguments that no backend may accept (ValueError)."""
    if session.cursor != expected_cursor + 1:
        raise ValueError("session.cursor must be expected_cursor + 1")
    if history is not None and history.keep < 0:
        raise ValueError("history.keep must not be negative")


def check_batch(batch: EventBatch) -> None:
    """Reject a batch no backend may store (ValueError)."""
    if not 1 <= batch.first <= batch.last:
        raise ValueError("an event batch needs sequences 1 <= first <= last")


def refuses(stored: EventBatch, batch: EventBatch) -> bool:
    """Whether `stored` keeps `batch` from being stored beside it: they share a sequence,
    `stored` ended the turn, or `batch` would end it before `stored`."""
    return (
        stored.final
        or (stored.first <= batch.last and batch.first <= stored.last)
        or (batch.final and stored.first > batch.last)
    )


def frozen_batch(batch: EventBatch) -> EventBatch:
    """`batch` holding bytes (not a mutable buffer) and a plain bool."""
    if type(batch.body) is bytes and type(batch.final) is bool:
        return batch
    return replace(batch, body=bytes(batch.body), final=bool(batch.final))


def _frozen(session: StoredSession) -> StoredSession:
    if type(session.record) is bytes and type(session.history_mode) is HistoryMode:
        return session
    return replace(
        session, record=bytes(session.record), history_mode=HistoryMode(session.history_mode)
    )
