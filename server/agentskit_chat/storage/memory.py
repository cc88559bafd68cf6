"""In-process backend: dictionaries of immutable values, for tests and single-process use."""

from __future__ import annotations

from collections.abc import Sequence
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


class MemoryStore:
    """A `Store` held in memory by one event loop.

    No method awaits, so every operation, compare-and-set included, runs to completion
    without interleaving. Stored values are frozen dataclasses, bytes and tuples: nothing a
    caller receives can change what is stored. Closing drops all data.
    """

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], StoredSession] = {}
        self._messages: dict[tuple[str, str], tuple[StoredMessage, ...]] = {}
        self._closed = False

    async def create(self, session: StoredSession) -> None:
        """Insert a new session; raises SessionExistsError when its tenant has the id."""
        self._check_open()
        key = (session.tenant, session.session_id)
        if key in self._sessions:
            raise SessionExistsError("a session with this id already exists")
        self._sessions[key] = _frozen(session)

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
    ) -> bool:
        """Replace the session if its stored cursor equals `expected_cursor`.

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
        return True

    async def delete(
        self,
        session_id: str,
        *,
        tenant: str = DEFAULT_TENANT,
        expected_cursor: int | None = None,
    ) -> bool:
        """Remove the tenant's session and its messages; False, removing nothing, when it
        does not exist or its cursor differs from `expected_cursor`."""
        self._check_open()
        key = (tenant, session_id)
        stored = self._sessions.get(key)
        if stored is None or expected_cursor not in (None, stored.cursor):
            return False
        self._messages.pop(key, None)
        del self._sessions[key]
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

    async def close(self) -> None:
        """Drop all data; later calls raise StoreUnavailableError. Idempotent."""
        self._closed = True
        self._sessions.clear()
        self._messages.clear()

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


def _frozen(session: StoredSession) -> StoredSession:
    if type(session.record) is bytes and type(session.history_mode) is HistoryMode:
        return session
    return replace(
        session, record=bytes(session.record), history_mode=HistoryMode(session.history_mode)
    )
