"""Route hints: the buttons a renderer offers follow the server's eligibility rule."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass

from agentskit.chat.v1 import chat_pb2, chat_pb2_grpc
from agentskit_chat.conversation import load_definitions
from agentskit_chat.service import Catalog, ChatService
from agentskit_chat.storage import MemoryStore
from agentskit_chat.transport import start_server
from agentskit_chat_client import ChatClient, Snapshot, Submit, command_hints, eligible_routes
from tests.cli.fixtures.serving import EXAMPLES


@dataclass(frozen=True)
class Route:
    id: str
    event: str
    states: tuple[str, ...] = ()
    input_text: str = ""


ROUTES = (
    Route("go", "go", input_text="/go"),
    Route("stop", "stop", states=("running",), input_text="stop"),
    Route("name", "go"),  # a pattern: eligible, but no single text to offer
    Route("go-again", "go", input_text="/go"),
)


def test_eligibility_needs_the_event_and_the_state_restriction() -> None:
    idle = Snapshot(state="idle", allowed_events=("go", "stop"))
    running = Snapshot(state="running", allowed_events=("stop",))
    assert [r.id for r in eligible_routes(ROUTES, idle)] == ["go", "name", "go-again"]
    assert [r.id for r in eligible_routes(ROUTES, running)] == ["stop"]
    assert eligible_routes(ROUTES, Snapshot(state="done")) == []


def test_command_hints_offer_each_fixed_input_once_in_route_order() -> None:
    idle = Snapshot(state="idle", allowed_events=("stop", "go"))
    assert command_hints(ROUTES, idle) == ["/go"]
    running = Snapshot(state="running", allowed_events=("go", "stop"))
    assert command_hints(ROUTES, running) == ["/go", "stop"]


def test_hints_from_a_live_servers_definition_follow_the_conversation() -> None:
    async def scenario() -> list[list[str]]:
        definitions = load_definitions(EXAMPLES).values()
        service = ChatService(
            Catalog(definitions), MemoryStore(), digest_key=secrets.token_bytes(32)
        )
        server = await start_server(service, "127.0.0.1:0")
        try:
            async with ChatClient(f"127.0.0.1:{server.port}", timeout=10) as client:
                stub = chat_pb2_grpc.ChatServiceStub(client.channel)
                reply = await stub.GetDefinition(
                    chat_pb2.GetDefinitionRequest(definition_id="orders")
                )
                routes = reply.definition.routes
                session = await client.create_session("orders")
                seen = [command_hints(routes, session.snapshot)]
                for text in ("/return", "/order 12345", "damaged"):
                    turn = await client.run_turn(session.session_id, Submit(text))
                    assert turn.completed is not None
                    seen.append(command_hints(routes, turn.completed.snapshot))
                return seen
        finally:
            await server.drain(1.0)

    assert asyncio.run(scenario()) == [
        ["/return", "/retrun", "/help"],
        ["/cancel", "/help"],
        ["/cancel", "/help"],
        ["/confirm", "/cancel"],
    ]
