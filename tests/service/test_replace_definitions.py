"""Replacing the definitions of a running service: new settings, old adapters retired."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path
from typing import Any

from agentskit_chat.conversation import load_definitions
from agentskit_chat.models import AdapterRegistry, FinishChunk, ModelChunk, ModelRequest, TextChunk
from agentskit_chat.service import Catalog, ChatService, Completed, Limits, Submit, TurnRequest
from agentskit_chat.storage import HistoryMode, MemoryStore, StoredSession
from tests.waiting import EVENT_WAIT

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "definitions"


class Named:
    """Answers with its model name; remembers whether it was closed."""

    name = "named"
    provider = "agentskit.named"

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.model = str(settings["model"])
        self.closed = False

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        yield TextChunk(self.model)
        yield FinishChunk("stop")

    async def close(self) -> None:
        self.closed = True


def test_new_settings_answer_the_next_turn_and_the_old_adapter_is_closed_later() -> None:
    run_scenario(turn_timeout=60.0, wait_for_retirement=False)


def test_an_unused_adapter_is_closed_once_its_turns_cannot_run_any_more() -> None:
    run_scenario(turn_timeout=0.05, wait_for_retirement=True)


def run_scenario(*, turn_timeout: float, wait_for_retirement: bool) -> None:
    built: list[Named] = []

    def factory(settings: Mapping[str, Any]) -> Named:
        built.append(Named(settings))
        return built[-1]

    support = load_definitions(EXAMPLES)["support"]
    first = dataclasses.replace(support, model={"adapter": "named", "model": "one"})
    second = dataclasses.replace(support, model={"adapter": "named", "model": "two"})

    async def scenario() -> None:
        service = ChatService(
            Catalog([first]),
            MemoryStore(),
            digest_key=b"replace-definitions-test-key-32b",
            adapters=AdapterRegistry({"named": factory}),
            limits=Limits(turn_timeout=turn_timeout),
        )
        view = await service.create_session("support", None, HistoryMode.SERVER)

        async def answer(turn_id: str) -> str:
            request = TurnRequest(view.session_id, turn_id, Submit("hello"))
            events = [event async for event in service.run_turn(request)]
            assert isinstance(events[-1], Completed)
            return events[-1].content

        assert await answer("t1") == "one"
        changes = service.replace_definitions(Catalog([second]))
        assert changes.updated == ("support",)
        assert await answer("t2") == "two"
        if wait_for_retirement:
            async with asyncio.timeout(EVENT_WAIT):
                while not built[0].closed:
                    await asyncio.sleep(0.01)
            assert not built[1].closed
        else:
            assert not built[0].closed  # a turn begun before the swap could still use it
        await service.close()
        assert [adapter.closed for adapter in built] == [True, True]

    asyncio.run(scenario())


class SwapDuringCreate(MemoryStore):
    """A memory store that lets a reload happen while a session is being created."""

    def __init__(self) -> None:
        super().__init__()
        self.during_create: Callable[[], object] | None = None

    async def create(self, session: StoredSession) -> None:
        swap, self.during_create = self.during_create, None
        if swap is not None:
            swap()
        await super().create(session)


def test_a_session_created_across_a_new_revision_is_stored_at_the_new_one() -> None:
    support = load_definitions(EXAMPLES)["support"]
    revised = dataclasses.replace(support, revision=2)

    async def scenario() -> None:
        store = SwapDuringCreate()
        service = ChatService(
            Catalog([support]), store, digest_key=b"replace-definitions-test-key-32b"
        )
        store.during_create = lambda: service.replace_definitions(Catalog([revised]))
        view = await service.create_session("support", "s-0123456789abcdef", HistoryMode.SERVER)
        assert view.revision == 2
        stored = await store.load("s-0123456789abcdef")
        assert stored is not None
        assert stored.revision == 2
        request = TurnRequest(view.session_id, "t1", Submit("/start"))
        events = [event async for event in service.run_turn(request)]
        assert isinstance(events[-1], Completed)

    asyncio.run(scenario())
