"""A real server on loopback: SQLite in tmp_path, the example definitions and probe chats."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2

from agentskit_chat.conversation import (
    ChatDefinition,
    Role,
    RouteContext,
    command_route,
    define_chat,
    load_definitions,
)
from agentskit_chat.models import (
    AdapterRegistry,
    FinishChunk,
    ModelChunk,
    ModelError,
    ModelRequest,
    TextChunk,
    ToolCallDeltaChunk,
    ToolCallStartChunk,
    UsageChunk,
)
from agentskit_chat.service import Catalog, ChatService, Limits, RateLimits, TurnObserver
from agentskit_chat.storage import SqliteStore, open_sqlite_store
from agentskit_chat.transport import Authenticator, RunningServer, start_server
from agentskit_chat_client import ChatClient, ChatError, Submit, TurnResult
from tests.waiting import EVENT_WAIT

T = TypeVar("T")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "definitions"
KEY = b"transport-tests-digest-key-32byt"
CANARY = "canary-7f3a9c-do-not-leak"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one test coroutine on a fresh event loop."""
    return asyncio.run(coroutine)


@dataclass
class Probe:
    """Observable side effects of the probe chat's callbacks and of the probe model."""

    route_calls: list[str] = field(default_factory=list)
    model_calls: list[int] = field(default_factory=list)
    """Number of messages each model request carried."""
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    model_closed: asyncio.Event = field(default_factory=asyncio.Event)
    flooded: int = 0
    """Characters the probe model streamed for `/flood` requests."""


def probe_chat(probe: Probe) -> ChatDefinition:
    """A one-state chat whose routes count calls, wait on a gate or raise."""

    def count(text: str, context: RouteContext) -> str:
        probe.route_calls.append("count")
        return f"counted {len(probe.route_calls)}"

    async def wait(text: str, context: RouteContext) -> str:
        probe.route_calls.append("wait")
        probe.entered.set()
        await probe.gate.wait()
        return "waited"

    def boom(text: str, context: RouteContext) -> str:
        probe.route_calls.append("boom")
        raise RuntimeError(f"{CANARY} {text}")

    return define_chat(
        id="probe",
        model={"adapter": "probe"},
        conversation={
            "initial": "idle",
            "states": {
                "idle": {"on": {"count": "busy", "wait": "busy", "boom": "busy"}},
                "busy": {"on": {"count": "idle", "wait": "idle"}},
            },
            "routes": [
                command_route(id="count", command="/count", event="count", response=count),
                command_route(id="wait", command="/wait", event="wait", response=wait),
                command_route(id="boom", command="/boom", event="boom", response=boom),
            ],
        },
    )


APPROVING = define_chat(
    id="probe-approve",
    model={"adapter": "probe"},
    conversation={"initial": "idle", "states": {"idle": {}}},
    tools={"clock": {"approval": True}},
)
"""The probe model with the `clock` tool's calls waiting for approval."""


class ProbeAdapter:
    """A model that streams two chunks; with `/slow` it waits on the probe gate between them,
    with `/fail-model` it fails (retryable) after the first."""

    name = "probe"
    provider = "agentskit.probe"

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        self.probe.model_calls.append(len(request.messages))
        last = request.messages[-1].content if request.messages else ""
        if request.tools.tools and request.messages[-1].role == Role.TOOL:
            answered = sum(m.role == Role.TOOL for m in request.messages)
            yield TextChunk(f"{answered} tool results")
            yield FinishChunk("stop")
            return
        if request.tools.tools and last == "/tools":  # one call of each declared tool
            for index, tool in enumerate(request.tools.tools):
                yield ToolCallStartChunk(index, f"call-{index}", tool.name)
            for index, _ in enumerate(request.tools.tools):
                yield ToolCallDeltaChunk(f"call-{index}", '{"n":')
                yield ToolCallDeltaChunk(f"call-{index}", f"{index}}}")
            yield FinishChunk("tool_calls")
            return
        try:
            if last.startswith("/fill"):  # "/fill N": one answer of N characters
                yield TextChunk("y" * int(last.split()[1]))
                yield FinishChunk("stop")
                return
            if last.startswith("/flood"):  # "/flood N": chunks of N characters, without end
                chunk = "x" * int(last.split()[1])
                while True:
                    self.probe.flooded += len(chunk)
                    yield TextChunk(chunk)
                    await asyncio.sleep(0)
            yield TextChunk("model ")
            if request.messages and request.messages[-1].content == "/fail-model":
                raise ModelError("model_server_error", "The model server failed.", retryable=True)
            if request.messages and request.messages[-1].content == "/slow":
                self.probe.entered.set()
                await self.probe.gate.wait()
            yield TextChunk("answer")
            yield UsageChunk(input_tokens=7, output_tokens=2)
            yield FinishChunk("stop")
        finally:
            self.probe.model_closed.set()

    async def close(self) -> None:
        """Nothing to release."""


