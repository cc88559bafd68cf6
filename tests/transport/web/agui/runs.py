"""Helpers of the AG-UI front's tests: run inputs and a plain SSE reader."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx


def run_input(
    thread: str, run: str, messages: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    """A `RunAgentInput` as `HttpAgent` sends it."""
    return {
        "threadId": thread,
        "runId": run,
        "state": {},
        "messages": messages or [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def user(message_id: str, content: str) -> dict[str, Any]:
    """A user message."""
    return {"id": message_id, "role": "user", "content": content}


def assistant(message_id: str, content: str) -> dict[str, Any]:
    """An assistant message."""
    return {"id": message_id, "role": "assistant", "content": content}


WEATHER = {
    "name": "weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
}
CLOCK = {"name": "clock", "description": "The time", "parameters": {"type": "object"}}
TOOLS = [WEATHER, CLOCK]
"""Frontend tools: the probe model calls each once on `/tools` (`call-0`, `call-1`)."""


def calling(message_id: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """An assistant message with tool calls, as HttpAgent holds it after a tool round."""
    return {"id": message_id, "role": "assistant", "toolCalls": calls}


def tool(message_id: str, call_id: str, content: str) -> dict[str, Any]:
    """A tool message answering `call_id`."""
    return {"id": message_id, "role": "tool", "toolCallId": call_id, "content": content}


@dataclass
class Answer:
    """A run's answer: status, headers and the events with their SSE ids."""

    status: int
    headers: httpx.Headers
    events: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)
    body: bytes = b""

    @property
    def types(self) -> list[str]:
        return [event["type"] for _, event in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for _, event in self.events if event["type"] == kind]

    def text_events(self) -> list[dict[str, Any]]:
        return [e for _, e in self.events if e["type"].startswith("TEXT_MESSAGE_")]

    def text(self) -> str:
        return "".join(e["delta"] for e in self.of("TEXT_MESSAGE_CONTENT"))

    def finished(self) -> dict[str, Any]:
        (done,) = self.of("RUN_FINISHED")
        return done

    def calls(self) -> list[dict[str, Any]]:
        """The tool calls the events made, as an assistant message's `toolCalls`."""
        calls: dict[str, dict[str, Any]] = {}
        for event in self.of("TOOL_CALL_START"):
            function = {"name": event["toolCallName"], "arguments": ""}
            calls[event["toolCallId"]] = {
                "id": event["toolCallId"],
                "type": "function",
                "function": function,
            }
        for event in self.of("TOOL_CALL_ARGS"):
            calls[event["toolCallId"]]["function"]["arguments"] += event["delta"]
        return list(calls.values())


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, dict[str, Any]]]:
    """Each server-sent event's id and JSON data."""
    event_id: str | None = None
    data: list[str] = []
    async for line in lines:
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            yield event_id, json.loads("\n".join(data))
            event_id, data = None, []


async def post_run(
    http: httpx.AsyncClient,
    definition: str,
    body: Mapping[str, Any] | bytes,
    headers: Mapping[str, str] | None = None,
    *,
    stop_after: int | None = None,
) -> Answer:
    """POST a run and read its answer (SSE events parsed; at most `stop_after` of them,
    then the connection is dropped)."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"content-type": "application/json", "accept": "text/event-stream", **(headers or {})}
    async with http.stream("POST", f"/agui/{definition}", content=content, headers=sent) as got:
        answer = Answer(got.status_code, got.headers)
        if got.headers.get("content-type") != "text/event-stream":
            answer.body = await got.aread()
            return answer
        async for item in sse_events(got.aiter_lines()):
            answer.events.append(item)
            if stop_after is not None and len(answer.events) >= stop_after:
                break
    return answer
