"""PostgreSQL side of live turns (see postgresql.py): the migration adding event batches
and signals, their statements, and the connection that listens for wake-ups."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from contextlib import suppress
from typing import Any, Final

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ._ports import StoreCorruptError
from ._turn_events import EXPIRE_LIMIT, EventBatch, SignalKind
from ._wakeups import Wakeups

log = logging.getLogger("agentskit_chat.storage.postgresql")

NOTIFY_CHANNEL: Final = "agentskit_chat"
"""The LISTEN/NOTIFY channel of wake-ups; each notification's payload is one topic."""
TURN_LOCK: Final = 0x61676B74  # "agkt": the advisory lock class of one turn's appends
"""Rows of each table one `expire` call drops at most."""
INTEREST_TTL_MS: Final = 120_000
"""How long a registered topic stays registered without being waited on again."""
INTEREST_REFRESH: Final = 30.0
"""Seconds after which a topic still waited on is registered again."""
INTEREST_GRACE: Final = 0.5
"""Seconds after a topic's registration during which waits on it return this early: a
write already under way when the registration committed may not have seen it."""
NOTIFY_IF_WAITED: Final = "(SELECT pg_notify(%s, topic) FROM wake_interest WHERE topic = %s)"
"""A scalar subquery that notifies the topic when some store waits on it: (channel, topic)."""
REGISTER: Final = (
    "INSERT INTO wake_interest (topic, expires_at_ms) SELECT unnest(%s::text[]), %s"
    " ON CONFLICT (topic) DO UPDATE"
    " SET expires_at_ms = greatest(wake_interest.expires_at_ms, excluded.expires_at_ms)"
)
_KINDS: Final = ", ".join(f"'{kind.value}'" for kind in SignalKind)
LISTEN_RETRY_MIN: Final = 0.1
LISTEN_RETRY_MAX: Final = 5.0
"""Seconds before listening again after the listening connection failed: doubling."""
_KEEPALIVES: Final = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}
"""TCP keepalives of the listening connection (unless the URL sets its own), so that a
server gone without a word is noticed: that connection only ever reads."""

