"""WatchSession across processes: a watch served by one worker of `serve --workers 2` (SQLite)
or by one replica of two (PostgreSQL) sees, live, a turn another process runs; the watcher
flags of `serve`; no text of a client-held session in any log or in the clear in the store."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import grpc
import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat_client import (
    ChatClient,
    Dispatch,
    HistoryMode,
    Message,
    Submit,
    TextDelta,
    TurnCompleted,
    TurnEvent,
)
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import Gate, Server
from tests.cli.test_model_turns import write_assistant
from tests.cli.test_replicas import Database, replicas
from tests.cli.test_replicas import database as database  # the fixture
from tests.transport.watching import Watch, event_kind, kind, session_at, text, turn_events

CANARY = "canary-watch-5e1d-never-in-logs"
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
CLIENTS = 24
"""Connections opened at once; the kernel hashes each to a worker, so with two workers the
chance that all land on one is 2 ** -23."""


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def paused(*chunks: str) -> Reply:
    """An answer that stops after its first chunk until the model server resumes."""
    return Reply(chunks=chunks, pause_after=1)


async def watched_live(
    runner: ChatClient,
    watcher: grpc.aio.Channel,
    model: FakeModelServer,
    session_id: str,
    operation: Submit | Dispatch,
) -> tuple[list[TurnEvent], Watch]:
    """Run a paused agentic turn with `runner` while `watcher` (another process) watches
    the session: the watcher must have the first delta while the turn cannot end (the
    model waits to be resumed). The events the runner got, and the watch."""
    watch = Watch(watcher, session_id)
    first = await watch.next()
    assert kind(first) == "session"
    stream = runner.stream_turn(session_id, operation, turn_id="live")
    got: list[TurnEvent] = []
    async for event in stream:
        got.append(event)
        if isinstance(event, TextDelta):
            break
    await watch.until(lambda item: event_kind(item) == "delta")
    assert not model.requests[-1].disconnected.is_set()
    model.resume()  # only now can the turn go on and end
    got += [event async for event in stream]
    done = got[-1]
    assert isinstance(done, TurnCompleted), done
    await watch.until(session_at(done.cursor))
    events = turn_events(watch.items, "live")
    assert [e.sequence for e in events] == list(range(1, len(got) + 1))
    assert [e.WhichOneof("event") for e in events][:3] == ["started", "decision", "delta"]
    assert events[-1].WhichOneof("event") == "completed"
    assert text(events) == done.content
    return got, watch


@asynccontextmanager
async def own_connections(target: str, count: int) -> AsyncIterator[list[grpc.aio.Channel]]:
    async with AsyncExitStack() as stack:
        channels = []
        for _ in range(count):
            channel = grpc.aio.insecure_channel(target, options=OWN_CONNECTION)
            channels.append(await stack.enter_async_context(channel))
        yield channels


def turn_pid(server: Server, count: int, timeout: float = 30.0) -> int:
    """The pid of the `count`-th turn log line (waits until it was logged)."""
    deadline = time.monotonic() + timeout
    while len(records := server.records("turn")) < count:
        assert time.monotonic() < deadline, f"{len(records)} turn lines: {server.stdout}"
        time.sleep(0.05)
    return int(records[count - 1]["pid"])


async def two_workers(server: Server, channels: list[grpc.aio.Channel]) -> list[ChatClient]:
    """Two clients whose connections two different workers serve: each connection runs a
    route turn until two pids have answered."""
    by_pid: dict[int, ChatClient] = {}
    scratch = (await ChatClient(channels[0]).create_session("assistant")).session_id
    for count, channel in enumerate(channels, start=1):
        client = ChatClient(channel, timeout=30)
        await client.run_turn(scratch, Submit("/hello"))
        by_pid.setdefault(await asyncio.to_thread(turn_pid, server, count), client)
        if len(by_pid) == 2:
            return list(by_pid.values())
    raise AssertionError("every connection went to one worker")


def test_a_watch_on_one_worker_sees_a_turn_run_by_the_other_live(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    definitions = write_assistant(tmp_path / "definitions", model.url)
    state = tmp_path / "state"
    server = launch(state, "--definitions", str(definitions), "--workers", "2", log_level="DEBUG")
    model.enqueue(paused("first ", "second ", "third"), paused("held ", f"{CANARY}"))

    async def scenario() -> None:
        async with own_connections(server.target, CLIENTS) as channels:
            runner, watching = await two_workers(server, channels)
            sid = (await runner.create_session("assistant")).session_id
            await watched_live(runner, watching.channel, model, sid, Submit("hello"))

            # A client-held session: its text is never in the clear in the store.
            held = await runner.create_session("assistant", history_mode=HistoryMode.CLIENT)
            history = (Message("u1", "user", f"hello {CANARY}"),)
            await watched_live(runner, watching.channel, model, held.session_id, Dispatch(history))
            assert not stored_in_the_clear(state / "sessions.db", CANARY)

    asyncio.run(scenario())
    assert CANARY not in server.stdout
    assert CANARY not in server.stderr


def stored_in_the_clear(db_path: Path, needle: str) -> list[str]:
    """The tables of the SQLite file holding `needle` in any column."""
    found = []
    with sqlite3.connect(db_path) as connection:
        tables = [
            r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):
                if any(needle.encode() in _bytes(value) for value in row):
                    found.append(table)
                    break
    connection.close()
    return found


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogatepass")


def test_a_watch_on_one_replica_sees_a_turn_run_by_the_other_live(
    launch: Launcher, model: FakeModelServer, gate: Gate, database: Database, tmp_path: Path
) -> None:
    definitions = write_assistant(tmp_path / "definitions", model.url)
    first, second = replicas(
        launch, 2, database, tmp_path / "state", gate, "--definitions", str(definitions)
    )
    model.enqueue(paused("one ", "two ", "three"), paused(f"{CANARY} ", "held"))

    async def scenario() -> None:
        async with (
            ChatClient(first.target, timeout=30) as runner,
            grpc.aio.insecure_channel(second.target) as watching,
        ):
            sid = (await runner.create_session("assistant")).session_id
            await watched_live(runner, watching, model, sid, Submit("hello"))
            held = await runner.create_session("assistant", history_mode=HistoryMode.CLIENT)
            history = (Message("u1", "user", f"hello {CANARY}"),)
            await watched_live(runner, watching, model, held.session_id, Dispatch(history))

    asyncio.run(scenario())
    for server in (first, second):
        assert CANARY not in server.stdout
        assert CANARY not in server.stderr


def test_the_watcher_flags_bound_watches_and_pace_heartbeats(
    launch: Launcher, tmp_path: Path
) -> None:
    server = launch(
        tmp_path / "state",
        "--max-watchers-per-session",
        "1",
        "--max-watchers-per-tenant",
        "2",
        "--watch-heartbeat",
        "0.2",
    )

    async def scenario() -> None:
        async with (
            ChatClient(server.target, timeout=30) as client,
            grpc.aio.insecure_channel(server.target) as channel,
        ):
            one = (await client.create_session("support")).session_id
            two = (await client.create_session("support")).session_id
            watch = Watch(channel, one)
            await watch.next()
            assert kind(await watch.next()) == "heartbeat"
            refused = await Watch(channel, one).error()
            assert refused.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert refused.metadata["limit"] == "watchers_per_session"
            other = Watch(channel, two)
            await other.next()
            refused = await Watch(channel, "a-third-one").error()
            assert refused.metadata["limit"] == "watchers_per_tenant"
            watch.cancel()
            other.cancel()

    asyncio.run(scenario())


def test_bad_watcher_flags_are_refused(launch: Launcher, tmp_path: Path) -> None:
    server = launch(tmp_path / "state", "--max-watchers-per-session", "0", wait=False)
    assert server.wait() == 2
    assert "--max-watchers-per-session" in server.stderr
