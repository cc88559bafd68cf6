"""Session storage: the ports and their in-memory, SQLite and PostgreSQL backends.

Typical use::

    store = await open_store(default_store_url(state_dir_from_env()))
    try:
        await store.create(session)
    finally:
        await store.close()

The PostgreSQL backend (`PostgresqlStore`, `open_postgresql_store`) loads psycopg, which
takes a tenth of a second to import: it is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._files import create_private_file, private_dir, warn_if_exposed
from ._ports import (
    DEFAULT_TENANT,
    HistoryChange,
    HistoryMode,
    MessageStore,
    SessionExistsError,
    SessionStore,
    Store,
    StoreCorruptError,
    StoredMessage,
    StoredSession,
    StoreError,
    StoreUnavailableError,
)
from ._published import DefinitionStore, FoundDefinition, PublishedDefinition
from ._turn_events import (
    EventBatch,
    SignalKind,
    TurnEventStore,
    TurnKey,
    TurnSignal,
    holder_topic,
    session_topic,
    turn_topic,
)
from ._url import (
    DEFAULT_STATE_DIR,
    SQLITE_SUFFIXES,
    STATE_DIR_ENV,
    default_store_url,
    is_postgresql_url,
    open_store,
    redact_url,
    sqlite_path,
    state_dir_from_env,
)
from .memory import MemoryStore
from .sqlite import (
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_SYNCHRONOUS,
    SCHEMA_VERSION,
    SYNCHRONOUS_MODES,
    SqliteStore,
    open_sqlite_store,
)

if TYPE_CHECKING:
    from .postgresql import PostgresqlStore, open_postgresql_store

_LOADED_ON_USE = frozenset({"PostgresqlStore", "open_postgresql_store"})

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "DEFAULT_STATE_DIR",
    "DEFAULT_SYNCHRONOUS",
    "DEFAULT_TENANT",
    "SCHEMA_VERSION",
    "SQLITE_SUFFIXES",
    "STATE_DIR_ENV",
    "SYNCHRONOUS_MODES",
    "DefinitionStore",
    "EventBatch",
    "FoundDefinition",
    "HistoryChange",
    "HistoryMode",
    "MemoryStore",
    "MessageStore",
    "PostgresqlStore",
    "PublishedDefinition",
    "SessionExistsError",
    "SessionStore",
    "SignalKind",
    "SqliteStore",
    "Store",
    "StoreCorruptError",
    "StoreError",
    "StoreUnavailableError",
    "StoredMessage",
    "StoredSession",
    "TurnEventStore",
    "TurnKey",
    "TurnSignal",
    "create_private_file",
    "default_store_url",
    "holder_topic",
    "is_postgresql_url",
    "open_postgresql_store",
    "open_sqlite_store",
    "open_store",
    "private_dir",
    "redact_url",
    "session_topic",
    "sqlite_path",
    "state_dir_from_env",
    "turn_topic",
    "warn_if_exposed",
]


def __getattr__(name: str) -> object:
    if name in _LOADED_ON_USE:
        from . import postgresql

        return getattr(postgresql, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
