"""Closing writes the store refuses, on the memory store, whose writes cannot fail for real:
a wrapper refuses them while `down` is set. (tests/transport/test_store_faults.py produces the
same faults for real with SQLite.)"""

from __future__ import annotations

import asyncio

import pytest

from agentskit_chat.conversation import RouteContext, command_route, define_chat
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Failed,
    Limits,
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
    StoredSession,
    StoreUnavailableError,
)
from tests.service.forwarding import Forwarding
from tests.waiting import EVENT_WAIT, until

LEASE_SECONDS = 600.0


class Flaky(Forwarding):
    """A memory store whose writes fail while `down` is set."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.down = False
        self.refused = 0

    async def compare_and_set(
        self,
        session: StoredSession,
        *,
        expected_cursor: int,
        history: HistoryChange | None = None,
        expected_record: bytes | None = None,
    ) -> bool:
        if self.down:
            self.refused += 1
            raise StoreUnavailableError("the store is down")
        return await super().compare_and_set(
            session,
            expected_cursor=expected_cursor,
            history=history,
            expected_record=expected_record,
        )


def gated_service(store: Flaky, gate: asyncio.Event) -> ChatService:
    async def wait(text: str, context: RouteContext) -> str:
        await gate.wait()
        return "done"

    chat = define_chat(
        id="gated",
        conversation={
            "initial": "a",
            "states": {"a": {"on": {"go": "a"}}},
            "routes": [command_route(id="go", command="/go", event="go", response=wait)],
        },
    )
    limits = Limits(lease_ttl=LEASE_SECONDS)
    return ChatService(Catalog([chat]), store, digest_key=b"k" * 32, limits=limits)


async def events(service: ChatService, request: TurnRequest) -> list[TurnEvent]:
    return [event async for event in service.run_turn(request)]


def test_a_refused_commit_fails_the_turn_and_the_release_lands_once_the_store_is_back() -> None:
    async def scenario() -> None:
        store, gate = Flaky(), asyncio.Event()
        service = gated_service(store, gate)
        sid = (await service.create_session("gated", None, HistoryMode.SERVER)).session_id
        request = TurnRequest(sid, "t1", Submit("/go"))
        running = asyncio.ensure_future(events(service, request))
        while service.turns.in_flight == 0:
            await asyncio.sleep(0.01)
        store.down = True
        gate.set()
        ended = await asyncio.wait_for(running, EVENT_WAIT)
        assert isinstance(ended[0], Started)
        assert ended[-1] == Failed(
            "store_unavailable", "The session store failed; nothing was committed.", True
        )
        await asyncio.wait_for(service.turns.wait_idle(), EVENT_WAIT)
        assert service.turns.releases.retrying == 1
        refusals = store.refused
        # Still trying, long before the lease lapses: the store refuses another attempt.
        await until(lambda: store.refused > refusals, "another attempt of the release")
        with pytest.raises(ServiceError) as busy:
            await events(service, TurnRequest(sid, "t2", Submit("/go")))
        assert busy.value.reason == Reason.SESSION_BUSY
        store.down = False
        await asyncio.wait_for(service.turns.releases.wait(), 60)
        assert (await service.get_session(sid)).messages == ()
        again = await events(service, request)  # the same turn id runs again
        assert isinstance(again[-1], Completed)
        await service.close()

    asyncio.run(scenario())


def test_closing_the_service_stops_a_release_that_keeps_failing() -> None:
    async def scenario() -> None:
        store, gate = Flaky(), asyncio.Event()
        service = gated_service(store, gate)
        sid = (await service.create_session("gated", None, HistoryMode.SERVER)).session_id
        running = asyncio.ensure_future(events(service, TurnRequest(sid, "t1", Submit("/go"))))
        while service.turns.in_flight == 0:
            await asyncio.sleep(0.01)
        store.down = True
        gate.set()
        assert isinstance((await asyncio.wait_for(running, EVENT_WAIT))[-1], Failed)
        assert service.turns.releases.retrying == 1
        await asyncio.wait_for(service.close(), EVENT_WAIT)
        assert service.turns.releases.retrying == 0

    asyncio.run(scenario())
