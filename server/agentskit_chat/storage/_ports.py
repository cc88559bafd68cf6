"""Storage ports: session records with compare-and-set, and server-held message history.

A backend implements both protocols over one database so that a turn's session record and
its history change commit in one transaction. Records are opaque bytes here: encoding and
verification belong to the conversation core (`encode_session_record`).

Sessions are namespaced by tenant: every key is the pair (tenant, session id). A backend
never lets a call for one tenant see, change or collide with another tenant's session; the
same session id may exist once per tenant. `DEFAULT_TENANT` is the tenant of servers without
authentication.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Protocol

from ._published import DefinitionStore
from ._turn_events import TurnEventStore

DEFAULT_TENANT: Final = ""


class HistoryMode(StrEnum):
    """Who keeps a session's messages."""

    SERVER = "server"
    CLIENT = "client"


@dataclass(frozen=True, slots=True)
class StoredSession:
    """One stored session: indexed metadata plus the opaque record bytes."""

    session_id: str
    definition_id: str
    revision: int
    history_mode: HistoryMode
    cursor: int
    """Increases by one on every save; compare-and-set compares it."""
    record: bytes = field(repr=False)
    """The encoded `agentskit.chat.session` record; never message text."""
    updated_at_ms: int
    incarnation: str = ""
    """Chosen when the session is created and never changed: a session deleted and created
    again under the same id is another incarnation, and compare-and-set tells them apart."""
    tenant: str = DEFAULT_TENANT
    """The namespace of `session_id`; part of the key."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message of a server-held history."""

    message_id: str
    role: str
    content: str = field(repr=False)
    tools: str = field(default="", repr=False)
    """Tool data of the message as the service encodes it (JSON text); empty for none."""


@dataclass(frozen=True, slots=True)
class HistoryChange:
    """Keep the first `keep` messages of the history, then append `append`."""

    keep: int
    append: tuple[StoredMessage, ...] = ()


class StoreError(Exception):
    """Base class of storage failures; messages never contain stored content."""


class SessionExistsError(StoreError):
    """`create` found a session with the same id."""


class StoreUnavailableError(StoreError):
    """The backend cannot be reached or failed; nothing was written."""


class StoreCorruptError(StoreError):
    """A stored session or message cannot be read back as written; nothing was changed."""


class SessionStore(Protocol):
    """Session records with compare-and-set on the cursor."""

    async def create(self, session: StoredSession) -> None:
        """Insert a new session; raises SessionExistsError when its tenant has the id."""
        ...

    async def load(self, session_id: str, *, tenant: str = DEFAULT_TENANT) -> StoredSession | None:
        """The tenant's stored session, or None."""
        ...

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        """Replace the session (`session.tenant`, `session.session_id`) if its stored cursor
        equals `expected_cursor` and its incarnation equals `session.incarnation`, and, when
        `expected_record` is given, its stored record bytes are `expected_record`.

        `session.cursor` must be `expected_cursor + 1`. `history`, when given, is applied to
        the session's messages in the same transaction. Returns False, writing nothing, when
        the session is missing or its cursor differs, or its record is not
        `expected_record`: a caller that did not read the record for this write (it holds
        it from an earlier one) learns so when the record was changed or damaged behind an
        unchanged cursor, whoever wrote it and however.
        """
        ...

    async def delete(
        self,
        session_id: str,
        *,
        tenant: str = DEFAULT_TENANT,
        expected_cursor: int | None = None,
    ) -> bool:
        """Remove the tenant's session, its messages and its turns' events; False,
        removing nothing, when it does not exist or (when `expected_cursor` is given) its
        stored cursor differs."""
        ...

    async def close(self) -> None:
        """Release connections and threads."""
        ...


class MessageStore(Protocol):
    """Server-held history, written only through `SessionStore.compare_and_set`."""

    async def load_with_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> tuple[StoredSession, tuple[StoredMessage, ...]] | None:
        """The tenant's stored session and its messages (oldest first) as of one moment:
        no commit falls between the two reads, so the record's message count can be
        compared with them. None when the session does not exist."""
        ...

    async def list_messages(
        self, session_id: str, *, tenant: str = DEFAULT_TENANT
    ) -> Sequence[StoredMessage]:
        """The tenant's session's messages, oldest first; empty when there are none."""
        ...


class Store(SessionStore, MessageStore, TurnEventStore, DefinitionStore, Protocol):
    """A backend that provides the ports over one database: sessions, their messages,
    the events and signals of their running turns, and the published definitions."""
