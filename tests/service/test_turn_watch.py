"""Two services on one store stand for two processes: a turn one of them runs is watched
and cancelled through the other, by way of the store's events and signals."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, Coroutine
from contextlib import aclosing
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentskit_chat.conversation import Message, Role, load_definitions
from agentskit_chat.models import AdapterRegistry, FinishChunk, ModelChunk, ModelRequest, TextChunk
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Delta,
    DisconnectMode,
    Dispatch,
    Failed,
    ServiceError,
    Started,
    Submit,
    TurnEvent,
    TurnRequest,
    _turn_watch,
)
from agentskit_chat.service._event_log import RETENTION_SECONDS, EventLogs
from agentskit_chat.service._records import now_ms
from agentskit_chat.storage import (
    EventBatch,
    HistoryMode,
    MemoryStore,
    Store,
    StoreCorruptError,
    StoreUnavailableError,
    TurnSignal,
)
from agentskit_chat.storage._turn_events import TurnKey
from tests.waiting import until

from .forwarding import Forwarding

T = TypeVar("T")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "definitions"
KEY = b"turn-watch-tests-digest-key-32by"
CANARY = "canary-sealed-9b2e"
CHUNKS = 40


class Gated:
    """A model that streams `CHUNKS` chunks, waiting on `gate` after the first."""

    name = "gated"
    provider = "agentskit.gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.closed = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        try:
            yield TextChunk(f"{CANARY} 0 ")
            self.entered.set()
            await self.gate.wait()
            for n in range(1, CHUNKS):
                yield TextChunk(f"{n} ")
                await asyncio.sleep(0)
            yield FinishChunk("stop")
        finally:
            self.closed.set()

    async def close(self) -> None:
        """Nothing to release."""


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


class Pair:
    """Two services ("processes") over one store, with one model."""

    def __init__(self, wrap: type[Forwarding] | None = None) -> None:
        self.model = Gated()
        self.store = MemoryStore()
        self.other: Store = self.store if wrap is None else wrap(self.store)
        definitions = list(load_definitions(EXAMPLES).values())
        assisted = dataclasses.replace(definitions[0], id="assisted", model={"adapter": "gated"})
        catalog = Catalog([*definitions, assisted])
        self.a, self.b = (
            ChatService(
                catalog,
                store,
                digest_key=KEY,
                adapters=AdapterRegistry({"gated": lambda settings: self.model}),
                holder=holder,
            )
            for holder, store in (("process-a", self.store), ("process-b", self.other))
        )

    async def session(self, mode: HistoryMode = HistoryMode.SERVER) -> str:
        return (await self.a.create_session("assisted", None, mode)).session_id


async def take(stream: AsyncGenerator[tuple[int, TurnEvent], None]) -> list[tuple[int, TurnEvent]]:
    async with aclosing(stream) as events:
        return [item async for item in events]


async def cut(
    service: ChatService, request: TurnRequest, model: Gated
) -> list[tuple[int, TurnEvent]]:
    """Start the turn, read until the model waits, then close the stream."""
    seen = []
    async with aclosing(service.stream_turn(request)) as events:
        async for item in events:
            seen.append(item)
            if isinstance(item[1], Delta):
                break
    await model.entered.wait()
    return seen


def text(events: list[tuple[int, TurnEvent]]) -> str:
    return "".join(e.text for _, e in events if isinstance(e, Delta))


def test_a_continued_turn_is_watched_from_another_process_exactly_once() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session()
        request = TurnRequest(sid, "t-1", Submit("hello"), on_disconnect=DisconnectMode.CONTINUE)
        seen = await cut(pair.a, request, pair.model)
        after = seen[-1][0]
        watching = asyncio.ensure_future(take(pair.b.watch_turn(sid, "t-1", after)))
        await until(lambda: pair.b.watchers.count("", sid) == 1, "the other process's watch")
        pair.model.gate.set()
        rest = await watching
        sequences = [s for s, _ in seen + rest]
        assert sequences == list(range(1, len(sequences) + 1))
        assert isinstance(rest[-1][1], Completed)
        assert text(seen + rest) == rest[-1][1].content
        # Ended: kept in the store for a while, deltas included, for any process.
        again = await take(pair.b.watch_turn(sid, "t-1", 0))
        assert again == seen + rest
        # The writes: a few batches, far fewer than events.
        stored = await pair.store.read_events(
            TurnKey("", sid, f"t-1@{(await pair.b.get_turn(sid, 't-1')).started_at_ms}")
        )
        assert 1 <= len(stored) < len(sequences)
        assert stored[-1].final
        await pair.b.close()

    run(scenario())


def test_a_cancelling_turn_is_published_when_another_process_watches_it() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session()
        starter = asyncio.ensure_future(
            take(pair.a.stream_turn(TurnRequest(sid, "t-2", Submit("hi"))))
        )
        await pair.model.entered.wait()
        watching = asyncio.ensure_future(take(pair.b.watch_turn(sid, "t-2", 0)))
        started = (await pair.a.get_turn(sid, "t-2")).started_at_ms
        while not await pair.store.read_events(TurnKey("", sid, f"t-2@{started}")):
            await asyncio.sleep(0.05)  # the watcher asked for the events: they come
        pair.model.gate.set()
        mine, theirs = await starter, await watching
        assert theirs == mine
        await pair.b.close()

    run(scenario())


def test_a_cancel_from_another_process_stops_the_turn_and_frees_the_id() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session()
        request = TurnRequest(sid, "t-3", Submit("hello"), on_disconnect=DisconnectMode.CONTINUE)
        await cut(pair.a, request, pair.model)
        watching = asyncio.ensure_future(take(pair.b.watch_turn(sid, "t-3", 0)))
        outcome = await pair.b.cancel_turn(sid, "t-3")
        assert outcome.cancelled
        assert pair.model.closed.is_set()
        watched = await watching
        assert watched[-1][1] == Failed(
            "cancelled", "the turn was cancelled before it ended; nothing was committed", True
        )
        assert (await pair.b.cancel_turn(sid, "t-3")).cancelled is False
        with pytest.raises(ServiceError) as missing:
            await pair.b.get_turn(sid, "t-3")
        assert missing.value.reason.name == "TURN_NOT_FOUND"
        pair.model.gate.set()
        rerun = await take(pair.b.stream_turn(TurnRequest(sid, "t-3", Submit("hello"))))
        assert isinstance(rerun[-1][1], Completed)
        await pair.b.close()

    run(scenario())


def test_a_client_held_turns_text_is_stored_sealed() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session(HistoryMode.CLIENT)
        messages = (Message("u-1", Role.USER, "hello"),)
        request = TurnRequest(sid, "t-4", Dispatch(messages), on_disconnect=DisconnectMode.CONTINUE)
        pair.model.gate.set()
        await cut(pair.a, request, pair.model)  # the turn goes on: its events to the store
        events = await take(pair.a.watch_turn(sid, "t-4", 0))
        await pair.a.turns.wait_idle()
        assert CANARY in text(events)
        started = (await pair.a.get_turn(sid, "t-4")).started_at_ms
        stored = await pair.store.read_events(TurnKey("", sid, f"t-4@{started}"))
        assert stored
        assert all(CANARY.encode() not in batch.body for batch in stored)
        assert await take(pair.b.watch_turn(sid, "t-4", 0)) == events  # and it opens
        await pair.b.close()

    run(scenario())


CANCELLED = Failed(
    "cancelled", "the turn was cancelled before it ended; nothing was committed", True
)
INTERRUPTED = Failed(
    "interrupted",
    "the server running the turn stopped before it ended; nothing was committed",
    True,
)


def test_a_cancelled_turn_ends_for_a_watcher_on_another_process() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session()
        request = TurnRequest(sid, "t-5", Submit("hello"), on_disconnect=DisconnectMode.CONTINUE)
        seen = await cut(pair.a, request, pair.model)
        assert (await pair.a.cancel_turn(sid, "t-5")).cancelled
        # Nothing recorded, the lease gone: only the store knows how the run ended.
        watched = await take(pair.b.watch_turn(sid, "t-5", seen[-1][0]))
        assert watched[-1][1] == CANCELLED
        assert [s for s, _ in seen + watched] == list(range(1, len(seen + watched) + 1))
        await pair.b.close()

    run(scenario())


def test_a_turn_interrupted_by_a_drain_ends_for_a_watcher_on_another_process() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session()
        request = TurnRequest(sid, "t-6", Submit("hello"), on_disconnect=DisconnectMode.CONTINUE)
        await cut(pair.a, request, pair.model)
        pair.a.begin_drain()
        await pair.a.live.interrupt_all()  # the drain's grace ran out
        watched = await take(pair.b.watch_turn(sid, "t-6", 0))
        assert watched[-1][1] == INTERRUPTED
        with pytest.raises(ServiceError) as missing:
            await take(pair.b.watch_turn(sid, "t-unknown", 0))
        assert missing.value.reason.name == "TURN_NOT_FOUND"
        await pair.b.close()

    run(scenario())


def test_an_after_sequence_past_any_turn_is_refused() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session()
        pair.model.gate.set()
        request = TurnRequest(sid, "t-7", Submit("hello"), on_disconnect=DisconnectMode.CONTINUE)
        await cut(pair.a, request, pair.model)
        await pair.a.turns.wait_idle()
        await pair.store.expire(now_ms() + 10**9)  # no events kept: the recorded outcome
        for after in (2**63, 2**64):
            with pytest.raises(ServiceError) as refused:
                await take(pair.b.watch_turn(sid, "t-7", after))
            assert refused.value.reason.name == "INVALID_ARGUMENT"
            assert refused.value.metadata["field"] == "after_sequence"
        await pair.b.close()

    run(scenario())


def test_a_turn_finished_long_ago_whose_final_batch_expired_answers_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session()
        pair.model.gate.set()
        request = TurnRequest(sid, "t-8", Submit("hello"), on_disconnect=DisconnectMode.CONTINUE)
        await cut(pair.a, request, pair.model)
        await pair.a.turns.wait_idle()
        started = (await pair.a.get_turn(sid, "t-8")).started_at_ms
        key = TurnKey("", sid, f"t-8@{started}")
        # The final batch expires a minute after the end, the earlier ones later.
        await pair.store.expire(now_ms() + 61_000)
        kept = await pair.store.read_events(key)
        assert kept
        assert not kept[-1].final
        later = now_ms() + 61_000
        monkeypatch.setattr(_turn_watch, "now_ms", lambda: later)
        watched = await asyncio.wait_for(
            take(pair.b.watch_turn(sid, "t-8", kept[-1].last)),
            _turn_watch.FINAL_GRACE_SECONDS / 2,
        )
        assert isinstance(watched[-1][1], Completed)
        assert watched[0][0] == kept[-1].last + 1
        await pair.b.close()

    run(scenario())


class Failing(Forwarding):
    """Its live-turn calls fail with `error` once it is set."""

    error: Exception | None = None

    def _check(self) -> None:
        if self.error is not None:
            raise self.error

    async def read_events(
        self, key: TurnKey, after: int = 0, *, now_ms: int = 0
    ) -> tuple[EventBatch, ...]:
        self._check()
        return await super().read_events(key, after, now_ms=now_ms)

    async def send_signal(self, signal: TurnSignal, *, expires_at_ms: int) -> None:
        self._check()
        await super().send_signal(signal, expires_at_ms=expires_at_ms)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (StoreUnavailableError("down"), "STORE_UNAVAILABLE"),
        (StoreCorruptError("unreadable"), "SESSION_CORRUPT"),
    ],
)
def test_store_errors_of_watch_and_cancel_are_service_errors(error: Exception, reason: str) -> None:
    async def scenario() -> None:
        pair = Pair(Failing)
        assert isinstance(pair.other, Failing)
        sid = await pair.session()
        request = TurnRequest(sid, "t-9", Submit("hello"), on_disconnect=DisconnectMode.CONTINUE)
        await cut(pair.a, request, pair.model)
        pair.other.error = error
        with pytest.raises(ServiceError) as watching:
            await take(pair.b.watch_turn(sid, "t-9", 0))
        assert watching.value.reason.name == reason
        with pytest.raises(ServiceError) as cancelling:
            await pair.b.cancel_turn(sid, "t-9")
        assert cancelling.value.reason.name == reason
        pair.model.gate.set()
        await pair.a.turns.wait_idle()
        await pair.a.close()

    run(scenario())


def test_a_watch_from_the_last_stored_event_ends_at_once_on_another_process() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session()
        pair.model.gate.set()
        request = TurnRequest(sid, "t-10", Submit("hello"), on_disconnect=DisconnectMode.CONTINUE)
        await cut(pair.a, request, pair.model)
        await pair.a.turns.wait_idle()
        whole = await take(pair.b.watch_turn(sid, "t-10", 0))
        last = whole[-1][0]
        watched = await asyncio.wait_for(
            take(pair.b.watch_turn(sid, "t-10", last)), _turn_watch.FINAL_GRACE_SECONDS / 2
        )
        assert watched == []
        # The same of a run that recorded nothing: its end is only in the store.
        pair.model.gate.clear()
        pair.model.entered.clear()
        other = TurnRequest(sid, "t-11", Submit("hello"), on_disconnect=DisconnectMode.CONTINUE)
        await cut(pair.a, other, pair.model)
        assert (await pair.a.cancel_turn(sid, "t-11")).cancelled
        ended = await take(pair.b.watch_turn(sid, "t-11", 0))
        assert await take(pair.b.watch_turn(sid, "t-11", ended[-1][0])) == []
        await pair.b.close()

    run(scenario())


class Clock:
    """The monotonic clock of a process's kept logs, moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_ended_turn_is_watched_with_its_events_on_any_process_until_its_retention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        pair = Pair()
        clock = Clock()
        pair.a.live.logs = EventLogs(clock=clock)
        sid = await pair.session()
        pair.model.gate.set()
        whole = await take(pair.a.stream_turn(TurnRequest(sid, "t-11", Submit("hello"))))
        assert isinstance(whole[-1][1], Completed)
        # Ended: the other process returns the missed events, from the store, exactly once.
        for service in (pair.b, pair.a):
            assert await take(service.watch_turn(sid, "t-11", 2)) == whole[2:]
            again = await take(service.watch_turn(sid, "t-11", 0))
            assert again == whole
            assert [e.time_ns for _, e in again] == [e.time_ns for _, e in whole]
        # Just before the retention passed: still the events.
        ended = (await pair.a.get_turn(sid, "t-11")).finished_at_ms
        assert ended is not None
        clock.now = RETENTION_SECONDS - 1
        monkeypatch.setattr(_turn_watch, "now_ms", lambda: ended + 59_000)
        assert await take(pair.b.watch_turn(sid, "t-11", 2)) == whole[2:]
        # Past it: the recorded outcome, on either process, at once, though not swept yet.
        clock.now = RETENTION_SECONDS + 1
        monkeypatch.setattr(_turn_watch, "now_ms", lambda: ended + 61_000)
        for service in (pair.b, pair.a):
            outcome = await asyncio.wait_for(
                take(service.watch_turn(sid, "t-11", 2)), _turn_watch.FINAL_GRACE_SECONDS / 2
            )
            first = outcome[0][1]
            assert isinstance(first, Started)
            assert first.duplicate
            assert outcome[0][0] == 3
            assert isinstance(outcome[-1][1], Completed)
        await pair.a.close()
        await pair.b.close()

    run(scenario())


