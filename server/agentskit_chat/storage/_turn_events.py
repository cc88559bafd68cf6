"""Storage port for live turns: the events of running turns, signals to the process running
a turn, and wake-ups when either (or a session record) changes.

The store is the only bus between worker processes and replicas. A process running a turn
writes the turn's events here in batches (each batch a run of consecutive sequences, opaque
bytes encoded by the service); any process reads them back from a sequence on. Events live
in their own table, never in the session record, and writing them never moves a session's
cursor. Every batch carries an expiry; `expire` drops what has expired.

A process that needs something of a turn another process runs (stop it, or publish its
events) sends a `TurnSignal` addressed to that process's lease holder name; the holder takes
its signals. `wait` returns when a topic may have changed: a session record
(`session_topic`), a turn's events (`turn_topic`) or a holder's signals (`holder_topic`).
Wake-ups may be spurious or coalesced; a waiter always re-reads what it waits for, and
always passes a timeout, so a lost wake-up only delays it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Protocol

EXPIRE_LIMIT: Final = 1000
"""Rows of each kind (batches, signals) one `expire` call may stop at: a caller that got
this many or more calls again."""


def run_of_name(name: str, turn_id: str) -> int | None:
    """The start (ms) of a run of `turn_id` named `name` (`turn_id@started_at_ms`), or
    None when `name` names no run of `turn_id`."""
    head, at, started = name.rpartition("@")
    if head != turn_id or not at or not started.isascii() or not started.isdigit():
        return None
    return int(started)


def newest_run(names: Collection[str], turn_id: str) -> str | None:
    """Of run names `names`, the one of `turn_id` started last; None when there is none."""
    runs = [
        (started, name) for name in names if (started := run_of_name(name, turn_id)) is not None
    ]
    return max(runs)[1] if runs else None


@dataclass(frozen=True, slots=True)
class TurnKey:
    """One turn of one session of one tenant."""

    tenant: str
    session_id: str
    turn_id: str


@dataclass(frozen=True, slots=True)
class EventBatch:
    """Consecutive events `first`..`last` of one turn, encoded by the service."""

    first: int
    last: int
    body: bytes = field(repr=False)
    """Opaque here; the service seals any content of client-held sessions before writing."""
    final: bool = False
    """Whether `last` is the turn's terminal event: nothing follows."""


class SignalKind(StrEnum):
    """What a signal asks of the process running a turn."""

    CANCEL = "cancel"
    """Stop the turn: nothing is committed, the lease is released."""
    PUBLISH = "publish"
    """Write the turn's events to the store (a reader elsewhere wants them)."""


@dataclass(frozen=True, slots=True)
class TurnSignal:
    """A request to the process `holder` about its turn `key`."""

    holder: str
    """The lease holder name of the process running the turn."""
    kind: SignalKind
    key: TurnKey


class TurnEventStore(Protocol):
    """Events of running turns and signals between processes, over the session store."""

    async def append_events(self, key: TurnKey, batch: EventBatch, *, expires_at_ms: int) -> bool:
        """Store `batch`; False, writing nothing, when a stored batch of the turn already
        holds one of its sequences or ended the turn (`final`). Wakes `turn_topic(key)`."""
        ...

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        """The stored batches of the turn holding any sequence after `after`, in order
        (the first may start at or before `after`; readers skip what they have). Given
        `now_ms`, batches whose expiry is at or before it are left out, swept or not: a
        reader never gets what expired."""
        ...

    async def newest_run(self, tenant: str, session_id: str, turn_id: str) -> str | None:
        """The name (`TurnKey.turn_id`) of the run of `turn_id` started last of those with
        stored batches: keys named `turn_id@started_at_ms`; None when none is stored."""
        ...

    async def send_signal(self, signal: TurnSignal, *, expires_at_ms: int) -> None:
        """Leave `signal` for its holder (a repeated signal may be stored once). Wakes
        `holder_topic(signal.holder)`."""
        ...

    async def take_signals(self, holder: str) -> tuple[TurnSignal, ...]:
        """Remove and return the signals left for `holder`, oldest first."""
        ...

    async def expire(self, now_ms: int) -> int:
        """Drop the batches and signals whose expiry is at or before `now_ms`; how many."""
        ...

    async def wait(self, topics: Collection[str], timeout: float) -> None:
        """Return when one of `topics` may have changed (a write by any process of the
        deployment, this one included), or after `timeout` seconds."""
        ...


def _topic(kind: str, *parts: str) -> str:
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{kind}:{digest[:24]}"


def session_topic(tenant: str, session_id: str) -> str:
    """Wakes on every stored change of the session record (create, save, delete)."""
    return _topic("s", tenant, session_id)


def turn_topic(key: TurnKey) -> str:
    """Wakes when events of the turn are stored."""
    return _topic("t", key.tenant, key.session_id, key.turn_id)


def holder_topic(holder: str) -> str:
    """Wakes when a signal is left for the holder."""
    return _topic("h", holder)