@dataclass
class Live:
    """A started server with a client."""

    client: ChatClient
    service: ChatService
    server: RunningServer
    store: SqliteStore
    probe: Probe
    db_path: Path

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def stored(self, session_id: str, tenant: str = "") -> tuple[Any, ...]:
        """The stored row and messages of a session, for unchanged-state checks."""
        row = await self.store.load(session_id, tenant=tenant)
        messages = await self.store.list_messages(session_id, tenant=tenant)
        return row, tuple(messages)

    def dump(self) -> list[tuple[Any, ...]]:
        """Every stored row of every table, for byte-identical state checks."""
        return self.raw(
            "SELECT tenant, session_id, cursor, CAST(record AS BLOB), incarnation FROM sessions"
            " ORDER BY tenant, session_id"
        ) + self.raw(
            "SELECT tenant, session_id, position, message_id, CAST(content AS BLOB)"
            " FROM messages ORDER BY tenant, session_id, position"
        )

    def stored_row(self, session_id: str) -> list[tuple[Any, ...]]:
        """The session's raw rows, read without decoding anything."""
        return self.raw(
            "SELECT cursor, CAST(record AS BLOB), incarnation FROM sessions WHERE session_id = ?",
            session_id,
        ) + self.raw(
            "SELECT position, message_id, CAST(content AS BLOB) FROM messages"
            " WHERE session_id = ? ORDER BY position",
            session_id,
        )

    def raw(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run SQL on a separate connection to the database file."""
        with sqlite3.connect(self.db_path) as connection:
            rows = connection.execute(sql, params).fetchall()
        connection.close()
        return rows


@asynccontextmanager
async def live(
    tmp_path: Path,
    *,
    limits: Limits | None = None,
    definitions: list[ChatDefinition] | None = None,
    max_request_bytes: int = 4 * 1024 * 1024,
    busy_timeout_ms: int = 5000,
    authenticator: Authenticator | None = None,
    token: str | None = None,
    rates: RateLimits | None = None,
    observer: TurnObserver | None = None,
    **server_options: Any,
) -> AsyncIterator[Live]:
    """Start a server on 127.0.0.1:0 over SQLite in `tmp_path` and connect a client
    (with `token` when given)."""
    probe = Probe()
    chats = definitions
    if chats is None:
        chats = [*load_definitions(EXAMPLES).values(), probe_chat(probe), APPROVING]
    db_path = tmp_path / "sessions.db"
    store = await open_sqlite_store(db_path, busy_timeout_ms=busy_timeout_ms)
    adapters = AdapterRegistry({"probe": lambda settings: ProbeAdapter(probe)})
    service = ChatService(
        Catalog(chats),
        store,
        digest_key=KEY,
        adapters=adapters,
        limits=limits or Limits(),
        rates=rates,
        observer=observer,
    )
    server = await start_server(
        service,
        "127.0.0.1:0",
        max_request_bytes=max_request_bytes,
        authenticator=authenticator,
        **server_options,
    )
    client = ChatClient(f"127.0.0.1:{server.port}", token=token)
    try:
        yield Live(client, service, server, store, probe, db_path)
    finally:
        await client.close()
        await server.drain(0.5)


async def refused(call: Coroutine[Any, Any, Any] | AsyncIterator[Any]) -> ChatError:
    """The ChatError a call or a turn stream raises; fails the test if none is raised."""
    try:
        if isinstance(call, AsyncIterator):
            async for _ in call:
                pass
        else:
            await call
    except ChatError as error:
        return error
    raise AssertionError("the call succeeded")


async def once_released(
    client: ChatClient, session_id: str, content: str, turn_id: str | None = None
) -> TurnResult:
    """Submit `content` as soon as the server has released the session's lease.

    A cancelled turn releases its lease after the server sees the cancellation, which may
    be a moment after the client gave up; until then turns are refused as busy. The
    attempts go on for up to `EVENT_WAIT`: a bound on a failure, not an expected time.
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + EVENT_WAIT
    while True:
        try:
            return await client.run_turn(session_id, Submit(content), turn_id=turn_id)
        except ChatError as error:
            if error.reason != "ERROR_REASON_SESSION_BUSY":
                raise
            if loop.time() > give_up:
                raise AssertionError("the lease was never released") from error
            await asyncio.sleep(0.02)


async def health_status(channel: grpc.aio.Channel, service: str) -> int:
    """The grpc.health.v1 status of `service` (the typed stubs lack the stub methods)."""
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    reply: health_pb2.HealthCheckResponse = await check(
        health_pb2.HealthCheckRequest(service=service)
    )
    return int(reply.status)
