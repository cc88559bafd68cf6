"""How many durable writes a turn takes: one for a turn a declared route answers, a lease
claim and a commit for one that runs code or calls the model; and what a turn whose one
write lost its compare-and-set answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path

import pytest

from agentskit_chat.conversation import RouteContext, command_route, define_chat
from agentskit_chat.models import AdapterRegistry, ModelChunk, ModelRequest, TextChunk
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Decided,
    DisconnectMode,
    Failed,
    Reason,
    ServiceError,
    Started,
    Submit,
    TurnEvent,
    TurnRequest,
)
from agentskit_chat.storage import (
    HistoryChange,
    HistoryMode,
    MemoryStore,
    Store,
    StoredSession,
    open_sqlite_store,
)
from tests.waiting import EVENT_WAIT

from .forwarding import Forwarding

KEY = b"turns-test-key-32-bytes-long!!!!"
SID = "s-aaaaaaaaaaaaaaaa"


def by_code(text: str, context: RouteContext) -> str:
    return "answered by code"


DECLARED = define_chat(
    id="declared",
    model={"adapter": "gated"},
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "a"}}},
        "routes": [command_route(id="go", command="/go", event="go", response="gone")],
    },
)
CODED = define_chat(
    id="coded",
    conversation={
        "initial": "a",
        "states": {"a": {"on": {"go": "a"}}},
        "routes": [command_route(id="go", command="/go", event="go", response=by_code)],
    },
)


class Gated:
    """A model that says it started, then streams one chunk once its gate opens."""

    name = "gated"
    provider = "tests"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.gate = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        self.started.set()
        await self.gate.wait()
        yield TextChunk("model answer")

    async def close(self) -> None:
        """Nothing to release."""


class Counting(Forwarding):
    """Counts compare-and-set calls; runs `before_write` (once) before the next one."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.writes = 0
        self.before_write: Callable[[], Awaitable[None]] | None = None

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        self.writes += 1
        before, self.before_write = self.before_write, None
        if before is not None:
            await before()  # another writer gets there first
        return await super().compare_and_set(
            session,
            expected_cursor=expected_cursor,
            history=history,
            expected_record=expected_record,
        )


Opener = Callable[[Path], Awaitable[Store]]


async def _memory(directory: Path) -> Store:
    return MemoryStore()


async def _sqlite(directory: Path) -> Store:
    return await open_sqlite_store(directory / "store.db")


@pytest.fixture(params=["memory", "sqlite"])
def opener(request: pytest.FixtureRequest) -> Opener:
    return _memory if request.param == "memory" else _sqlite


def service(store: Store, model: Gated | None = None, holder: str | None = None) -> ChatService:
    adapters = AdapterRegistry({"gated": lambda options: model or Gated()})
    return ChatService(
        Catalog([DECLARED, CODED]), store, digest_key=KEY, adapters=adapters, holder=holder
    )


async def events(chat: ChatService, request: TurnRequest) -> list[TurnEvent]:
    return [event async for event in chat.run_turn(request)]


def test_a_turn_a_declared_route_answers_is_one_write_and_takes_no_lease(
    opener: Opener, tmp_path: Path
) -> None:
    async def scenario() -> None:
        real = await opener(tmp_path)
        store = Counting(real)
        chat = service(store)
        try:
            await chat.create_session("declared", SID, HistoryMode.SERVER)
            got = await events(chat, TurnRequest(SID, "t1", Submit("/go")))
            assert [type(e) for e in got] == [Started, Decided, type(got[2]), Completed]
            done = got[-1]
            assert isinstance(done, Completed)
            assert done.content == "gone"
            assert done.cursor == 1
            assert store.writes == 1
            stored = await real.load(SID)
            assert stored is not None
            assert stored.cursor == 1
            assert b'"lease":null' in stored.record
            history = await real.list_messages(SID)
            assert [m.role for m in history] == ["user", "assistant"]
            assert history[1].message_id == done.assistant_message_id
            # The turn ran here: its events are kept for watchers, and it is not running.
            watched = [event async for _, event in chat.watch_turn(SID, "t1")]
            assert watched == got
            cancel = await chat.cancel_turn(SID, "t1")
            assert not cancel.cancelled
            assert cancel.turn is not None
            assert (await real.load(SID)) == stored  # the cancel changed nothing
        finally:
            await chat.close()

    asyncio.run(scenario())


def test_code_routes_and_model_turns_keep_the_lease(tmp_path: Path) -> None:
    async def scenario() -> None:
        real = await open_sqlite_store(tmp_path / "store.db")
        store = Counting(real)
        model = Gated()
        model.gate.set()
        chat = service(store, model)
        try:
            await chat.create_session("coded", SID, HistoryMode.SERVER)
            coded = await events(chat, TurnRequest(SID, "t1", Submit("/go")))
            assert isinstance(coded[-1], Completed)
            assert coded[-1].cursor == 2  # lease claim, then commit
            assert store.writes == 2
            other = "s-bbbbbbbbbbbbbbbb"
            await chat.create_session("declared", other, HistoryMode.SERVER)
            agentic = await events(chat, TurnRequest(other, "t1", Submit("hello")))
            assert isinstance(agentic[-1], Completed)
            assert agentic[-1].content == "model answer"
            assert agentic[-1].cursor == 2
            assert store.writes == 4
        finally:
            await chat.close()

    asyncio.run(scenario())


