"""`agentskit-chat demo`: a scripted conversation through the Python client and a live server."""

from __future__ import annotations

import argparse
import asyncio
import secrets
from pathlib import Path

from agentskit_chat.models import AdapterRegistry
from agentskit_chat.service import Catalog, ChatService
from agentskit_chat.storage import MemoryStore
from agentskit_chat.transport import start_server
from agentskit_chat_client import ChatClient, Edit, Retry, Submit, TurnResult

from ._definitions import gather


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
    adapters = AdapterRegistry()
    service = ChatService(
        Catalog(gather(definitions, (), adapters)),
        MemoryStore(),
        digest_key=secrets.token_bytes(32),
        adapters=adapters,
    )
    running = await start_server(service, "127.0.0.1:0")
    target = f"127.0.0.1:{running.port}"
    print(f"server listening on {target} (definitions from {definitions}, memory store)\n")
    try:
        async with ChatClient(target) as client:
            session = await client.create_session("support")
            sid = session.session_id
            print(f"session {sid} of 'support' starts in state {session.snapshot.state!r}\n")
            first = await _turn(client, sid, "submit '/start'", Submit("/start"))
            await _turn(client, sid, "submit '/name Ada'", Submit("/name Ada"))
            await _turn(client, sid, "retry the last message", Retry())
            await _turn(client, sid, "submit 'Tell me a joke'", Submit("Tell me a joke"))
            first_id = first.started.user_message_id if first.started else None
            if first_id:
                await _turn(
                    client, sid, "edit the first message to 'hello'", Edit(first_id, "hello")
                )
            await _turn(client, sid, "submit '/start' again", Submit("/start"))
            final = await client.get_session(sid)
            print(
                f"session now in state {final.session.snapshot.state!r} "
                f"with {len(final.messages)} messages"
            )
            orders = (await client.create_session("orders")).session_id
            print(f"\nsession {orders} of 'orders' starts in state 'browsing'\n")
            await _turn(client, orders, "submit '/retrun' (a known typo)", Submit("/retrun"))
            await _turn(client, orders, "submit '/help'", Submit("/help"))
    finally:
        await running.drain(1.0)
    return 0


async def _turn(client: ChatClient, session_id: str, title: str, operation: object) -> TurnResult:
    result = await client.run_turn(session_id, operation)  # type: ignore[arg-type]
    print(f"> {title}")
    decision = result.decision
    if decision is not None:
        route = decision.route_id or "-"
        replayed = "  (replayed: no code, no model)" if decision.replayed else ""
        states = f"{decision.from_state} -> {decision.to_state}"
        print(f"  kind {decision.kind:<13} route {route:<8} {states}{replayed}")
    if result.failed is not None:
        print(f"  failed: {result.failed.code}: {result.failed.message}")
    elif result.completed is not None:
        print(f"  response: {result.completed.content}")
    print()
    return result