def test_a_client_held_turns_ended_events_are_stored_sealed_and_read_back() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session(HistoryMode.CLIENT)
        pair.model.gate.set()
        dispatch = Dispatch((Message(id="u-1", role=Role.USER, content=f"{CANARY} ask"),))
        whole = await take(pair.a.stream_turn(TurnRequest(sid, "t-12", dispatch)))
        assert isinstance(whole[-1][1], Completed)
        started = (await pair.a.get_turn(sid, "t-12")).started_at_ms
        stored = await pair.store.read_events(TurnKey("", sid, f"t-12@{started}"))
        assert stored
        assert stored[-1].final
        assert all(CANARY.encode() not in batch.body for batch in stored)
        assert await take(pair.b.watch_turn(sid, "t-12", 1)) == whole[1:]
        await pair.a.close()
        await pair.b.close()

    run(scenario())


def test_an_after_sequence_past_an_ended_turn_is_refused_at_once_on_any_process() -> None:
    async def scenario() -> None:
        pair = Pair()
        sid = await pair.session()
        pair.model.gate.set()
        whole = await take(pair.a.stream_turn(TurnRequest(sid, "t-13", Submit("hello"))))
        past = whole[-1][0] + 1
        for service in (pair.a, pair.b):
            with pytest.raises(ServiceError) as refused:
                await asyncio.wait_for(
                    take(service.watch_turn(sid, "t-13", past)),
                    _turn_watch.FINAL_GRACE_SECONDS / 2,
                )
            assert refused.value.reason.name == "INVALID_ARGUMENT"
            assert refused.value.metadata["field"] == "after_sequence"
        await pair.a.close()
        await pair.b.close()

    run(scenario())
