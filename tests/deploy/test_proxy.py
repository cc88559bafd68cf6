"""deploy/nginx/nginx.conf run by Debian's nginx in front of three `serve` replicas on one
PostgreSQL database (tests/deploy/nginx.py renders it with the test's ports, files and
shorter timeouts).

Continued turns survive what happens to replicas and to the proxy: a replica killed in the
middle of turns (they end `interrupted` once their lease lapses, and run again), replicas
restarted one by one with SIGTERM (they finish their turns, their other streams are cut),
and a proxy reload that cuts every stream. The clients' automatic reattach goes through the
proxy, so it lands on other replicas than the one running the turn. bench/proxy_soak.py
runs the same for longer.
"""

from __future__ import annotations

import asyncio
import secrets
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Final

import grpc
import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    DisconnectMode,
    Session,
    Submit,
    TextDelta,
    TurnCompleted,
    TurnEvent,
    WatchHeartbeat,
    WatchItem,
)
from tests.cli.fixtures.serving import collect, terminal
from tests.deploy.load import LoadClient, histories, problems
from tests.deploy.nginx import TURN_HEADER, Call, Nginx
from tests.deploy.replicas import (
    DEFINITION,
    Replicas,
    Store,
    migrate,
    slow_reply,
    write_definitions,
)
from tests.postgres import Cluster

REPLICAS: Final = 3
CLIENTS: Final = 12
CHUNKS, CHUNK_DELAY = 40, 0.05
SERVE_FLAGS: Final = (
    *("--turn-timeout", "6", "--lease-ttl", "7"),
    # HTTP/2 pings from the replicas count as reads for nginx's grpc_read_timeout, so
    # silent streams (a watch between turns, a reattach waiting for a lapsed lease) stay.
    *("--keepalive-time", "1"),
)
PROXY_SETTINGS: Final = {
    "grpc_read_timeout": "3s",
    "grpc_send_timeout": "3s",
    "worker_shutdown_timeout": "1s",
}
SCENARIO_TIMEOUT: Final = 120.0


@pytest.fixture
def store(postgres: Cluster, tmp_path: Path) -> Iterator[Store]:
    name = f"proxy_{secrets.token_hex(4)}"
    url = postgres.create_database(name)
    password_file = tmp_path / "store-password"
    password_file.write_text(postgres.password + "\n")
    password_file.chmod(0o600)
    try:
        yield migrate(url, password_file)
    finally:
        postgres.drop_database(name)


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer(default=slow_reply(CHUNKS, CHUNK_DELAY)) as server:
        yield server


