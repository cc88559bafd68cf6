"""A tool round over gRPC, answered by the `openai` adapter and the fake model over real
HTTP: the declared tools reach the model, its streamed calls become tool call events, and
the results go back to it as tool messages."""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.conversation import ChatDefinition, define_chat
from agentskit_chat.fakemodel import FakeModelServer, ToolCalls
from agentskit_chat.models import AdapterRegistry
from agentskit_chat.service import Catalog, ChatService
from agentskit_chat.storage import MemoryStore
from agentskit_chat.transport import start_server

QUESTION = "Weather in Paris, and the time?"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    pb.ToolDeclaration(
        name="get_weather", description="The weather in a city", parameters_json=json.dumps(SCHEMA)
    ),
    pb.ToolDeclaration(name="clock"),
]


def assistant(base_url: str) -> ChatDefinition:
    return define_chat(
        id="assistant",
        model={"adapter": "openai", "base_url": base_url, "model": "test-model"},
        conversation={"initial": "chatting", "states": {"chatting": {}}},
    )


async def stream(stub: Any, request: pb.StreamTurnRequest) -> list[pb.StreamTurnResponse]:
    return [response async for response in stub.StreamTurn(request, timeout=30)]


def test_a_tool_round_through_the_service(server: FakeModelServer) -> None:
    server.model.answers[QUESTION] = ToolCalls()

    async def run() -> None:
        service = ChatService(
            Catalog([assistant(server.url)]),
            MemoryStore(),
            digest_key=secrets.token_bytes(32),
            adapters=AdapterRegistry(),
        )
        running = await start_server(service, "127.0.0.1:0")
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                stub: Any = chat_pb2_grpc.ChatServiceStub(channel)
                created = await stub.CreateSession(
                    pb.CreateSessionRequest(definition_id="assistant")
                )
                sid = created.session.session_id
                first = await stream(
                    stub,
                    pb.StreamTurnRequest(
                        session_id=sid,
                        turn_id="t1",
                        submit=pb.SubmitOperation(content=QUESTION),
                        tools=TOOLS,
                        tool_choice="auto",
                    ),
                )
                events = [r.WhichOneof("event") for r in first]
                assert events[:4] == [
                    "started",
                    "decision",
                    "tool_call_started",
                    "tool_call_started",
                ]
                assert events[-3:] == ["tool_call_ended", "tool_call_ended", "completed"]
                assert set(events[4:-3]) == {"tool_call_delta"}
                # The calls' deltas interleave: the first two deltas are of different calls.
                deltas = [r.tool_call_delta for r in first if r.HasField("tool_call_delta")]
                assert deltas[0].tool_call_id != deltas[1].tool_call_id
                done = first[-1].completed
                assert done.finish_reason == "tool_calls"
                assert [c.name for c in done.tool_calls] == ["get_weather", "clock"]
                assert [json.loads(c.arguments) for c in done.tool_calls] == [
                    {"city": "example"},
                    {},
                ]
                ids = [c.id for c in done.tool_calls]
                assert [p.tool_call_id for p in done.pending_tool_calls] == ids

                second = await stream(
                    stub,
                    pb.StreamTurnRequest(
                        session_id=sid,
                        turn_id="t2",
                        tool_results=pb.ToolResultsOperation(
                            results=[
                                pb.ToolResult(tool_call_id=ids[0], content="sunny"),
                                pb.ToolResult(tool_call_id=ids[1], content="9:00"),
                            ]
                        ),
                        tools=TOOLS,
                    ),
                )
                answer = second[-1].completed
                assert answer.content == f"The fake model got 2 tool results ({', '.join(ids)})."
                assert answer.finish_reason == "stop"
        finally:
            await running.drain(1.0)

    asyncio.run(run())
    asked, answered = server.requests
    assert [t["function"]["name"] for t in asked.tools] == ["get_weather", "clock"]
    assert asked.tool_choice == "auto"
    assert asked.tools[0]["function"]["parameters"] == SCHEMA
    ids = [c["id"] for c in answered.body["messages"][1]["tool_calls"]]
    assert answered.body["messages"] == [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": ids[0],
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "example"}'},
                },
                {
                    "id": ids[1],
                    "type": "function",
                    "function": {"name": "clock", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": ids[0], "content": "sunny"},
        {"role": "tool", "tool_call_id": ids[1], "content": "9:00"},
    ]
    assert answered.tool_choice is None