def test_a_continued_turn_a_declared_route_answers_commits_with_one_write(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        store = Counting(await open_sqlite_store(tmp_path / "store.db"))
        chat = service(store)
        try:
            await chat.create_session("declared", SID, HistoryMode.SERVER)
            request = TurnRequest(SID, "t1", Submit("/go"), on_disconnect=DisconnectMode.CONTINUE)
            got = await events(chat, request)
            assert isinstance(got[-1], Completed)
            assert got[-1].cursor == 1
            assert store.writes == 1
        finally:
            await chat.close()

    asyncio.run(scenario())


def test_a_lost_write_answers_with_the_outcome_the_same_turn_id_recorded_meanwhile(
    opener: Opener, tmp_path: Path
) -> None:
    async def scenario() -> None:
        real = await opener(tmp_path)
        store = Counting(real)
        chat = service(store, holder="here")
        elsewhere = service(real, holder="elsewhere")
        try:
            await chat.create_session("declared", SID, HistoryMode.SERVER)
            won: list[TurnEvent] = []

            async def same_turn_elsewhere() -> None:
                won.extend(await events(elsewhere, TurnRequest(SID, "t1", Submit("/go"))))

            store.before_write = same_turn_elsewhere
            got = await events(chat, TurnRequest(SID, "t1", Submit("/go")))
            assert store.writes == 1
            first = got[0]
            assert isinstance(first, Started)
            assert first.duplicate  # the recorded outcome, not a second run
            done, recorded = got[-1], won[-1]
            assert isinstance(done, Completed)
            assert isinstance(recorded, Completed)
            assert (done.assistant_message_id, done.cursor) == (
                recorded.assistant_message_id,
                recorded.cursor,
            )
            stored = await real.load(SID)
            assert stored is not None
            assert stored.cursor == 1
            assert len(await real.list_messages(SID)) == 2
        finally:
            await chat.close()
            await elsewhere.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("held", [False, True], ids=["read", "held"])
def test_a_lost_write_is_a_conflict_when_another_turn_committed_meanwhile(
    opener: Opener, tmp_path: Path, held: bool
) -> None:
    """A turn that read the session and then lost its write is a conflict. A turn planned
    on the session as this process held it (nothing read) runs again from a read instead:
    it lost to a write this process had not seen, as a read would have shown it."""

    async def scenario() -> None:
        real = await opener(tmp_path)
        store = Counting(real)
        chat = service(store, holder="here")
        elsewhere = service(real, holder="elsewhere")
        try:
            await (chat if held else elsewhere).create_session("declared", SID, HistoryMode.SERVER)

            async def another_turn_elsewhere() -> None:
                await events(elsewhere, TurnRequest(SID, "other", Submit("/go")))

            store.before_write = another_turn_elsewhere
            if held:
                ran = await events(chat, TurnRequest(SID, "t1", Submit("/go")))
                assert isinstance(ran[-1], Completed)
                assert ran[-1].cursor == 2  # after the other turn's write
                assert store.writes == 2  # the held write lost, then the write after a read
                assert len(await real.list_messages(SID)) == 4
                return
            with pytest.raises(ServiceError) as lost:
                await events(chat, TurnRequest(SID, "t1", Submit("/go")))
            assert lost.value.reason == Reason.CONFLICT
            stored = await real.load(SID)
            assert stored is not None
            assert stored.cursor == 1  # only the other turn's write
            assert len(await real.list_messages(SID)) == 2
            retried = await events(chat, TurnRequest(SID, "t1", Submit("/go")))
            assert isinstance(retried[-1], Completed)
            assert retried[-1].cursor == 2
        finally:
            await chat.close()
            await elsewhere.close()

    asyncio.run(scenario())


def test_a_lost_write_is_busy_while_another_turn_holds_the_lease(
    opener: Opener, tmp_path: Path
) -> None:
    async def scenario() -> None:
        real = await opener(tmp_path)
        store = Counting(real)
        model = Gated()
        chat = service(store, holder="here")
        elsewhere = service(real, model, holder="elsewhere")
        running: list[asyncio.Task[list[TurnEvent]]] = []
        try:
            await chat.create_session("declared", SID, HistoryMode.SERVER)

            async def model_turn_elsewhere() -> None:
                request = TurnRequest(SID, "asks", Submit("hello"))
                running.append(asyncio.ensure_future(events(elsewhere, request)))
                await model.started.wait()  # it holds the lease now

            store.before_write = model_turn_elsewhere
            with pytest.raises(ServiceError) as lost:
                await events(chat, TurnRequest(SID, "t1", Submit("/go")))
            assert lost.value.reason == Reason.SESSION_BUSY
            model.gate.set()
            answered = await running[0]
            assert isinstance(answered[-1], Completed)
            assert not any(isinstance(e, Failed) for e in answered)
            stored = await real.load(SID)
            assert stored is not None
            assert stored.cursor == 2  # the other turn's lease claim and commit
        finally:
            await chat.close()
            await elsewhere.close()

    asyncio.run(scenario())


def test_a_model_turn_of_a_declared_definition_can_be_cancelled_before_the_model_answers(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        store = await open_sqlite_store(tmp_path / "store.db")
        model = Gated()  # never opens its gate: the model has not answered yet
        chat = service(store, model)
        try:
            await chat.create_session("declared", SID, HistoryMode.SERVER)
            got: list[TurnEvent] = []

            async def read() -> None:
                async for event in chat.run_turn(TurnRequest(SID, "t1", Submit("hello"))):
                    got.append(event)

            reading = asyncio.ensure_future(read())
            await asyncio.wait_for(model.started.wait(), 60)
            cancel = await chat.cancel_turn(SID, "t1")
            assert cancel.cancelled
            await asyncio.wait_for(reading, EVENT_WAIT)
            assert isinstance(got[0], Started)
            assert isinstance(got[-1], Failed)
            assert got[-1].code == "cancelled"
            stored = await store.load(SID)
            assert stored is not None
            assert b'"lease":null' in stored.record  # released: the next turn may run
        finally:
            await chat.close()

    asyncio.run(scenario())
