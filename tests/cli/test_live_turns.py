"""Turns that outlive their stream across `serve --workers 2` on SQLite: watched, cancelled
and interrupted through a worker other than the one running the turn."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat_client import ChatClient, ChatError, Submit
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import Server, collect
from tests.cli.test_model_turns import write_assistant
from tests.cli.test_replicas import database
from tests.cli.test_workers import clients, turn_pids, workers_of
from tests.waiting import EVENT_WAIT, until

__all__ = ["database"]  # the PostgreSQL database fixture
CHUNKS = tuple(f"part {n} " for n in range(40))
CANARY = "canary-held-by-the-client-3c1d"
SHORT_TURNS = ("--turn-timeout", "3", "--lease-ttl", "4")


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def chat(client: ChatClient) -> Any:
    return chat_pb2_grpc.ChatServiceStub(client.channel)


def continued(session_id: str, turn_id: str, **operation: Any) -> pb.StreamTurnRequest:
    if not operation:
        operation = {"submit": pb.SubmitOperation(content="tell me")}
    return pb.StreamTurnRequest(
        session_id=session_id,
        turn_id=turn_id,
        on_disconnect=pb.DISCONNECT_MODE_CONTINUE,
        **operation,
    )


async def events(stream: AsyncIterator[pb.StreamTurnResponse]) -> list[pb.StreamTurnResponse]:
    return [event async for event in stream]


async def events_after(
    first: pb.StreamTurnResponse, stream: AsyncIterator[pb.StreamTurnResponse]
) -> list[pb.StreamTurnResponse]:
    """`first`, read already, and the rest of `stream`."""
    return [first, *[event async for event in stream]]


async def by_worker(server: Server, opened: list[ChatClient], session_id: str) -> dict[int, Any]:
    """One client per worker pid: each runs a turn in turn, and the turn log says where."""
    for client in opened:
        await collect(client, session_id, Submit("/hello"))
    pids = turn_pids(server, len(opened))
    found: dict[int, Any] = {}
    for pid, client in zip(pids, opened, strict=True):
        found.setdefault(pid, client)
    assert len(found) == 2, pids
    return found


async def read_until(call: Any, count: int) -> list[pb.StreamTurnResponse]:
    """The first `count` deltas' worth of the stream, then the call is cut."""
    seen = []
    deltas = 0
    async for event in call:
        seen.append(event)
        deltas += event.WhichOneof("event") == "delta"
        if deltas == count:
            break
    call.cancel()
    return seen


async def once_free(stub: Any, request: pb.StreamTurnRequest) -> list[pb.StreamTurnResponse]:
    """The turn's events, once the session's lease is free (ABORTED until then)."""
    give_up = time.monotonic() + EVENT_WAIT
    while True:
        try:
            return await events(stub.StreamTurn(request))
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.ABORTED:
                raise
            assert time.monotonic() < give_up, "the lease was never free"
            await asyncio.sleep(0.1)


async def paused(model: FakeModelServer, chunks: int) -> None:
    """Once the model's latest answer has sent `chunks` chunks: it pauses there."""
    await until(
        lambda: bool(model.requests) and model.requests[-1].chunks_sent >= chunks,
        f"the model's pause after {chunks} chunks",
    )


def assert_whole(events: list[pb.StreamTurnResponse], after: int) -> None:
    assert [e.sequence for e in events] == list(range(after + 1, after + 1 + len(events)))
    assert events[-1].WhichOneof("event") in ("completed", "failed")


def start(launch: Launcher, tmp_path: Path, model: FakeModelServer, *extra: str) -> Server:
    definitions = write_assistant(tmp_path / "definitions", model.url)
    server = launch(
        tmp_path / "state",
        "--definitions",
        str(definitions),
        "--workers",
        "2",
        *extra,
        log_level="INFO",
    )
    workers_of(server, 2)
    return server


