"""Revisions other processes publish: a session of a revision this process does not serve
runs on the published definition while some process publishes it, and is refused (with
nothing stored) once none does, or when the published document does not load here."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.conversation import definition_of_document, parse_definition
from agentskit_chat.mcp import ServerTools
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Reason,
    ServiceError,
    Submit,
    TurnRequest,
)
from agentskit_chat.storage import (
    HistoryMode,
    MemoryStore,
    PublishedDefinition,
    Store,
    open_sqlite_store,
)
from tests.conversation.test_revisions import MAPPED, first, second
from tests.mcp.conftest import BOUND, stdio_server

KEY = b"published-service-test-key-32byt"


def from_file(data: dict[str, Any]) -> Any:
    """A definition as a file gives it: with its document."""
    return definition_of_document(json.dumps(data), source="shop.yaml")


def service(store: Store, *definitions: Any, name: str) -> ChatService:
    return ChatService(Catalog(definitions), store, digest_key=KEY, holder=name)


async def turn(chat: ChatService, session_id: str, turn_id: str, text: str) -> Completed:
    events = [e async for e in chat.run_turn(TurnRequest(session_id, turn_id, Submit(text)))]
    assert isinstance(events[-1], Completed), events[-1]
    return events[-1]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_a_session_of_a_newer_revision_runs_on_a_process_that_serves_only_the_older() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        old = service(store, from_file(first()), name="old")
        new = service(store, from_file(second(MAPPED)), name="new")
        await old.publish_revisions()
        await new.publish_revisions()
        view = await new.create_session("shop", None, HistoryMode.SERVER)
        assert view.revision == 2
        await turn(old, view.session_id, "t1", "/start")
        done = await turn(old, view.session_id, "t2", "/done")
        assert (done.snapshot.state, done.content) == ("complete", "Thanks.")  # revision 2's
        assert (await old.get_session(view.session_id)).session.revision == 2
        assert (await old.revision("shop", 2)).revision == 2
        assert old.definition("shop", 2).revision == 2
        assert [r.revision for r in old.served_revisions("shop")] == [1]  # its own only
        await new.close()
        await old.close()

    asyncio.run(scenario())


def test_a_session_of_an_older_revision_runs_where_it_was_dropped_without_a_migration() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        old = service(store, from_file(first()), name="old")
        await old.publish_revisions()
        view = await old.create_session("shop", None, HistoryMode.SERVER)
        new = service(store, from_file(second()), name="new")  # declares no migration
        started = await turn(new, view.session_id, "t1", "/start")
        assert started.snapshot.state == "collecting"  # revision 1's statechart
        assert (await new.get_session(view.session_id)).session.revision == 1
        await old.close()

    asyncio.run(scenario())


def test_a_revision_no_process_publishes_any_more_is_refused_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        store = await open_sqlite_store(tmp_path / "store.db")  # each process its own
        old = service(store, from_file(first()), name="old")
        new = service(
            await open_sqlite_store(tmp_path / "store.db"), from_file(second(MAPPED)), name="new"
        )
        await new.publish_revisions()
        view = await new.create_session("shop", None, HistoryMode.SERVER)
        await turn(old, view.session_id, "t1", "/start")
        await new.close()  # withdraws revision 2
        before = await store.load(view.session_id)
        with pytest.raises(ServiceError) as refused:
            await turn(old, view.session_id, "t2", "/done")
        assert refused.value.reason is Reason.REVISION_MISMATCH
        assert refused.value.metadata["definition_revision"] == "2"
        assert await store.load(view.session_id) == before
        with pytest.raises(ServiceError) as unknown:
            await old.revision("shop", 2)
        assert unknown.value.reason is Reason.REVISION_MISMATCH
        await old.close()

    asyncio.run(scenario())


def test_without_publishing_another_processes_revision_is_refused() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        old = service(store, from_file(first()), name="old")
        new = service(store, from_file(second(MAPPED)), name="new")  # never publishes
        view = await new.create_session("shop", None, HistoryMode.SERVER)
        with pytest.raises(ServiceError) as refused:
            await old.get_session(view.session_id)
        assert refused.value.reason is Reason.REVISION_MISMATCH

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "document",
    [
        "{not json",
        json.dumps(second(), sort_keys=True).replace('"asking"', '"nowhere"', 1),
        json.dumps({**second(), "model": {"adapter": "no-such-adapter"}}),
        json.dumps({**second(), "revision": 3}),
    ],
    ids=["not-json", "invalid", "unknown-adapter", "other-revision"],
)
def test_a_published_document_that_does_not_load_here_is_refused(document: str) -> None:
    async def scenario() -> None:
        store = MemoryStore()
        old = service(store, from_file(first()), name="old")
        new = service(store, from_file(second()), name="new")
        view = await new.create_session("shop", None, HistoryMode.SERVER)
        published = PublishedDefinition("shop", 2, document)
        later = now_ms() + 60_000
        await store.publish_definitions("other", [published], expires_at_ms=later, now_ms=0)
        before = await store.load(view.session_id)
        with pytest.raises(ServiceError) as refused:
            await turn(old, view.session_id, "t1", "/start")
        assert refused.value.reason is Reason.REVISION_MISMATCH
        assert refused.value.metadata["definition_revision"] == "2"
        assert await store.load(view.session_id) == before

    asyncio.run(scenario())


def test_chats_defined_in_code_are_not_published_and_a_reload_publishes_again() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        in_code = parse_definition(first())
        assert in_code.document is None
        chat = ChatService(Catalog([in_code]), store, digest_key=KEY, holder="code")
        await chat.publish_revisions()
        assert await store.published_definition("shop", 1, now_ms=now_ms()) is None
        chat.replace_definitions(Catalog([from_file(first()), from_file(second(MAPPED))]))
        for _ in range(6000):  # the renewal runs on the loop: wait for its write
            if await store.published_definition("shop", 2, now_ms=now_ms()) is not None:
                break
            await asyncio.sleep(0.01)
        assert await store.published_definition("shop", 1, now_ms=now_ms()) is not None
        assert await store.published_definition("shop", 2, now_ms=now_ms()) is not None
        await chat.close()

    asyncio.run(scenario())


def tool_shop(record: Path, revision: int) -> dict[str, Any]:
    """The shop as a file declares it, with a tool route to the orders MCP server."""
    return {
        "id": "shop",
        "revision": revision,
        "conversation": {
            "initial": "idle",
            "states": {"idle": {"on": {"look": "idle"}}},
            "routes": [
                {
                    "id": "order",
                    "pattern": r"/order (?P<order>[\w-]+)",
                    "event": "look",
                    "tool": {"name": "lookup_order", "arguments": {"order_id": "{order}"}},
                    "response": "Order {order}: {result}",
                }
            ],
        },
        "mcp_servers": {"orders": stdio_server(record)},
        "tools": {"lookup_order": {"server": "orders"}},
    }


def test_a_published_revisions_server_tools_run_where_it_was_not_served(tmp_path: Path) -> None:
    """The process serving revision 1 (no server tools) connects revision 2's MCP server
    on demand, and its tool route answers from the real server there."""

    async def scenario() -> None:
        store = MemoryStore()
        newer = from_file(tool_shop(tmp_path / "record.jsonl", 2))
        older = from_file(
            {
                "id": "shop",
                "revision": 1,
                "conversation": tool_shop(tmp_path / "unused.jsonl", 1)["conversation"]
                | {"routes": []},
            }
        )
        with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as stderr:
            own_tools = ServerTools([newer], server_stderr=stderr)
            no_tools = ServerTools([older], server_stderr=stderr)
            async with asyncio.timeout(BOUND):
                await own_tools.start()
                await no_tools.start()
            new = ChatService(
                Catalog([newer]), store, digest_key=KEY, holder="new", server_tools=own_tools
            )
            old = ChatService(
                Catalog([older]), store, digest_key=KEY, holder="old", server_tools=no_tools
            )
            try:
                await new.publish_revisions()
                view = await new.create_session("shop", None, HistoryMode.SERVER)
                assert no_tools.specs(newer) == ()  # not connected before the session comes
                async with asyncio.timeout(BOUND):
                    done = await turn(old, view.session_id, "t1", "/order A-17")
                assert done.content == "Order A-17: order A-17: 2 items, shipped"
                published = old.definition("shop", 2)
                assert [s.name for s in no_tools.specs(published)] == ["lookup_order"]
                async with asyncio.timeout(BOUND):
                    again = await turn(old, view.session_id, "t2", "/order B-2")
                assert again.content == "Order B-2: order B-2: 2 items, shipped"
            finally:
                await new.close()
                await old.close()
                await own_tools.close()
                await no_tools.close()

    asyncio.run(scenario())
