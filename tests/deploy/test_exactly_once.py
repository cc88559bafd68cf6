"""A server tool with side effects, and a replica killed while it runs: two `serve` replicas
over one PostgreSQL database, the fake model calling `count_slow` of the orders MCP server
over HTTP (it records its run in a file, then blocks). Replica A runs the turn and is
SIGKILLed while the call is in flight; replica B then reports the turn `interrupted`,
naming the call whose outcome is unknown, and answers a repeat of its turn id with that
failure without running anything. Sending the message again resumes after the recorded
answer: the model reads an `unknown_outcome` result for the call, which does not run again;
and the session's next turn is served. The tool ran once.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import grpc
import pytest

from agentskit_chat.fakemodel import Call, FakeModelServer, ToolCalls
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    PendingToolCall,
    Submit,
    ToolCallResult,
)
from tests.deploy.replicas import Replicas, Store, migrate
from tests.mcp.conftest import TOKEN, HttpServer, records, start_http_server
from tests.postgres import Cluster
from tests.waiting import EVENT_WAIT, until, until_async

QUESTION: Final = "cancel order A-17"
CALL: Final = Call("count_slow", '{"key": "A-17", "gate": "g1"}', id="call-cancel")
SERVE_FLAGS: Final = ("--turn-timeout", "3", "--lease-ttl", "4")
"""A short lease: the killed replica's lapses a few seconds after the turn started."""


@pytest.fixture
def store(postgres: Cluster, tmp_path: Path) -> Iterator[Store]:
    name = f"once_{secrets.token_hex(4)}"
    url = postgres.create_database(name)
    password_file = tmp_path / "store-password"
    password_file.write_text(postgres.password + "\n")
    password_file.chmod(0o600)
    try:
        yield migrate(url, password_file)
    finally:
        postgres.drop_database(name)


@pytest.fixture
def orders(tmp_path: Path) -> Iterator[HttpServer]:
    server = start_http_server(tmp_path / "record.jsonl")
    try:
        yield server
    finally:
        server.process.kill()
        server.process.wait()
        if server.process.stdout is not None:
            server.process.stdout.close()


def shop(directory: Path, model_url: str, orders_url: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "orders.token").write_text(TOKEN + "\n", encoding="utf-8")
    chat = {
        "id": "shop",
        "revision": 1,
        "model": {"adapter": "openai", "base_url": model_url, "model": "fake-1"},
        "conversation": {"initial": "open", "states": {"open": {}}},
        "mcp_servers": {"orders": {"url": orders_url, "token_file": "orders.token"}},
        "tools": {"count_slow": {"server": "orders"}, "release": {"server": "orders"}},
    }
    (directory / "shop.json").write_text(json.dumps(chat), encoding="utf-8")
    return directory


def test_a_replica_killed_while_a_tool_runs(
    store: Store, orders: HttpServer, tmp_path: Path
) -> None:
    record = tmp_path / "record.jsonl"
    with FakeModelServer(answers={QUESTION: ToolCalls(calls=(CALL,))}) as model:
        definitions = shop(tmp_path / "defs", model.url, orders.url)
        replicas = Replicas(tmp_path / "replicas", store, definitions, 2, SERVE_FLAGS)
        try:
            replicas.start_all()
            asyncio.run(scenario(replicas, model, record))
        finally:
            replicas.close()


async def scenario(replicas: Replicas, model: FakeModelServer, record: Path) -> None:
    a, b = replicas.addresses
    async with ChatClient(a, timeout=EVENT_WAIT) as on_a, ChatClient(b, timeout=EVENT_WAIT) as on_b:
        session = (await on_a.create_session("shop")).session_id
        running = asyncio.ensure_future(on_a.run_turn(session, Submit(QUESTION), turn_id="t1"))
        await until(lambda: len(records(record)) == 1, "the tool's run on replica A")
        assert replicas.stop(0, signal.SIGKILL) == -signal.SIGKILL  # while the call runs
        with pytest.raises(ChatError) as lost:
            await running
        assert lost.value.code == grpc.StatusCode.UNAVAILABLE

        async def interrupted() -> bool:
            return (await on_b.get_turn(session, "t1")).outcome == "failed"

        await until_async(interrupted, "the turn reported interrupted on replica B", pause=0.1)
        seen = await on_b.get_turn(session, "t1")
        assert seen.failure is not None
        assert (seen.failure.code, seen.failure.retryable) == ("interrupted", True)
        assert seen.unknown_tool_calls == (PendingToolCall("call-cancel", "count_slow", "server"),)
        asked = len(model.requests)

        repeated = await on_b.run_turn(session, Submit(QUESTION), turn_id="t1")
        assert repeated.started is not None
        assert repeated.started.duplicate
        assert repeated.failed is not None
        assert repeated.failed.code == "interrupted"
        assert not any(isinstance(e, ToolCallResult) for e in repeated.events)
        assert len(model.requests) == asked  # the repeat asked the model nothing
        assert len(records(record)) == 1  # nor ran the tool

        again = await on_b.run_turn(session, Submit(QUESTION), turn_id="t2")
        assert again.ok
        (result,) = [e for e in again.events if isinstance(e, ToolCallResult)]
        assert (result.tool_call_id, result.error_type) == ("call-cancel", "unknown_outcome")
        assert len(records(record)) == 1  # the call whose outcome is unknown is not run again
        assert model.requests[-1].body["messages"][-1]["role"] == "tool"
        kept = await on_b.get_turn(session, "t1")  # written with the session's next turn
        assert kept.unknown_tool_calls == seen.unknown_tool_calls

        after = await on_b.run_turn(session, Submit("thanks"), turn_id="t3")
        assert after.ok
        assert len(records(record)) == 1
        (run,) = records(record)
        assert run["meta"]["agentskit.turn_id"] == "t1"
        assert run["meta"]["agentskit.call_id"] == "call-cancel"