def stop(server: Server) -> None:
    server.send(signal.SIGTERM)
    assert server.wait() == 0


def test_a_continued_turn_is_reattached_through_either_worker_exactly_once(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    server = start(launch, tmp_path, model)
    model.enqueue(Reply(chunks=CHUNKS, pause_after=5))

    async def scenario() -> None:
        async with clients(server.target) as opened:
            sid = (await opened[0].create_session("assistant")).session_id
            workers = await by_worker(server, opened, sid)
            here, there = (chat(c) for c in workers.values())
            seen = await read_until(here.StreamTurn(continued(sid, "t-1")), 2)
            after = seen[-1].sequence
            await paused(model, 5)  # the turn goes on to its pause: events were missed
            request = pb.WatchTurnRequest(session_id=sid, turn_id="t-1", after_sequence=after)
            firsts: dict[str, float] = {}

            async def watch(name: str, stub: Any) -> list[pb.StreamTurnResponse]:
                got: list[pb.StreamTurnResponse] = []
                began = time.perf_counter()
                async for event in stub.WatchTurn(request):
                    if not got:
                        firsts[name] = time.perf_counter() - began
                    got.append(event)
                return got

            watching = [
                asyncio.ensure_future(watch(n, s)) for n, s in (("same", here), ("other", there))
            ]
            while len(firsts) < 2:  # both got the first missed event while the model waits
                await asyncio.sleep(0.01)
            model.resume()
            same, other = await asyncio.gather(*watching)
            for got in (same, other):
                assert_whole(got, after)
                text = "".join(e.delta.text for e in seen + got if e.WhichOneof("event") == "delta")
                assert text == "".join(CHUNKS)
                assert got[-1].completed.content == "".join(CHUNKS)
            assert [e.sequence for e in same] == [e.sequence for e in other]
            turn = await there.GetTurn(pb.GetTurnRequest(session_id=sid, turn_id="t-1"))
            assert turn.turn.outcome == pb.TURN_OUTCOME_COMPLETED
            history = await opened[0].get_session(sid)
            assert [m.content for m in history.messages].count("".join(CHUNKS)) == 1
            # After the end, while kept: a reattach gets the rest at once, from either.
            for stub, name in ((here, "same-ended"), (there, "other-ended")):
                began = time.perf_counter()
                got = await events(stub.WatchTurn(request))
                firsts[name] = time.perf_counter() - began
                assert [e.sequence for e in got] == [e.sequence for e in same]
            print("reconnect to first missed event (s):", firsts)

    asyncio.run(scenario())
    stop(server)


def test_cancel_turn_through_the_other_worker_stops_the_turn_and_frees_the_id(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    server = start(launch, tmp_path, model)
    model.enqueue(Reply(chunks=CHUNKS, pause_after=2))

    async def scenario() -> None:
        async with clients(server.target) as opened:
            sid = (await opened[0].create_session("assistant")).session_id
            workers = await by_worker(server, opened, sid)
            here, there = (chat(c) for c in workers.values())
            request = pb.StreamTurnRequest(
                session_id=sid, turn_id="t-c", submit=pb.SubmitOperation(content="tell me")
            )
            starter = asyncio.ensure_future(events(here.StreamTurn(request)))
            give_up = time.monotonic() + EVENT_WAIT
            while True:  # running once its lease is stored
                found = await there.ListTurns(pb.ListTurnsRequest(session_id=sid))
                if found.turns and found.turns[0].outcome == pb.TURN_OUTCOME_RUNNING:
                    break
                assert time.monotonic() < give_up, "the turn never ran"
                await asyncio.sleep(0.02)
            call = there.WatchTurn(pb.WatchTurnRequest(session_id=sid, turn_id="t-c"))
            first = await asyncio.wait_for(anext(aiter(call)), EVENT_WAIT)  # it follows
            watcher = asyncio.ensure_future(events_after(first, call))
            await paused(model, 2)
            stopped = await there.CancelTurn(pb.CancelTurnRequest(session_id=sid, turn_id="t-c"))
            assert stopped.cancelled
            for got in (await starter, await watcher):
                assert_whole(got, 0)
                assert got[-1].failed.code == "cancelled"
                assert got[-1].failed.retryable
            assert await asyncio.to_thread(model.wait_disconnect, 10)
            again = await there.CancelTurn(pb.CancelTurnRequest(session_id=sid, turn_id="t-c"))
            assert not again.cancelled
            model.enqueue(Reply(chunks=("fine",)))
            rerun = await events(there.StreamTurn(request))
            assert rerun[-1].completed.content == "fine"
            assert not rerun[0].started.duplicate

    asyncio.run(scenario())
    stop(server)


def test_a_killed_workers_turn_ends_interrupted_for_its_watchers_and_runs_again(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    server = start(launch, tmp_path, model, *SHORT_TURNS)
    model.enqueue(Reply(chunks=CHUNKS, pause_after=3))

    async def scenario() -> None:
        async with clients(server.target) as opened:
            sid = (await opened[0].create_session("assistant")).session_id
            workers = await by_worker(server, opened, sid)
            (doomed_pid, doomed), (_, survivor) = workers.items()
            here, there = chat(doomed), chat(survivor)
            seen = await read_until(here.StreamTurn(continued(sid, "t-k")), 3)
            request = pb.WatchTurnRequest(
                session_id=sid, turn_id="t-k", after_sequence=seen[-1].sequence
            )
            call = there.WatchTurn(request)
            await asyncio.wait_for(call.initial_metadata(), EVENT_WAIT)  # it follows
            watcher = asyncio.ensure_future(events(call))
            os.kill(doomed_pid, signal.SIGKILL)
            got = await asyncio.wait_for(watcher, 30)
            assert_whole(got, seen[-1].sequence)
            last = got[-1].failed
            assert (last.code, last.retryable) == ("interrupted", True)
            assert last.message == (
                "the server running the turn stopped before it ended; nothing was committed"
            )
            model.enqueue(Reply(chunks=("again",)))
            rerun = await once_free(there, continued(sid, "t-k"))
            assert rerun[-1].completed.content == "again"

    asyncio.run(scenario())
    stop(server)


def test_cancel_turn_of_a_killed_workers_turn_says_it_still_holds_the_session(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    server = start(launch, tmp_path, model)
    model.enqueue(Reply(chunks=CHUNKS, pause_after=3))

    async def scenario() -> None:
        async with clients(server.target) as opened:
            sid = (await opened[0].create_session("assistant")).session_id
            workers = await by_worker(server, opened, sid)
            (doomed_pid, doomed), (_, survivor) = workers.items()
            await read_until(chat(doomed).StreamTurn(continued(sid, "t-x")), 3)
            os.kill(doomed_pid, signal.SIGKILL)
            # Nobody stops the turn: its lease stays until it lapses.
            with pytest.raises(ChatError) as held:
                await survivor.cancel_turn(sid, "t-x")
            assert held.value.code == grpc.StatusCode.ABORTED
            assert held.value.reason == "ERROR_REASON_TURN_IN_PROGRESS"
            assert int(held.value.metadata["retry_after_ms"]) > 0

    asyncio.run(scenario())
    stop(server)


def test_a_client_held_turns_text_never_reaches_the_store_in_the_clear(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    server = start(launch, tmp_path, model)
    model.enqueue(Reply(chunks=(CANARY, " and more")))

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            stub = chat(client)
            created = await stub.CreateSession(
                pb.CreateSessionRequest(
                    definition_id="assistant", history_mode=pb.HISTORY_MODE_CLIENT
                )
            )
            sid = created.session.session_id
            dispatch = pb.DispatchOperation(
                messages=[pb.Message(id="u-1", role=pb.ROLE_USER, content="tell me")]
            )
            got = await events(stub.StreamTurn(continued(sid, "t-s", dispatch=dispatch)))
            assert got[-1].completed.content == CANARY + " and more"
            watched = await events(
                stub.WatchTurn(pb.WatchTurnRequest(session_id=sid, turn_id="t-s"))
            )
            assert [e.sequence for e in watched] == [e.sequence for e in got]
            assert watched[-1].completed.content == got[-1].completed.content

    asyncio.run(scenario())
    stop(server)
    state = tmp_path / "state"
    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.name.startswith("sessions") for p in files), files
    for path in files:
        assert CANARY.encode() not in path.read_bytes(), path


def two_replicas(
    launch: Launcher, tmp_path: Path, model: FakeModelServer, database: Any, *extra: str
) -> list[Server]:
    """Two `serve` processes on one PostgreSQL database, sharing the digest key."""
    definitions = write_assistant(tmp_path / "definitions", model.url)
    env = {
        "AGENTSKIT_CHAT_STORE_PASSWORD_FILE": str(database.password_file),
        "AGENTSKIT_CHAT_DIGEST_KEY": "5f" * 32,
    }
    started = [
        launch(
            tmp_path / f"replica-{n}",
            "--definitions",
            str(definitions),
            "--store",
            database.url,
            *extra,
            env=env,
            wait=False,
            log_level="INFO",
        )
        for n in range(2)
    ]
    for server in started:
        server.wait_listening()
    return started


def test_replicas_on_postgresql_reattach_and_interrupt_across_each_other(
    launch: Launcher, model: FakeModelServer, database: Any, tmp_path: Path
) -> None:
    doomed, survivor = two_replicas(launch, tmp_path, model, database, *SHORT_TURNS)
    model.enqueue(Reply(chunks=CHUNKS, pause_after=2), Reply(chunks=CHUNKS, pause_after=3))

    async def scenario() -> None:
        async with (
            ChatClient(doomed.target, timeout=30) as first,
            ChatClient(survivor.target, timeout=30) as second,
        ):
            here, there = chat(first), chat(second)
            sid = (await first.create_session("assistant")).session_id
            # A continued turn cut on one replica is followed through the other.
            seen = await read_until(here.StreamTurn(continued(sid, "t-1")), 1)
            await paused(model, 2)  # the turn goes on to its pause: events were missed
            request = pb.WatchTurnRequest(
                session_id=sid, turn_id="t-1", after_sequence=seen[-1].sequence
            )
            began = time.perf_counter()
            call = there.WatchTurn(request)
            got = [await anext(aiter(call))]
            print(
                "reconnect to first missed event, other replica (s):", time.perf_counter() - began
            )
            model.resume()
            got += [event async for event in call]
            assert_whole(got, seen[-1].sequence)
            assert got[-1].completed.content == "".join(CHUNKS)
            history = await second.get_session(sid)
            assert [m.content for m in history.messages].count("".join(CHUNKS)) == 1

            # Its replica killed, a continued turn ends interrupted once its lease lapses.
            seen = await read_until(here.StreamTurn(continued(sid, "t-2")), 3)
            request = pb.WatchTurnRequest(
                session_id=sid, turn_id="t-2", after_sequence=seen[-1].sequence
            )
            call = there.WatchTurn(request)
            await asyncio.wait_for(call.initial_metadata(), EVENT_WAIT)  # it follows
            watcher = asyncio.ensure_future(events(call))
            doomed.send(signal.SIGKILL)
            got = await asyncio.wait_for(watcher, 30)
            assert_whole(got, seen[-1].sequence)
            assert (got[-1].failed.code, got[-1].failed.retryable) == ("interrupted", True)
            model.enqueue(Reply(chunks=("again",)))
            rerun = await once_free(there, continued(sid, "t-2"))
            assert rerun[-1].completed.content == "again"

    asyncio.run(scenario())
    survivor.send(signal.SIGTERM)
    assert survivor.wait() == 0
