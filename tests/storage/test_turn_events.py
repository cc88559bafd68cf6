"""The TurnEventStore contract (events of running turns, signals, wake-ups), run against
the memory, the SQLite and the PostgreSQL backend."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any, TypeVar

import pytest

from agentskit_chat.storage import (
    EventBatch,
    SignalKind,
    Store,
    StoreUnavailableError,
    TurnKey,
    TurnSignal,
    holder_topic,
    session_topic,
    turn_topic,
)

from .conftest import run, session, until_waiting

T = TypeVar("T")
KEY = TurnKey("", "s1", "t1")
LATER = 2_000_000_000_000
"""An expiry far after any `now_ms` the tests pass to `expire`."""
SETTLE = 0.6
"""Longer than the PostgreSQL store's grace after registering a topic."""
WAIT = 10.0
"""A bound for wake-ups that must come: far above any real delay, never reached."""


def batch(first: int, last: int, *, final: bool = False) -> EventBatch:
    return EventBatch(first, last, f"events {first}..{last}".encode() + b"\x00\xff", final)


def test_appended_batches_read_back_in_order(store: Store) -> None:
    assert run(store.append_events(KEY, batch(1, 3), expires_at_ms=LATER)) is True
    assert run(store.append_events(KEY, batch(4, 4), expires_at_ms=LATER)) is True
    assert run(store.append_events(KEY, batch(5, 7, final=True), expires_at_ms=LATER)) is True
    assert run(store.read_events(KEY)) == (batch(1, 3), batch(4, 4), batch(5, 7, final=True))
    assert run(store.read_events(KEY, after=3)) == (batch(4, 4), batch(5, 7, final=True))
    assert run(store.read_events(KEY, after=5)) == (batch(5, 7, final=True),)
    assert run(store.read_events(KEY, after=7)) == ()


def test_unknown_turn_reads_nothing(store: Store) -> None:
    run(store.append_events(KEY, batch(1, 2), expires_at_ms=LATER))
    assert run(store.read_events(replace(KEY, turn_id="t2"))) == ()
    assert run(store.read_events(replace(KEY, session_id="s2"))) == ()


def test_the_newest_run_of_a_turn_id_is_found_by_its_start(store: Store) -> None:
    assert run(store.newest_run("", "s1", "t1")) is None
    for name in ("t1@900", "t1@1000", "t1@95", "t1@x@2000", "t1x@5000", "t10@7000", "T1@8000"):
        run(store.append_events(replace(KEY, turn_id=name), batch(1, 1), expires_at_ms=LATER))
    run(store.append_events(TurnKey("", "s2", "t1@9000"), batch(1, 1), expires_at_ms=LATER))
    run(store.append_events(TurnKey("other", "s1", "t1@9000"), batch(1, 1), expires_at_ms=LATER))
    assert run(store.newest_run("", "s1", "t1")) == "t1@1000"  # by its start, not as text
    assert run(store.newest_run("", "s1", "t1@x")) == "t1@x@2000"
    assert run(store.newest_run("", "s1", "t")) is None
    assert run(store.newest_run("", "s1", "t1%")) is None
    assert run(store.newest_run("other", "s1", "t1")) == "t1@9000"
    run(store.expire(LATER))
    assert run(store.newest_run("", "s1", "t1")) is None


def test_overlapping_batch_is_refused_and_writes_nothing(store: Store) -> None:
    run(store.append_events(KEY, batch(3, 5), expires_at_ms=LATER))
    for first, last in ((1, 3), (5, 6), (4, 4), (2, 8)):
        assert run(store.append_events(KEY, batch(first, last), expires_at_ms=LATER)) is False
    assert run(store.read_events(KEY)) == (batch(3, 5),)
    assert run(store.append_events(KEY, batch(1, 2), expires_at_ms=LATER)) is True
    assert run(store.read_events(KEY)) == (batch(1, 2), batch(3, 5))


def test_nothing_is_stored_after_the_final_batch(store: Store) -> None:
    run(store.append_events(KEY, batch(1, 2, final=True), expires_at_ms=LATER))
    assert run(store.append_events(KEY, batch(3, 3), expires_at_ms=LATER)) is False
    assert run(store.append_events(KEY, batch(3, 4, final=True), expires_at_ms=LATER)) is False
    assert run(store.read_events(KEY)) == (batch(1, 2, final=True),)


def test_a_final_batch_before_stored_events_is_refused(store: Store) -> None:
    run(store.append_events(KEY, batch(5, 6), expires_at_ms=LATER))
    assert run(store.append_events(KEY, batch(1, 2, final=True), expires_at_ms=LATER)) is False
    assert run(store.read_events(KEY)) == (batch(5, 6),)


