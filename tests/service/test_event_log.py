"""A turn's event log: readers from any sequence get every later event exactly once, in
order, live ones included; the log is bounded, and kept a bounded time after its turn."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from agentskit_chat.service import Completed, Decided, Delta, Failed, Started, TurnEvent
from agentskit_chat.service._event_log import (
    EVENT_BYTES,
    EventLog,
    EventLogs,
    LogFullError,
    MemoryEventLog,
)

T = TypeVar("T")

STARTED = Started("submit", "u-1")
DECIDED = Decided("agentic", None, "a", "a", False)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def deltas(count: int) -> list[TurnEvent]:
    return [Delta(f"piece {n} ") for n in range(count)]


async def read_all(log: EventLog, after: int = 0) -> list[tuple[int, TurnEvent]]:
    return [item async for item in log.read(after)]


def test_a_reader_from_any_sequence_gets_every_later_event_once_in_order() -> None:
    async def scenario() -> None:
        log = MemoryEventLog(max_bytes=1 << 20)
        events: list[TurnEvent] = [STARTED, DECIDED, *deltas(5)]
        for event in events:
            log.append(event)
        readers = [asyncio.ensure_future(read_all(log, after)) for after in range(len(events) + 1)]
        await asyncio.sleep(0)  # every reader has read what was appended and waits
        live: list[TurnEvent] = [*deltas(3), Completed("a-1", "answer")]
        for event in live:
            log.append(event)
            await asyncio.sleep(0)
        log.end()
        everything = [*events, *live]
        numbered = list(enumerate(everything, start=1))
        for after, reader in enumerate(readers):
            assert await reader == numbered[after:]
        assert await read_all(log, 3) == numbered[3:]  # a reader after the end

    run(scenario())


def test_readers_get_the_error_of_a_turn_refused_after_its_events() -> None:
    async def scenario() -> None:
        log = MemoryEventLog(max_bytes=1024)
        log.append(STARTED)
        refused = RuntimeError("refused")
        log.end(refused)
        reader = log.read()
        assert await anext(reader) == (1, STARTED)
        with pytest.raises(RuntimeError, match="refused"):
            await anext(reader)

    run(scenario())


def test_a_sequence_past_the_log_is_refused() -> None:
    async def scenario() -> None:
        log = MemoryEventLog(max_bytes=1024)
        log.append(STARTED)
        with pytest.raises(ValueError, match="no sequence 2"):
            await read_all(log, 2)
        with pytest.raises(ValueError, match="no sequence -1"):
            await read_all(log, -1)

    run(scenario())


def test_a_log_holds_at_most_its_events_and_bytes_but_the_terminal_event_always_fits() -> None:
    log = MemoryEventLog(max_bytes=1 << 20, max_events=4)
    events: list[TurnEvent] = [STARTED, DECIDED, Delta("a"), Delta("b")]
    for event in events:
        log.append(event)
    with pytest.raises(LogFullError):
        log.append(Delta("c"))
    assert log.last == 4
    assert log.append(Completed("a-1", "ab")) == 5

    sized = MemoryEventLog(max_bytes=2 * EVENT_BYTES + 10)
    sized.append(Delta("ééééé"))  # 10 bytes of UTF-8
    with pytest.raises(LogFullError):
        sized.append(Delta("x"))
    with pytest.raises(LogFullError):
        sized.append(Completed("a-1", "ééééé"))
    assert sized.size == EVENT_BYTES + 10
    sized.append(Failed("output_limit", "too long", False))
    assert sized.last == 2


def test_a_slow_reader_never_makes_the_log_hold_more_and_still_gets_everything() -> None:
    async def scenario() -> None:
        log = MemoryEventLog(max_bytes=1 << 20, max_events=100)
        slow = log.read()
        log.append(STARTED)
        assert await anext(slow) == (1, STARTED)
        for _ in range(99):  # the reader waits; appending does not
            log.append(Delta("x"))
        with pytest.raises(LogFullError):
            log.append(Delta("x"))
        assert log.last == 100
        log.append(Failed("output_limit", "too long", False))
        log.end()
        rest = [item async for item in slow]
        assert [sequence for sequence, _ in rest] == list(range(2, 102))
        assert log.taken == 101

    run(scenario())


def test_appending_after_the_end_is_refused() -> None:
    log = MemoryEventLog(max_bytes=1024)
    log.end()
    with pytest.raises(RuntimeError, match="ended"):
        log.append(STARTED)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_log_is_kept_while_its_turn_runs_and_for_its_retention_after() -> None:
    clock = Clock()
    logs = EventLogs(retention=60.0, clock=clock)
    key = ("default", "s-1", "t-1")
    log = MemoryEventLog(1024)
    assert logs.open(key, log)
    assert logs.find(key) is log
    clock.now = 1000.0  # a running turn's log is never dropped
    assert logs.find(key) is log
    log.end()
    logs.ended(key)
    clock.now = 1059.0
    assert logs.find(key) is log
    clock.now = 1060.5
    assert logs.find(key) is None
    assert logs.kept == 0


def test_a_rerun_of_a_turn_id_replaces_the_kept_log_of_its_ended_run() -> None:
    logs = EventLogs(clock=Clock())
    key = ("default", "s-1", "t-1")
    first = MemoryEventLog(1024)
    assert logs.open(key, first)
    assert not logs.open(key, MemoryEventLog(1024))  # while it runs, the first run stays
    first.end()
    logs.ended(key)
    second = MemoryEventLog(1024)
    assert logs.open(key, second)  # a run that committed nothing: the id ran again
    assert logs.find(key) is second
    assert logs.kept == 1


def test_a_refused_turns_log_is_not_kept() -> None:
    logs = EventLogs(clock=Clock())
    key = ("default", "s-1", "t-1")
    log = MemoryEventLog(1024)
    logs.open(key, log)
    log.end(RuntimeError("refused"))
    logs.ended(key, keep=False)
    assert logs.find(key) is None
    assert logs.open(key, MemoryEventLog(1024))


def test_ended_logs_past_the_count_or_bytes_bound_go_oldest_first() -> None:
    clock = Clock()
    bound = 2 * (EVENT_BYTES + 3) + 7  # two logs of three bytes of text each
    logs = EventLogs(retention=60.0, max_kept=2, max_kept_bytes=bound, clock=clock)
    keys = [("default", "s-1", f"t-{n}") for n in range(4)]
    for key in keys[:3]:
        log = MemoryEventLog(1024)
        logs.open(key, log)
        log.append(Delta("abc"))
        log.end()
        logs.ended(key)
    assert [logs.find(key) is not None for key in keys[:3]] == [False, True, True]
    log = MemoryEventLog(1024)
    logs.open(keys[3], log)
    log.append(Delta("0123456789ab"))  # with one of the others, past max_kept_bytes
    log.end()
    logs.ended(keys[3])
    assert [logs.find(key) is not None for key in keys] == [False, False, False, True]


def test_a_reader_cancelled_while_it_waits_leaves_the_others_reading() -> None:
    async def scenario() -> None:
        log = MemoryEventLog(max_bytes=1024)
        cancelled = asyncio.ensure_future(read_all(log))
        other = asyncio.ensure_future(read_all(log))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0)
        log.append(STARTED)
        log.end()
        assert await other == [(1, STARTED)]
        assert cancelled.cancelled()

    run(scenario())


def test_an_event_gets_its_time_when_appended_and_every_reader_gets_that_time() -> None:
    async def scenario() -> None:
        log = MemoryEventLog(max_bytes=1 << 20)
        published = Delta("published before", time_ns=1234)
        for event in (STARTED, DECIDED, published, *deltas(3)):
            log.append(event)
        log.end()
        first, second = await read_all(log), await read_all(log, 2)
        times = [event.time_ns for _, event in first]
        assert times[2] == 1234  # an event published elsewhere keeps its time
        stamped = times[:2] + times[3:]
        assert all(stamped)
        assert stamped == sorted(stamped)
        assert [event.time_ns for _, event in second] == times[2:]
        assert STARTED.time_ns == 0  # the appended event itself is left as it was

    run(scenario())
