"""Reattach for real: a `serve` process, the fake model streaming, and a TCP proxy between
the client and the server whose connections the test resets mid-answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path

import grpc
import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    DisconnectMode,
    TextDelta,
    TurnCompleted,
    TurnEvent,
)
from tests.cli.conftest import Launcher, launch  # noqa: F401 (the fixture)
from tests.client.tcp_proxy import TcpProxy, proxied

TIMEOUT = 30.0
ANSWER = ("Before ", "the cut, ", "after ", "it.")


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def proxy(launch: Launcher, model: FakeModelServer, tmp_path: Path) -> Iterator[TcpProxy]:  # noqa: F811
    """A proxy in front of a `serve` whose `assistant` chat asks the fake model."""
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    (definitions / "assistant.yaml").write_text(
        "id: assistant\nrevision: 1\n"
        f"model: {{adapter: openai, base_url: '{model.url}', model: fake-1}}\n"
        "conversation:\n  initial: open\n  states: {open: {on: {hello: open}}}\n"
        "  routes: [{id: hello, command: /hello, event: hello, response: Hi.}]\n",
        encoding="utf-8",
    )
    server = launch(None, "--store", "memory://", "--definitions", str(definitions))
    with proxied(server.target) as running:
        yield running


async def _turn_with_cuts(
    client: ChatClient, model: FakeModelServer, proxy: TcpProxy, cut_after: set[int]
) -> list[TurnEvent]:
    """Submit a continued turn and reset the connection after the deltas numbered in
    `cut_after` (1 for the first); the model holds its answer after the first chunk until
    the first cut is done."""
    session = await client.create_session("assistant")
    model.enqueue(Reply(chunks=ANSWER, delay=0.2, pause_after=1))
    events: list[TurnEvent] = []
    deltas = 0
    stream = client.submit(
        session.session_id, "tell me", on_disconnect=DisconnectMode.CONTINUE, timeout=TIMEOUT
    )
    async with aclosing(stream):
        async for event in stream:
            events.append(event)
            if isinstance(event, TextDelta):
                deltas += 1
                if deltas in cut_after:
                    assert await asyncio.to_thread(proxy.cut) >= 1
                if deltas == 1:
                    model.resume()
    return events


def _check_once(events: list[TurnEvent]) -> None:
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "".join(ANSWER)
    last = events[-1]
    assert isinstance(last, TurnCompleted)
    assert last.content == "".join(ANSWER)


def test_a_cut_connection_mid_answer_reattaches_and_every_event_arrives_once(
    model: FakeModelServer, proxy: TcpProxy
) -> None:
    async def main() -> None:
        async with ChatClient(proxy.target) as client:
            events = await _turn_with_cuts(client, model, proxy, {1})
            _check_once(events)
            history = await client.get_session(events[0].session_id)
            assert [m.content for m in history.messages] == ["tell me", "".join(ANSWER)]

    asyncio.run(main())
    assert proxy.accepted >= 2  # the reattach came over a new connection


def test_a_reattach_cut_in_its_turn_is_followed_again(
    model: FakeModelServer, proxy: TcpProxy
) -> None:
    async def main() -> None:
        async with ChatClient(proxy.target) as client:
            _check_once(await _turn_with_cuts(client, model, proxy, {1, 2, 3}))

    asyncio.run(main())
    assert proxy.cuts == 3


def test_reattach_keeps_trying_while_the_server_is_out_of_reach(
    model: FakeModelServer, proxy: TcpProxy
) -> None:
    async def main() -> None:
        async with ChatClient(proxy.target) as client:
            session = await client.create_session("assistant")
            model.enqueue(Reply(chunks=ANSWER, pause_after=1))
            events: list[TurnEvent] = []

            async def reachable_again() -> None:
                while proxy.refused < 2:  # reattach attempts fail for real
                    await asyncio.sleep(0.01)
                proxy.refusing = False

            stream = client.submit(
                session.session_id, "tell me", on_disconnect=DisconnectMode.CONTINUE
            )
            async with aclosing(stream):
                async for event in stream:
                    events.append(event)
                    if isinstance(event, TextDelta) and len(events) == 3:
                        proxy.refusing = True
                        await asyncio.to_thread(proxy.cut)
                        model.resume()  # the turn ends while nobody can reach it
                        recovery = asyncio.create_task(reachable_again())
            await recovery
            _check_once(events)

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_a_turn_that_cancels_on_disconnect_ends_with_the_cut(
    model: FakeModelServer, proxy: TcpProxy
) -> None:
    async def cut_turn(client: ChatClient, session_id: str) -> None:
        model.enqueue(Reply(chunks=ANSWER, pause_after=1))
        stream = client.submit(session_id, "tell me", turn_id="c-1", timeout=TIMEOUT)
        async with aclosing(stream):
            async for event in stream:
                if isinstance(event, TextDelta):
                    await asyncio.to_thread(proxy.cut)

    async def turn_id_free(client: ChatClient, session_id: str) -> str | None:
        """The reason GetTurn gives once the server let go of the cut turn."""
        give_up = time.monotonic() + TIMEOUT
        while time.monotonic() < give_up:
            try:
                await client.get_turn(session_id, "c-1")
            except ChatError as error:
                return error.reason
            await asyncio.sleep(0.1)
        return None

    async def main() -> None:
        async with ChatClient(proxy.target) as client:
            session = await client.create_session("assistant")
            with pytest.raises(ChatError) as raised:
                await cut_turn(client, session.session_id)
            assert raised.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL)
            assert await asyncio.to_thread(model.wait_disconnect, TIMEOUT)
            assert await turn_id_free(client, session.session_id) == "ERROR_REASON_TURN_NOT_FOUND"

    asyncio.run(main())