MIGRATION: Final = (
    """CREATE TABLE turn_events (
        tenant text NOT NULL,
        session_id text NOT NULL,
        turn_id text NOT NULL,
        first_sequence bigint NOT NULL,
        last_sequence bigint NOT NULL,
        final boolean NOT NULL,
        body bytea NOT NULL,
        expires_at_ms bigint NOT NULL,
        PRIMARY KEY (tenant, session_id, turn_id, first_sequence)
    )""",
    "CREATE INDEX turn_events_expiry ON turn_events (expires_at_ms)",
    # `sent` orders a holder's signals: a repeated signal keeps its row (and place).
    """CREATE TABLE turn_signals (
        holder text NOT NULL,
        kind text NOT NULL,
        tenant text NOT NULL,
        session_id text NOT NULL,
        turn_id text NOT NULL,
        expires_at_ms bigint NOT NULL,
        sent bigint GENERATED ALWAYS AS IDENTITY,
        PRIMARY KEY (holder, kind, tenant, session_id, turn_id)
    )""",
    "CREATE INDEX turn_signals_expiry ON turn_signals (expires_at_ms)",
    # The topics some store waits on: a write notifies its topic only when listed here.
    """CREATE TABLE wake_interest (
        topic text PRIMARY KEY,
        expires_at_ms bigint NOT NULL
    )""",
    "CREATE INDEX wake_interest_expiry ON wake_interest (expires_at_ms)",
    # An append in one round trip: the turn's appends one at a time (an advisory lock,
    # so that two never both pass the check), the check, the insert, the wake-up.
    f"""CREATE FUNCTION append_turn_events(
        p_tenant text, p_session_id text, p_turn_id text, p_first bigint, p_last bigint,
        p_final boolean, p_body bytea, p_expires_at_ms bigint, p_channel text, p_topic text
    ) RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_advisory_xact_lock(
            {TURN_LOCK}, hashtext(concat_ws('/', p_tenant, p_session_id, p_turn_id)));
        IF EXISTS (
            SELECT 1 FROM turn_events
            WHERE tenant = p_tenant AND session_id = p_session_id AND turn_id = p_turn_id
                AND (final OR (first_sequence <= p_last AND last_sequence >= p_first)
                    OR (p_final AND first_sequence > p_last))
        ) THEN
            RETURN false;
        END IF;
        INSERT INTO turn_events (tenant, session_id, turn_id, first_sequence,
            last_sequence, final, body, expires_at_ms)
        VALUES (p_tenant, p_session_id, p_turn_id, p_first, p_last, p_final, p_body,
            p_expires_at_ms);
        PERFORM pg_notify(p_channel, topic) FROM wake_interest WHERE topic = p_topic;
        RETURN true;
    END
    $$""",
)
"""Schema version 2: the tables of live turns and the function of an append."""
APPEND_EVENTS: Final = "SELECT append_turn_events(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
SELECT_EVENTS: Final = (
    "SELECT first_sequence, last_sequence, final, body FROM turn_events"
    " WHERE tenant = %s AND session_id = %s AND turn_id = %s AND last_sequence > %s"
    " AND expires_at_ms > %s ORDER BY first_sequence"
)
SELECT_RUNS: Final = (
    "SELECT DISTINCT turn_id FROM turn_events WHERE tenant = %s AND session_id = %s"
    " AND left(turn_id, char_length(%s)) = %s"
)
"""The run names of a turn id: keys that start with `id@` (an equality, whatever the
collation)."""
DELETE_SESSION_EVENTS: Final = (
    "events AS (DELETE FROM turn_events WHERE tenant = %s AND session_id = %s"
    " AND EXISTS (SELECT 1 FROM deleted))"
)
"""A CTE of a session's delete (after its `deleted` one): the events of its turns (messages
go by their foreign key). Parameters: tenant, session id."""
SEND_SIGNAL: Final = (
    "WITH sent AS (INSERT INTO turn_signals (holder, kind, tenant, session_id, turn_id,"
    " expires_at_ms) VALUES (%s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (holder, kind, tenant, session_id, turn_id) DO UPDATE"
    " SET expires_at_ms = greatest(turn_signals.expires_at_ms, excluded.expires_at_ms)"
    f" RETURNING 1) SELECT {NOTIFY_IF_WAITED} FROM sent"
)
TAKE_SIGNALS: Final = (
    "WITH bad AS (SELECT count(*) AS n FROM turn_signals"
    f" WHERE holder = %(holder)s AND kind NOT IN ({_KINDS})),"
    " taken AS (DELETE FROM turn_signals WHERE holder = %(holder)s"
    " AND (SELECT n FROM bad) = 0 RETURNING sent, kind, tenant, session_id, turn_id)"
    " SELECT sent, kind, tenant, session_id, turn_id FROM taken"
    " UNION ALL SELECT NULL, NULL, NULL, NULL, NULL FROM bad WHERE n > 0"
)
"""Takes every signal of the holder, or (a row of NULLs) none when one has an unknown kind."""
EXPIRE: Final = (
    "WITH events AS (DELETE FROM turn_events WHERE ctid = ANY (ARRAY(SELECT ctid"
    f" FROM turn_events WHERE expires_at_ms <= %(now)s LIMIT {EXPIRE_LIMIT})) RETURNING 1),"
    " signals AS (DELETE FROM turn_signals WHERE ctid = ANY (ARRAY(SELECT ctid"
    f" FROM turn_signals WHERE expires_at_ms <= %(now)s LIMIT {EXPIRE_LIMIT})) RETURNING 1),"
    " interest AS (DELETE FROM wake_interest WHERE ctid = ANY (ARRAY(SELECT ctid"
    f" FROM wake_interest WHERE expires_at_ms <= %(now)s LIMIT {EXPIRE_LIMIT})))"
    " SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM signals)"
)
"""Drops expired batches, signals and registered topics; counts the first two."""


