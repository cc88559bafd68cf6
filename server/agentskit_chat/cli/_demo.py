"""`agentskit-chat demo`: a scripted conversation through the Python client and a live server.

The last part delegates to a model over the OpenAI streaming protocol: the demo starts the
fake model server in-process and serves an `assistant` chat whose `openai` adapter points
at it, so the answer's deltas print as they arrive.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
from contextlib import aclosing
from pathlib import Path
from typing import Final

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

from ._definitions import gather

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
        "--definitions",
        type=Path,
        default=Path("examples/definitions"),
        help="directory holding support.yaml [%(default)s]",
    )


def run(args: argparse.Namespace) -> int:
    """Start a server on a free port, walk the script, stop the server."""
    return asyncio.run(demo(args.definitions))


async def demo(definitions: Path) -> int:
    """The scripted walk; prints one block per turn."""
    async with FakeModel(FAKE_REPLY) as model:
        adapters = AdapterRegistry()
        hosted = [*gather(definitions, (), adapters), assistant_definition(model.url)]
        service = ChatService(
            Catalog(hosted),
            MemoryStore(),
            digest_key=secrets.token_bytes(32),
            adapters=adapters,
        )
        running = await start_server(service, "127.0.0.1:0")
        target = f"127.0.0.1:{running.port}"
        print(f"server listening on {target} (definitions from {definitions}, memory store)\n")
        try:
            async with ChatClient(target) as client:
                await _scripted(client)
                await _delegated(client, model)
        finally:
            await running.drain(1.0)
    return 0


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
