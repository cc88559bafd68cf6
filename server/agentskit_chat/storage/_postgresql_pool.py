"""The PostgreSQL store's way to its pool (see postgresql.py): the connection class, the
checkout of one call, and the parameters of a history change in their cheapest form."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import psycopg
from psycopg import AsyncConnection, AsyncCursor
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from ._ports import StoreUnavailableError


class Connection(AsyncConnection[Any]):
    """A pooled connection that keeps one cursor for the session statements of a turn.

    Its adaptation caches then outlive a call, and it reads results in binary: the record
    comes back as its bytes, not as hex text to decode.
    """

    _session_cursor: AsyncCursor[Any] | None = None

    def session_cursor(self) -> AsyncCursor[Any]:
        cursor = self._session_cursor
        if cursor is None or cursor.closed:
            cursor = self._session_cursor = self.cursor(binary=True)
        return cursor


Failure = Callable[[str, BaseException, bool], StoreUnavailableError]
"""(operation, error, whether the pool's idle connections may be broken too) -> the error
to raise."""


class Checkout:
    """A pooled connection for one call: taken on entry, given back on exit (the pool
    discards a broken one and rolls back one left in a transaction), psycopg's failures
    mapped by `failure`. Cheaper than the pool's `connection()`, whose transaction block
    is idle work here: every pooled connection is in autocommit."""

    __slots__ = ("_db", "_failure", "_operation", "_pool")

    def __init__(
        self, pool: AsyncConnectionPool[Connection], operation: str, failure: Failure
    ) -> None:
        self._pool = pool
        self._operation = operation
        self._failure = failure
        self._db: Connection | None = None

    async def __aenter__(self) -> Connection:
        try:
            self._db = await self._pool.getconn()
        except (PoolTimeout, PoolClosed) as exc:
            raise self._failure(self._operation, exc, False) from exc
        except psycopg.Error as exc:
            raise self._failure(self._operation, exc, True) from exc
        return self._db

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        db, self._db = self._db, None
        if db is not None:
            await self._pool.putconn(db)  # closes it when the pool is closed
        if isinstance(exc, psycopg.Error):
            raise self._failure(self._operation, exc, True) from exc


def text_array(values: Sequence[str]) -> str:
    """The array literal of `values` (array_in's quoting): cheaper to pass than a list,
    which psycopg adapts element by element on every call."""
    quoted = (value.replace("\\", "\\\\").replace('"', '\\"') for value in values)
    return "{" + ",".join(f'"{value}"' for value in quoted) + "}"


def bytea_array(values: Sequence[bytes]) -> str:
    """The array literal of `values`, each in bytea's hex form."""
    return "{" + ",".join(f'"\\\\x{value.hex()}"' for value in values) + "}"