def test_batches_with_bad_sequences_are_refused(store: Store) -> None:
    for first, last in ((0, 1), (3, 2), (-1, 4)):
        with pytest.raises(ValueError, match="sequences"):
            run(store.append_events(KEY, batch(first, last), expires_at_ms=LATER))
    assert run(store.read_events(KEY)) == ()


def test_another_tenants_key_reads_and_blocks_nothing(store: Store) -> None:
    other = replace(KEY, tenant="other")
    run(store.append_events(KEY, batch(1, 2, final=True), expires_at_ms=LATER))
    assert run(store.read_events(other)) == ()
    assert run(store.append_events(other, batch(1, 1), expires_at_ms=LATER)) is True
    assert run(store.read_events(other)) == (batch(1, 1),)
    assert run(store.read_events(KEY)) == (batch(1, 2, final=True),)


def test_expire_drops_what_expired_and_keeps_the_rest(store: Store) -> None:
    run(store.append_events(KEY, batch(1, 2), expires_at_ms=1_000))
    run(store.append_events(KEY, batch(3, 4), expires_at_ms=2_000))
    other = replace(KEY, turn_id="t2")
    run(store.append_events(other, batch(1, 1), expires_at_ms=1_000))
    signal = TurnSignal("holder-a", SignalKind.CANCEL, KEY)
    run(store.send_signal(signal, expires_at_ms=1_000))
    kept = TurnSignal("holder-a", SignalKind.PUBLISH, KEY)
    run(store.send_signal(kept, expires_at_ms=3_000))
    assert run(store.expire(999)) == 0
    assert run(store.expire(1_000)) == 3
    assert run(store.read_events(KEY)) == (batch(3, 4),)
    assert run(store.read_events(other)) == ()
    assert run(store.take_signals("holder-a")) == (kept,)
    assert run(store.expire(5_000)) == 1
    assert run(store.read_events(KEY)) == ()
    assert run(store.append_events(KEY, batch(1, 1), expires_at_ms=LATER)) is True


def test_a_reader_given_the_time_never_gets_what_expired_swept_or_not(store: Store) -> None:
    run(store.append_events(KEY, batch(1, 2), expires_at_ms=2_000))
    run(store.append_events(KEY, batch(3, 4, final=True), expires_at_ms=1_000))
    assert run(store.read_events(KEY, now_ms=999)) == (batch(1, 2), batch(3, 4, final=True))
    assert run(store.read_events(KEY, now_ms=1_000)) == (batch(1, 2),)
    assert run(store.read_events(KEY, 2, now_ms=1_500)) == ()
    assert run(store.read_events(KEY, now_ms=2_000)) == ()
    # Not swept yet: a reader without the time still finds them, and the turn stays ended.
    assert run(store.read_events(KEY)) == (batch(1, 2), batch(3, 4, final=True))
    assert run(store.append_events(KEY, batch(5, 5), expires_at_ms=LATER)) is False


def test_an_ended_turns_batches_stay_readable_until_their_expiry(store: Store) -> None:
    ended = 10_000
    retention = 60_000
    run(store.append_events(KEY, batch(1, 9, final=True), expires_at_ms=ended + retention))
    for now in (ended, ended + retention - 1):
        assert run(store.expire(now)) == 0
        assert run(store.read_events(KEY, 3, now_ms=now)) == (batch(1, 9, final=True),)
    assert run(store.expire(ended + retention)) == 1
    assert run(store.read_events(KEY)) == ()


@pytest.mark.parametrize("expected_cursor", [None, 0])
def test_deleting_a_session_drops_its_turns_events_and_no_others(
    store: Store, expected_cursor: int | None
) -> None:
    run(store.create(session("s1")))
    ran = TurnKey("", "s1", "t1@1000")
    elsewhere = (TurnKey("", "s2", "t1@1000"), TurnKey("other", "s1", "t1@1000"))
    for key in (ran, *elsewhere):
        run(store.append_events(key, batch(1, 2, final=True), expires_at_ms=LATER))
    assert run(store.delete("s1", expected_cursor=1)) is False  # not deleted: kept
    assert run(store.read_events(ran)) == (batch(1, 2, final=True),)
    assert run(store.delete("s1", expected_cursor=expected_cursor)) is True
    assert run(store.read_events(ran)) == ()
    assert run(store.newest_run("", "s1", "t1")) is None
    for key in elsewhere:
        assert run(store.read_events(key)) == (batch(1, 2, final=True),)


