"""`agentskit-chat demo`: a scripted conversation through the Python client and a live server.

The demo first asks the health service at `--target` (by default where `make serve` listens):
when a server answers `SERVING` and hosts the example `support` and `orders` chats, the
scripted part talks to it; otherwise the demo says so and starts a server of its own on a
free port, over the example definitions and a memory store.

The last part delegates to a model over the OpenAI streaming protocol: the demo starts the
fake model server in-process and serves an `assistant` chat whose `openai` adapter points
at it, so the answer's deltas print as they arrive. Only a server the demo starts knows that
model server, so this part always runs on one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Final

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentskit_chat.conversation import ChatDefinition, command_route, define_chat
from agentskit_chat.fakemodel import DEFAULT_TEXT, FakeModel, Reply, split_text
from agentskit_chat.models import AdapterRegistry
from agentskit_chat.service import Catalog, ChatService
from agentskit_chat.storage import MemoryStore
from agentskit_chat.transport import start_server
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Edit,
    Retry,
    Submit,
    TextDelta,
    TurnCompleted,
    TurnDecision,
    TurnFailed,
    TurnResult,
)

from ._connection import ClientOptions, add_connection_arguments, client_options
from ._definitions import gather
from ._serve import DEFAULT_LISTEN

TARGET_ENV: Final = "AGENTSKIT_CHAT_TARGET"
SCRIPTED: Final = ("support", "orders")
"""The chats the scripted part needs on a running server."""
PROBE_TIMEOUT: Final = 2.0
"""Seconds the health check of `--target` may take before the demo starts its own server."""

FAKE_REPLY: Final = Reply(chunks=split_text(DEFAULT_TEXT, 8), delay=0.08)
"""The fake model's answer: eight deltas, slow enough to watch them arrive."""


