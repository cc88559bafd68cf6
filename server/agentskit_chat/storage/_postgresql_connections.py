"""The PostgreSQL store's connections (see postgresql.py): the libpq connection string and
safe error descriptions, the pool and its checkouts, writes that complete even when their
caller is cancelled, the background check of idle connections after a failure, and the
single connection that opens and migrates a database."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ._ports import StoreUnavailableError
from ._postgresql_pool import Checkout, Connection

T = TypeVar("T")

log = logging.getLogger("agentskit_chat.storage.postgresql")

DEFAULT_TIMEOUT: Final = 5.0
"""Seconds to wait for a connection before a call fails as unavailable, unless the URL sets
libpq's `connect_timeout`, which then applies to both."""


class Connections:
    """The connections of one PostgresqlStore: a pool, started by `open_pool`, and single
    connections for opening and migrating. `opened` and `closed` are the store's state;
    calls on a store that is not open fail with StoreUnavailableError, as do failures of
    the server or the network (messages quote neither the password nor stored content)."""

    def __init__(
        self, url: str, *, password: str | None, pool_size: int, timeout: float | None
    ) -> None:
        self.conninfo = conninfo(url, password=password)
        parameters = conninfo_to_dict(self.conninfo)
        self._secret = password or str(parameters.get("password") or "")
        if timeout is None:
            timeout = _connect_timeout(parameters) or DEFAULT_TIMEOUT
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.timeout = timeout
        self._pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            self.conninfo,
            connection_class=Connection,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=timeout,
            name="agentskit-chat",
            reconnect_timeout=3600.0,
        )
        self._checking: asyncio.Task[None] | None = None
        self.opened = False
        self.closed = False

    def describe(self, error: BaseException) -> str:
        """`describe(error)`, the password masked."""
        return describe(error, self._secret)

    async def open_pool(self) -> None:
        """Start the pool and wait for its first connection; then the store is open."""
        try:
            await self._pool.open(wait=True, timeout=self.timeout)
        except (psycopg.Error, PoolTimeout) as exc:
            raise self.unavailable("open", exc) from exc
        self.opened = True

    def check_open(self) -> None:
        """StoreUnavailableError unless the store is open and not closed."""
        if self.closed or not self.opened:
            raise StoreUnavailableError(
                "the postgresql store is closed"
                if self.closed
                else "the postgresql store is not open"
            )

    async def write(self, operation: str, work: Callable[[Connection], Awaitable[T]]) -> T:
        """Run `work` whole even when the caller is cancelled: a write that reached the
        server completes, and its connection goes back to the pool in a known state."""

        async def whole() -> T:
            async with self.checkout(operation) as db:
                return await work(db)

        task = asyncio.ensure_future(whole())
        task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    def checkout(self, operation: str) -> Checkout:
        """A pooled connection for one call (`async with`)."""
        self.check_open()
        return Checkout(self._pool, operation, self._failure)

    def _failure(self, operation: str, error: BaseException, server: bool) -> StoreUnavailableError:
        if server and isinstance(error, psycopg.OperationalError):
            self._check_idle_connections()
        return self.unavailable(operation, error)

    def _check_idle_connections(self) -> None:
        """After a connection failure (a server restart breaks every pooled connection),
        test the idle ones in the background, so that few calls meet a dead one."""
        if self._checking is not None or self.closed:
            return

        async def check() -> None:
            try:
                await self._pool.check()
            except Exception:  # The next failure checks again.
                log.debug("checking pooled connections failed", exc_info=True)
            finally:
                self._checking = None

        self._checking = asyncio.ensure_future(check())

    async def connect_once(self) -> AsyncConnection[Any]:
        """A connection of its own (not pooled), in autocommit; the caller closes it."""
        try:
            return await AsyncConnection.connect(
                self.conninfo, autocommit=True, connect_timeout=max(1, round(self.timeout))
            )
        except psycopg.Error as exc:
            raise self.unavailable("connect", exc, detail=True) from exc

    def unavailable(
        self, operation: str, error: BaseException, *, detail: bool = False
    ) -> StoreUnavailableError:
        """The error to raise for `error` during `operation`."""
        return StoreUnavailableError(
            f"postgresql store {operation} failed: {describe(error, self._secret, detail=detail)}"
        )

    def stop_checking(self) -> None:
        """Cancel the check of idle connections under way, if any."""
        checking, self._checking = self._checking, None
        if checking is not None:
            checking.cancel()

    async def close(self) -> None:
        """Close the pool and its connections."""
        await self._pool.close()


def conninfo(url: str, *, password: str | None = None) -> str:
    """The libpq connection string of `url` plus `password`; ValueError, quoting neither,
    when `url` is not a valid PostgreSQL URL."""
    try:
        parsed = conninfo_to_dict(url)
        if password is not None:
            parsed["password"] = password
        return make_conninfo("", **parsed)
    except psycopg.Error:
        raise ValueError("the postgresql store URL is not a valid libpq connection URI") from None


def describe(error: BaseException, secret: str | None = None, *, detail: bool = False) -> str:
    """A safe one-line description of `error`: its class and SQLSTATE.

    With `detail`, the first line of a connection failure's message is added (libpq names
    the host, port, user and database there, never the password; `secret` is masked anyway).
    """
    text = type(error).__name__
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate:
        text += f" (SQLSTATE {sqlstate})"
    if detail:
        message = str(error).strip().splitlines()
        if message:
            text += f": {message[0].strip()}"
    if secret:
        text = text.replace(secret, "***")
    return text


def _connect_timeout(parameters: dict[str, Any]) -> float | None:
    try:
        value = float(parameters.get("connect_timeout") or 0)
    except ValueError:
        raise ValueError(
            "the postgresql store URL has a connect_timeout that is no number"
        ) from None
    return value if value > 0 else None


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a write's outcome as seen: a caller that was cancelled no longer awaits it."""
    if not task.cancelled():
        task.exception()
