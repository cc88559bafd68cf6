"""A turn's events across two `serve` processes on one store (two processes on one SQLite
state directory, or two replicas on PostgreSQL): once the turn ended on one, the other
still returns its missed events for the retention, and every view of one event (the turn's
own stream, WatchTurn, WatchSession, on either process) sends the same bytes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat_client import ChatClient
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import Server
from tests.cli.test_model_turns import write_assistant
from tests.cli.test_replicas import DIGEST_KEY
from tests.cli.test_replicas import database as database  # the fixture

CHUNKS = tuple(f"part {n} " for n in range(12))


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def pair(
    request: pytest.FixtureRequest, launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> tuple[Server, Server]:
    """Two `serve` processes over one store."""
    definitions = write_assistant(tmp_path / "definitions", model.url)
    flags = ["--definitions", str(definitions)]
    if request.param == "sqlite":
        state = tmp_path / "state"
        servers = [launch(state, *flags, wait=False) for _ in range(2)]
    else:
        db = request.getfixturevalue("database")
        env = {
            "AGENTSKIT_CHAT_STORE_PASSWORD_FILE": str(db.password_file),
            "AGENTSKIT_CHAT_DIGEST_KEY": DIGEST_KEY,
        }
        servers = [
            launch(tmp_path / f"replica-{n}", *flags, "--store", db.url, env=env, wait=False)
            for n in range(2)
        ]
    for server in servers:
        server.wait_listening()
    return servers[0], servers[1]


def stub(client: ChatClient) -> Any:
    return chat_pb2_grpc.ChatServiceStub(client.channel)


def submit(session_id: str, turn_id: str) -> pb.StreamTurnRequest:
    return pb.StreamTurnRequest(
        session_id=session_id, turn_id=turn_id, submit=pb.SubmitOperation(content="tell me")
    )


async def responses(stream: AsyncIterator[pb.StreamTurnResponse]) -> list[pb.StreamTurnResponse]:
    return [response async for response in stream]


def watch(session_id: str, turn_id: str, after: int) -> pb.WatchTurnRequest:
    return pb.WatchTurnRequest(session_id=session_id, turn_id=turn_id, after_sequence=after)


def wire(events: list[pb.StreamTurnResponse]) -> list[bytes]:
    return [event.SerializeToString() for event in events]


def test_a_turn_ended_on_one_process_is_reattached_on_the_other_with_its_missed_events(
    pair: tuple[Server, Server], model: FakeModelServer
) -> None:
    ran, other = pair
    model.enqueue(Reply(chunks=CHUNKS))

    async def scenario() -> None:
        async with (
            ChatClient(ran.target, timeout=30) as here,
            ChatClient(other.target, timeout=30) as there,
        ):
            sid = (await here.create_session("assistant")).session_id
            whole = await responses(stub(here).StreamTurn(submit(sid, "t-1")))
            assert whole[-1].WhichOneof("event") == "completed"
            assert not whole[0].started.duplicate
            # The renderer saw the first three events, then the turn ended: it reattaches
            # on the other process, which never ran the turn.
            missed = await responses(stub(there).WatchTurn(watch(sid, "t-1", 3)))
            assert wire(missed) == wire(whole[3:])
            assert [e.sequence for e in missed] == list(range(4, len(whole) + 1))
            assert "started" not in [e.WhichOneof("event") for e in missed]
            # From the start, on either process: the turn's events, not its recorded outcome.
            for client in (there, here):
                again = await responses(stub(client).WatchTurn(watch(sid, "t-1", 0)))
                assert not again[0].started.duplicate
                assert wire(again) == wire(whole)
            # Past the last event: nothing more, on the other process too.
            last = whole[-1].sequence
            assert await responses(stub(there).WatchTurn(watch(sid, "t-1", last))) == []

    asyncio.run(scenario())


def test_one_event_is_the_same_bytes_in_every_view_on_either_process(
    pair: tuple[Server, Server], model: FakeModelServer
) -> None:
    ran, other = pair
    model.enqueue(Reply(chunks=CHUNKS, pause_after=2))

    async def scenario() -> None:
        async with (
            ChatClient(ran.target, timeout=30) as here,
            ChatClient(other.target, timeout=30) as there,
        ):
            sid = (await here.create_session("assistant")).session_id
            session_watch = stub(there).WatchSession(pb.WatchSessionRequest(session_id=sid))
            first = await anext(aiter(session_watch))
            assert first.WhichOneof("item") == "session"
            own = stub(here).StreamTurn(submit(sid, "t-1"))
            seen = []
            async for event in own:  # up to the model's pause
                seen.append(event)
                if event.WhichOneof("event") == "delta" and len(seen) >= 4:
                    break
            live = asyncio.ensure_future(responses(stub(there).WatchTurn(watch(sid, "t-1", 0))))
            watched: list[pb.StreamTurnResponse] = []

            async def follow() -> None:
                async for item in session_watch:
                    if item.WhichOneof("item") != "event":
                        continue
                    watched.append(item.event)
                    if item.event.WhichOneof("event") in ("completed", "failed"):
                        return

            following = asyncio.ensure_future(follow())
            async with asyncio.timeout(30):  # the session watcher has caught up with the pause
                while len(watched) < len(seen):
                    await asyncio.sleep(0.01)
            model.resume()
            seen += await responses(own)
            await asyncio.wait_for(following, 30)
            session_watch.cancel()
            assert seen[-1].WhichOneof("event") == "completed"
            views = {
                "watch turn, other process, live": await asyncio.wait_for(live, 30),
                "watch session, other process, live": watched,
                "watch turn, other process, ended": await responses(
                    stub(there).WatchTurn(watch(sid, "t-1", 0))
                ),
                "watch turn, same process, ended": await responses(
                    stub(here).WatchTurn(watch(sid, "t-1", 0))
                ),
            }
            for name, view in views.items():
                assert wire(view) == wire(seen), name
            times = [event.time.ToNanoseconds() for event in seen]
            assert times == sorted(times)
            assert all(times)

    asyncio.run(scenario())