def batch_of_row(row: tuple[Any, ...]) -> EventBatch:
    first, last, final, body = row
    if (
        type(first) is not int
        or type(last) is not int
        or not 1 <= first <= last
        or type(final) is not bool
        or not isinstance(body, bytes | bytearray | memoryview)
    ):
        raise StoreCorruptError("a stored batch of turn events cannot be read back")
    return EventBatch(first, last, bytes(body), final)


class Interest:
    """The topics a store has registered in `wake_interest`, by the loop time of their
    first registration and of their latest."""

    def __init__(self) -> None:
        self._topics: dict[str, tuple[float, float]] = {}

    def due(self, topics: Collection[str], now: float) -> tuple[list[str], bool]:
        """The topics to register (again) now, and whether one of them is new (never
        registered, or lapsed)."""
        due: list[str] = []
        new = False
        for topic in topics:
            known = self._topics.get(topic)
            if known is None or now - known[1] >= INTEREST_REFRESH:
                due.append(topic)
                new = new or known is None or now - known[1] >= INTEREST_TTL_MS / 1000
        return due, new

    def registered(self, topics: Collection[str], now: float) -> None:
        """Note that `topics` were registered at `now`; forget the lapsed ones."""
        lapsed = [
            topic
            for topic, (_, latest) in self._topics.items()
            if now - latest >= INTEREST_TTL_MS / 1000
        ]
        for topic in lapsed:
            del self._topics[topic]
        for topic in topics:
            first = self._topics.get(topic, (now, now))[0]
            self._topics[topic] = (first, now)

    def bound(self, topics: Collection[str], now: float, timeout: float) -> float:
        """`timeout`, shortened to the end of the grace of a topic registered just now."""
        for topic in topics:
            known = self._topics.get(topic)
            if known is not None and now - known[0] < INTEREST_GRACE:
                timeout = min(timeout, known[0] + INTEREST_GRACE - now)
        return timeout


class Listener:
    """One store's connection listening on NOTIFY_CHANNEL, opened by the first `start`.

    Each notification wakes its topic. While it is not listening (not yet, or after the
    connection broke) waits run to their timeouts; each time it starts listening it wakes
    every waiter, which may have missed a notification. It stops retrying when nobody
    waits; the next `start` begins again.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        timeout: float,
        wakeups: Wakeups,
        describe: Callable[[BaseException], str],
    ) -> None:
        parameters = conninfo_to_dict(conninfo)
        keepalives = {name: value for name, value in _KEEPALIVES.items() if name not in parameters}
        self._conninfo = make_conninfo(conninfo, **keepalives)
        self._timeout = timeout
        self._wakeups = wakeups
        self._describe = describe
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Listen, unless already listening or trying to."""
        if self._task is None and not self._closed:
            self._task = asyncio.ensure_future(self._listen())

    async def close(self) -> None:
        """Stop listening and close the connection. Idempotent."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def _listen(self) -> None:
        """Listen while anyone waits; after a failure, again after a pause."""
        pause = LISTEN_RETRY_MIN
        try:
            await asyncio.sleep(0)  # the first waiter registers first
            while self._wakeups.pending and not self._closed:
                try:
                    connection: AsyncConnection[Any] = await AsyncConnection.connect(
                        self._conninfo,
                        autocommit=True,
                        connect_timeout=max(1, round(self._timeout)),
                    )
                    async with connection:
                        await connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
                        pause = LISTEN_RETRY_MIN
                        # What was written before LISTEN took effect is not notified.
                        self._wakeups.notify_all()
                        async for notification in connection.notifies():
                            self._wakeups.notify(notification.payload)
                except (psycopg.Error, OSError) as exc:
                    log.warning(
                        "postgresql store stopped listening for wake-ups: %s",
                        self._describe(exc),
                    )
                self._wakeups.notify_all()  # notifications may have been lost meanwhile
                await asyncio.sleep(pause)
                pause = min(pause * 2, LISTEN_RETRY_MAX)
        finally:
            self._task = None