def test_signals_are_taken_once_oldest_first(store: Store) -> None:
    cancel = TurnSignal("holder-a", SignalKind.CANCEL, KEY)
    publish = TurnSignal("holder-a", SignalKind.PUBLISH, replace(KEY, turn_id="t2"))
    elsewhere = TurnSignal("holder-b", SignalKind.CANCEL, KEY)
    run(store.send_signal(cancel, expires_at_ms=LATER))
    run(store.send_signal(publish, expires_at_ms=LATER))
    run(store.send_signal(cancel, expires_at_ms=LATER))
    run(store.send_signal(elsewhere, expires_at_ms=LATER))
    assert run(store.take_signals("holder-a")) == (cancel, publish)
    assert run(store.take_signals("holder-a")) == ()
    assert run(store.take_signals("holder-b")) == (elsewhere,)
    assert run(store.take_signals("nobody")) == ()


def test_signals_keep_their_tenant(store: Store) -> None:
    mine = TurnSignal("holder-a", SignalKind.CANCEL, KEY)
    theirs = TurnSignal("holder-a", SignalKind.CANCEL, replace(KEY, tenant="other"))
    run(store.send_signal(mine, expires_at_ms=LATER))
    run(store.send_signal(theirs, expires_at_ms=LATER))
    assert run(store.take_signals("holder-a")) == (mine, theirs)


async def settled(store: Store, *topics: str) -> None:
    """Wait on `topics` until a wait runs to its timeout: a backend may return early from
    its first waits on a topic (when it starts listening, or registers the topic)."""
    loop = asyncio.get_running_loop()
    for _ in range(20):
        started = loop.time()
        await store.wait(topics or ["settling"], SETTLE)
        if loop.time() - started >= SETTLE:
            return
    raise AssertionError("every wait was woken early")


def test_wait_returns_after_its_timeout_when_nothing_happens(store: Store) -> None:
    async def body() -> None:
        await settled(store, turn_topic(KEY))
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(store.wait([turn_topic(KEY)], 0.2), WAIT)
        assert asyncio.get_running_loop().time() - started > 0.1  # not woken: it timed out

    run(body())


async def woken_by(store: Store, topic: str) -> None:
    """Wait on `topic` until woken; fails when the wait runs to its (long) timeout."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    await store.wait([topic, "unrelated"], WAIT)
    assert loop.time() - started < WAIT, "the wait ran to its timeout: never woken"


def in_a_moment(store: Store, write: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Run `write` once the caller waits on `store`."""

    async def later() -> T:
        await until_waiting(store)
        return await write

    return asyncio.ensure_future(later())


def test_append_wakes_the_turn_topic(store: Store) -> None:
    async def body() -> None:
        await settled(store, turn_topic(KEY), "unrelated")
        writing = in_a_moment(store, store.append_events(KEY, batch(1, 1), expires_at_ms=LATER))
        await woken_by(store, turn_topic(KEY))
        assert await writing is True

    run(body())


def test_signal_wakes_the_holder_topic(store: Store) -> None:
    signal = TurnSignal("holder-a", SignalKind.PUBLISH, KEY)

    async def body() -> None:
        await settled(store, holder_topic("holder-a"), "unrelated")
        writing = in_a_moment(store, store.send_signal(signal, expires_at_ms=LATER))
        await woken_by(store, holder_topic("holder-a"))
        await writing

    run(body())


def test_session_writes_wake_the_session_topic(store: Store) -> None:
    topic = session_topic("", "s1")

    async def body() -> None:
        await settled(store, topic, "unrelated")
        creating = in_a_moment(store, store.create(session()))
        await woken_by(store, topic)
        await creating
        saving = in_a_moment(store, store.compare_and_set(session(cursor=1), expected_cursor=0))
        await woken_by(store, topic)
        assert await saving is True
        deleting = in_a_moment(store, store.delete("s1"))
        await woken_by(store, topic)
        assert await deleting is True

    run(body())


def test_closed_store_refuses_turn_calls(store: Store) -> None:
    run(store.close())
    with pytest.raises(StoreUnavailableError):
        run(store.append_events(KEY, batch(1, 1), expires_at_ms=LATER))
    with pytest.raises(StoreUnavailableError):
        run(store.read_events(KEY))
    with pytest.raises(StoreUnavailableError):
        run(store.wait([turn_topic(KEY)], 0.01))
    with pytest.raises(StoreUnavailableError):
        run(store.newest_run("", "s1", "t1"))