def assistant_definition(base_url: str) -> ChatDefinition:
    """A chat whose agentic turns go to the Chat Completions endpoint at `base_url`."""
    return define_chat(
        id="assistant",
        description="One known command; everything else is streamed from the model.",
        model={
            "adapter": "openai",
            "base_url": base_url,
            "model": "fake-model",
            "system_prompt": "You are a concise assistant.",
            "temperature": 0.2,
            "max_tokens": 256,
        },
        conversation={
            "initial": "chatting",
            "states": {"chatting": {"on": {"help": "chatting"}, "actions": ["help"]}},
            "routes": [
                command_route(
                    id="help",
                    command="/help",
                    event="help",
                    response="Ask anything: the model answers.",
                )
            ],
        },
        source="<demo>",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `demo`."""
    parser.add_argument(
        "--target",
        metavar="HOST:PORT",
        default=os.environ.get(TARGET_ENV) or DEFAULT_LISTEN,
        help="a running server to use when its health check answers SERVING, else the demo "
        f"starts its own [env {TARGET_ENV}; %(default)s, where `serve` listens by default]",
    )
    parser.add_argument(
        "--own-server",
        action="store_true",
        help="start a server of the demo's own even when one answers at --target",
    )
    parser.add_argument(
        "--definitions",
        type=Path,
        default=Path("examples/definitions"),
        help="the demo's own server: directory holding support.yaml and orders.yaml [%(default)s]",
    )
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Walk the script against the server at --target, or against one of the demo's own."""
    try:
        options = client_options(args)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    target = None if args.own_server else args.target
    return asyncio.run(demo(args.definitions, target, options))


async def demo(
    definitions: Path, target: str | None = None, options: ClientOptions | None = None
) -> int:
    """The scripted walk; prints one block per turn. Without `target`, on a server of its
    own; with one, there when it answers SERVING and hosts the example chats."""
    options = options or ClientOptions()
    if target:
        status = await _use_running(target, options)
        if status is not None:
            return status
    async with FakeModel(FAKE_REPLY) as model:
        hosted = [assistant_definition(model.url)]
        async with _own_server(definitions, hosted) as own:
            print(f"server listening on {own} (definitions from {definitions}, memory store)\n")
            async with ChatClient(own) as client:
                await _scripted(client)
                await _delegated(client, model)
    return 0


async def _use_running(target: str, options: ClientOptions) -> int | None:
    """Run the demo against `target` when a server there can take it: the exit status, or
    None (after saying why) when the demo should start its own server."""
    async with ChatClient(target, tls=options.tls, token=options.token, timeout=30) as client:
        health = await health_status(client.channel)
        if health != "SERVING":
            print(
                f"no server answers SERVING at {target} ({health}): start one with `make serve` "
                "to use it; the demo starts a server of its own on a free port"
            )
            return None
        try:
            hosted = {definition.id for definition in await client.list_definitions()}
        except ChatError as error:
            print(f"the server at {target} refused the demo: {error}", file=sys.stderr)
            if error.code is grpc.StatusCode.UNAUTHENTICATED:
                print(
                    "pass its token with --token-file or AGENTSKIT_CHAT_TOKEN, or use --own-server",
                    file=sys.stderr,
                )
            return 1
        missing = [chat for chat in SCRIPTED if chat not in hosted]
        if missing:
            print(
                f"the server at {target} answers SERVING but does not host "
                f"{_names(missing)}: the demo starts a server of its own on a free port"
            )
            return None
        print(f"using the server at {target} (its health check answers SERVING)\n")
        await _scripted(client)
    async with (
        FakeModel(FAKE_REPLY) as model,
        _own_server(None, [assistant_definition(model.url)]) as own,
    ):
        print(
            f"the 'assistant' chat streams from the fake model server at {model.url}, which "
            f"only a server of the demo's own knows: it listens on {own} (memory store)"
        )
        async with ChatClient(own) as delegated:
            await _delegated(delegated, model)
    return 0


async def health_status(channel: grpc.aio.Channel, timeout: float = PROBE_TIMEOUT) -> str:
    """The overall grpc.health.v1 status at the other end of `channel` (a status name such as
    `SERVING` or `NOT_SERVING`), or why there is none (`UNAVAILABLE`, `DEADLINE_EXCEEDED`)."""
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        response = await stub.Check(health_pb2.HealthCheckRequest(), timeout=timeout)  # type: ignore[attr-defined]
    except grpc.aio.AioRpcError as error:
        return str(error.code().name)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


@asynccontextmanager
async def _own_server(
    definitions: Path | None, extra: Sequence[ChatDefinition]
) -> AsyncIterator[str]:
    """A server on a free loopback port over a memory store: its target while it runs."""
    adapters = AdapterRegistry()
    hosted = [*(gather(definitions, (), adapters) if definitions else ()), *extra]
    service = ChatService(
        Catalog(hosted), MemoryStore(), digest_key=secrets.token_bytes(32), adapters=adapters
    )
    running = await start_server(service, "127.0.0.1:0")
    try:
        yield f"127.0.0.1:{running.port}"
    finally:
        await running.drain(1.0)


def _names(chats: Sequence[str]) -> str:
    return " or ".join(repr(chat) for chat in chats)


async def _scripted(client: ChatClient) -> None:
    """The support and orders chats: routes, replays, edits, and the offline adapter."""
    session = await client.create_session("support")
    sid = session.session_id
    print(f"session {sid} of 'support' starts in state {session.snapshot.state!r}\n")
    first = await _turn(client, sid, "submit '/start'", Submit("/start"))
    await _turn(client, sid, "submit '/name Ada'", Submit("/name Ada"))
    await _turn(client, sid, "retry the last message", Retry())
    await _turn(client, sid, "submit 'Tell me a joke'", Submit("Tell me a joke"))
    await _transcript(client, sid)
    first_id = first.started.user_message_id if first.started else None
    if first_id:
        await _turn(client, sid, "edit the first message to 'hello'", Edit(first_id, "hello"))
    await _turn(client, sid, "submit '/start' again", Submit("/start"))
    final = await client.get_session(sid)
    print(
        f"session now in state {final.session.snapshot.state!r} with {len(final.messages)} messages"
    )
    orders = (await client.create_session("orders")).session_id
    print(f"\nsession {orders} of 'orders' starts in state 'browsing'\n")
    await _turn(client, orders, "submit '/retrun' (a known typo)", Submit("/retrun"))
    await _turn(client, orders, "submit '/help'", Submit("/help"))


async def _delegated(client: ChatClient, model: FakeModel) -> None:
    """The assistant chat: a known command, then agentic turns streamed from the model."""
    sid = (await client.create_session("assistant")).session_id
    print(
        f"\nsession {sid} of 'assistant' starts in state 'chatting'; its model is the "
        f"openai adapter against the fake model server at {model.url}\n"
    )
    await _turn(client, sid, "submit '/help'", Submit("/help"))
    await _streamed(client, sid, "What can you do?", model)
    await _streamed(client, sid, "And what else?", model)
    await _lost_stream(client, sid)


async def _transcript(client: ChatClient, session_id: str) -> None:
    """Reload the session as a renderer would after a restart, badges included."""
    history = await client.get_session(session_id)
    state, count = history.session.snapshot.state, len(history.messages)
    print(f"> reload the transcript (GetSession): state {state!r}, {count} messages")
    for message in history.messages:
        badge = ""
        if message.origin is not None:
            origin = message.origin
            replayed = ", replayed" if origin.replayed else ""
            route = origin.route_id or "-"
            badge = f"[{origin.kind} {route} {origin.from_state} -> {origin.to_state}{replayed}] "
        print(f"  {message.role:<9} {badge}{message.content}")
    print()


async def _lost_stream(client: ChatClient, session_id: str) -> None:
    """A stream lost mid-turn, then recovered by asking GetTurn about its turn id."""
    turn_id = "demo-lost-stream"
    print(f"> submit 'One more thing?' as turn {turn_id!r}; the stream is lost after one delta")
    async with aclosing(client.submit(session_id, "One more thing?", turn_id=turn_id)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                running = await client.get_turn(session_id, turn_id)
                print(f"  GetTurn while the model streams: {running.outcome}")
                break  # the client goes away: the server stops the model, commits nothing
    for _ in range(100):
        try:
            await client.get_turn(session_id, turn_id)
        except ChatError as error:
            if error.reason == "ERROR_REASON_TURN_NOT_FOUND":
                print("  GetTurn after the stream was lost: not found, so nothing was committed")
                break
        await asyncio.sleep(0.02)
    print(f"  run turn {turn_id!r} again with the same turn id")
    await _wait_for_lease(client, session_id, turn_id)
    record = await client.get_turn(session_id, turn_id)
    usage = "" if record.usage is None else f", {record.usage.output_tokens} output tokens"
    print(f"  GetTurn now: {record.outcome}, kind {record.kind}{usage}")
    repeated = await client.run_turn(session_id, Submit("One more thing?"), turn_id=turn_id)
    duplicate = repeated.started is not None and repeated.started.duplicate
    print(f"  the same turn id once more repeats the recorded outcome (duplicate: {duplicate})")
    print()


async def _wait_for_lease(client: ChatClient, session_id: str, turn_id: str) -> TurnResult:
    """Run the turn once the cancelled attempt's lease is released."""
    for _ in range(100):
        try:
            return await client.run_turn(session_id, Submit("One more thing?"), turn_id=turn_id)
        except ChatError as error:
            if error.reason != "ERROR_REASON_SESSION_BUSY":
                raise
            await asyncio.sleep(error.retry_delay.total_seconds() if error.retry_delay else 0.02)
    raise RuntimeError("the session stayed busy")


async def _streamed(client: ChatClient, session_id: str, content: str, model: FakeModel) -> None:
    """Submit `content` and print each delta the moment it arrives."""
    print(f"> submit {content!r} (streamed from the model)")
    streaming = False
    async with aclosing(client.submit(session_id, content)) as events:
        async for event in events:
            if isinstance(event, TurnDecision):
                _decision(event)
            elif isinstance(event, TextDelta):
                if not streaming:
                    print("  deltas:", end="", flush=True)
                    streaming = True
                print(f" {event.text!r}", end="", flush=True)
            elif isinstance(event, TurnCompleted | TurnFailed):
                if streaming:
                    print()
                _ending(event)
    sent = model.requests[-1].body
    print(f"  the model received {len(sent['messages'])} messages (system prompt and history)")
    print()


def _decision(decision: TurnDecision) -> None:
    route = decision.route_id or "-"
    replayed = "  (replayed: no code, no model)" if decision.replayed else ""
    states = f"{decision.from_state} -> {decision.to_state}"
    print(f"  kind {decision.kind:<13} route {route:<8} {states}{replayed}")


def _ending(event: TurnCompleted | TurnFailed) -> None:
    if isinstance(event, TurnFailed):
        print(f"  failed: {event.code}: {event.message}")
        return
    print(f"  response: {event.content}")
    if event.usage is not None:
        usage = event.usage
        print(f"  usage: {usage.input_tokens} input tokens, {usage.output_tokens} output tokens")


async def _turn(client: ChatClient, session_id: str, title: str, operation: object) -> TurnResult:
    result = await client.run_turn(session_id, operation)  # type: ignore[arg-type]
    print(f"> {title}")
    if result.decision is not None:
        _decision(result.decision)
    if result.failed is not None:
        print(f"  failed: {result.failed.code}: {result.failed.message}")
    elif result.completed is not None:
        print(f"  response: {result.completed.content}")
    print()
    return result