@pytest.fixture
def replicas(store: Store, model: FakeModelServer, tmp_path: Path) -> Iterator[Replicas]:
    definitions = write_definitions(tmp_path / "definitions", model.url)
    started = Replicas(tmp_path / "replicas", store, definitions, REPLICAS, SERVE_FLAGS)
    try:
        started.start_all()
        yield started
    finally:
        started.close()


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_the_shipped_configuration_is_valid_nginx(tmp_path: Path) -> None:
    proxy = Nginx(tmp_path / "nginx", ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"])
    checked = proxy.check()
    assert checked.returncode == 0, checked.stderr


def test_calls_through_nginx_go_round_robin_to_every_replica(
    replicas: Replicas, tmp_path: Path
) -> None:
    turns = [f"t{n}" for n in range(REPLICAS * 2)]
    with Nginx(tmp_path / "nginx", replicas.addresses) as proxy:

        async def scenario() -> None:
            async with ChatClient(proxy.target, timeout=30) as client:
                sids = [(await client.create_session(DEFINITION)).session_id for _ in turns]
                pairs = zip(sids, turns, strict=True)
                ran = await asyncio.gather(*(collect_with(client, s, t) for s, t in pairs))
                for events in ran:
                    assert isinstance(terminal(events), TurnCompleted), events

        asyncio.run(scenario())
    calls = [call for call in proxy.calls() if call.method == "StreamTurn"]
    assert sorted(call.turn for call in calls) == turns
    served = Counter(call.upstreams[-1] for call in calls)
    assert sorted(served) == sorted(replicas.addresses)
    assert set(served.values()) == {2}


async def collect_with(client: ChatClient, sid: str, turn_id: str) -> list[TurnEvent]:
    stream = client.stream_turn(
        sid, Submit(f"turn {turn_id}"), turn_id=turn_id, metadata=((TURN_HEADER, turn_id),)
    )
    async with aclosing(stream):
        return [event async for event in stream]


def runner(calls: list[Call], turn_id: str) -> Call:
    """The StreamTurn call that ran `turn_id` (not one a stopping replica refused)."""
    ran = [c for c in calls if c.method == "StreamTurn" and c.turn == turn_id]
    ran = [c for c in ran if c.grpc_status not in ("1", "10", "14")]
    assert ran, f"no StreamTurn ran {turn_id}"
    return ran[0]


def test_continued_turns_through_nginx_survive_a_kill_drains_and_a_proxy_reload(
    replicas: Replicas, model: FakeModelServer, tmp_path: Path
) -> None:
    answer = "".join(slow_reply(CHUNKS, CHUNK_DELAY).chunks)
    with Nginx(tmp_path / "nginx", replicas.addresses, PROXY_SETTINGS) as proxy:
        clients = [LoadClient(n, proxy.target) for n in range(CLIENTS)]

        async def scenario() -> float:
            stop = asyncio.Event()
            loads = [asyncio.ensure_future(c.run(DEFINITION, stop)) for c in clients]
            try:
                await until(lambda: all(c.runs and c.runs[-1].events for c in clients))
                killed_at = time.time()
                assert await asyncio.to_thread(replicas.stop, 0, signal.SIGKILL) == -9
                await asyncio.to_thread(replicas.start, 0)
                old = proxy.reload()  # the old worker cuts every stream it still has after 1 s
                await asyncio.to_thread(proxy.wait_exited, old, SCENARIO_TIMEOUT)
                for n in range(1, REPLICAS):
                    assert await asyncio.to_thread(replicas.restart, n, signal.SIGTERM) == 0
                stop.set()
                await asyncio.wait_for(asyncio.gather(*loads), SCENARIO_TIMEOUT)
                return killed_at
            finally:
                for load in loads:
                    load.cancel()

        killed_at = asyncio.run(scenario())
        stored = asyncio.run(histories(proxy.target, clients))
    calls = proxy.calls()

    found = problems(clients, stored, answer)
    assert not found, "\n".join(found)
    runs = [run for client in clients for run in client.runs]
    interrupted = {run.turn_id for run in runs if run.interrupted}
    on_killed = {
        c.turn
        for c in calls
        if c.method == "StreamTurn"
        and c.upstreams[-1] == replicas.addresses[0]
        and c.time - c.request_time < killed_at < c.time
    }
    assert interrupted, "no turn ran on the killed replica"
    assert interrupted <= on_killed, "only the killed replica's turns may be interrupted"
    # Reattaches went through the proxy to other replicas than the turn's.
    watches = [c for c in calls if c.method == "WatchTurn"]
    for turn_id in interrupted:
        assert any(c.turn == turn_id for c in watches), turn_id
    completed = {run.turn_id for run in runs if run.completed}
    elsewhere = [
        c
        for c in watches
        if c.turn in completed and c.upstreams[-1] != runner(calls, c.turn).upstreams[-1]
    ]
    assert elsewhere, "no completed turn was followed on another replica"
    # nginx never passed a call to a second replica once it had reached one.
    for call in calls:
        assert all(sent == 0 for sent in call.sent[:-1]), call


IDLE_SETTINGS: Final = {**PROXY_SETTINGS, "grpc_read_timeout": "2s"}
IDLE: Final = 5.0
"""Seconds a watch stays idle: more than twice grpc_read_timeout in IDLE_SETTINGS."""


@pytest.mark.parametrize(
    "flags",
    [("--watch-heartbeat", "1"), ("--keepalive-time", "1"), ()],
    ids=["heartbeats", "http2-pings", "neither"],
)
def test_an_idle_session_watch_through_nginx_outlives_its_read_timeout(
    store: Store, model: FakeModelServer, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    """Either the server's heartbeats or its HTTP/2 pings (each counts as a read for
    nginx) keep a watch open past grpc_read_timeout; with neither, nginx cuts it."""
    answer = "".join(slow_reply(CHUNKS, CHUNK_DELAY).chunks)
    definitions = write_definitions(tmp_path / "definitions", model.url)
    one = Replicas(tmp_path / "replicas", store, definitions, 1, flags)
    try:
        one.start_all()
        with Nginx(tmp_path / "nginx", one.addresses * REPLICAS, IDLE_SETTINGS) as proxy:
            if not flags:
                with pytest.raises(ChatError) as cut:
                    asyncio.run(watch_idle_then_turn(proxy.target))
                assert cut.value.code == grpc.StatusCode.INTERNAL  # nginx reset the stream
                assert "upstream timed out" in proxy.error_log()
                return
            items = asyncio.run(watch_idle_then_turn(proxy.target))
    finally:
        one.close()
    heartbeats = [i for i in items if isinstance(i, WatchHeartbeat)]
    if flags[0] == "--watch-heartbeat":
        assert len(heartbeats) >= IDLE / 2
    else:
        assert heartbeats == []  # 15 s apart by default: the pings alone kept it open
    deltas = [i for i in items if isinstance(i, TextDelta)]
    assert "".join(d.text for d in deltas) == answer
    assert isinstance(items[-1], TurnCompleted)


async def watch_idle_then_turn(target: str) -> list[WatchItem]:
    """Watch a session through `target`, idle for IDLE seconds, then while another client
    runs a turn in it; every item the watch got up to that turn's end. The watch's error
    when it ended before."""
    async with ChatClient(target) as watcher, ChatClient(target) as other:
        sid = (await other.create_session(DEFINITION)).session_id
        items: list[WatchItem] = []

        async def watch() -> None:
            async for item in watcher.watch_session(sid):
                items.append(item)
                if isinstance(item, TurnCompleted):
                    return

        watching = asyncio.ensure_future(watch())
        try:
            await until(lambda: bool(items) or watching.done())
            assert isinstance(items[0], Session)
            await asyncio.sleep(IDLE)
            if watching.done():
                await watching  # raises what ended it
            done = terminal(await collect(other, sid, Submit("hello")))
            assert isinstance(done, TurnCompleted)
            await asyncio.wait_for(watching, 30)
        finally:
            watching.cancel()
        last = items[-1]
        assert isinstance(last, TurnCompleted)
        assert (last.turn_id, last.content) == (done.turn_id, done.content)
        return items


def test_a_quiet_reattach_through_nginx_outlives_its_read_timeout(
    store: Store, tmp_path: Path
) -> None:
    """A reattach to a turn whose model pauses, with nothing missed to send at first."""
    with FakeModelServer(default=Reply(chunks=("first ", "second"), pause_after=1)) as model:
        definitions = write_definitions(tmp_path / "definitions", model.url)
        flags = ("--keepalive-time", "1", "--turn-timeout", "30")
        one = Replicas(tmp_path / "replicas", store, definitions, 1, flags)
        try:
            one.start_all()
            with Nginx(tmp_path / "nginx", one.addresses * REPLICAS, IDLE_SETTINGS) as proxy:
                events = asyncio.run(reattach_while_quiet(proxy.target, model))
        finally:
            one.close()
    assert [e.sequence for e in events] == [4, 5]
    last = events[-1]
    assert isinstance(last, TurnCompleted)
    assert last.content == "first second"


async def reattach_while_quiet(target: str, model: FakeModelServer) -> list[TurnEvent]:
    """Start a continued turn, leave it after its first delta, and follow it again from
    there while the model pauses for IDLE seconds; the events the reattach got."""
    async with ChatClient(target, timeout=60) as client:
        sid = (await client.create_session(DEFINITION)).session_id
        stream = client.stream_turn(
            sid, Submit("pause"), turn_id="quiet", on_disconnect=DisconnectMode.CONTINUE
        )
        async with aclosing(stream):
            async for event in stream:
                if isinstance(event, TextDelta):
                    seen = event.sequence
                    break
        watch = client.watch_turn(sid, "quiet", after_sequence=seen, reattach=False)

        async def follow() -> list[TurnEvent]:
            async with aclosing(watch):
                return [event async for event in watch]

        following = asyncio.ensure_future(follow())
        await asyncio.sleep(IDLE)
        model.resume()
        return await asyncio.wait_for(following, 30)
