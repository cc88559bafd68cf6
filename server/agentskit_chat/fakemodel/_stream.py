"""Writes a scripted Reply or ToolCalls as an OpenAI `chat.completion.chunk` event stream."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import count
from typing import Any, Final

from ._http import LAST_CHUNK, chunk, response, response_head
from ._scripts import Ending, Reply, ToolCalls
from ._tools import call_deltas, resolve_calls

MALFORMED_EVENT: Final = b'data: {"choices": [{"delta": {"content": \n\n'
_ids: Final = count(1)


@dataclass(eq=False)
class RecordedRequest:
    """A request the fake model received, and how far its answer got."""

    method: str
    path: str
    headers: Mapping[str, str]
    """Lower-case header names."""
    body: Any
    """The JSON body, decoded."""
    client_port: int
    """The client's port: requests on one kept-alive connection share it."""
    chunks_sent: int = 0
    """Text chunks written so far (counted just before each is written)."""
    finished: threading.Event = field(default_factory=threading.Event)
    """Set once the server did everything its script says."""
    disconnected: threading.Event = field(default_factory=threading.Event)
    """Set when the client left before the answer was complete."""
    resumed: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @property
    def tools(self) -> Any:
        """The body's `tools` (the declared tools, as sent), or None."""
        return self.body.get("tools") if isinstance(self.body, dict) else None

    @property
    def tool_choice(self) -> Any:
        """The body's `tool_choice`, or None."""
        return self.body.get("tool_choice") if isinstance(self.body, dict) else None


def stream_head() -> bytes:
    """The head of a streamed answer."""
    return response_head(
        200,
        [
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
            ("transfer-encoding", "chunked"),
        ],
    )


def deltas(reply: Reply | ToolCalls, body: object) -> list[dict[str, Any]]:
    """The deltas that stream `reply` to `body`, after the first (the assistant role)."""
    if isinstance(reply, Reply):
        return [{"content": text} for text in reply.chunks]
    calls = resolve_calls(reply, body)
    return [
        *({"content": text} for text in reply.text),
        *(
            {"tool_calls": [item]}
            for item in call_deltas(calls, reply.pieces, interleave=reply.interleave)
        ),
    ]


async def send_reply(
    record: RecordedRequest, reply: Reply | ToolCalls, writer: asyncio.StreamWriter
) -> bool:
    """Stream `reply`; whether the connection may serve another request."""
    body = record.body if isinstance(record.body, dict) else {}
    options = body.get("stream_options")
    usage_asked = isinstance(options, dict) and options.get("include_usage") is True
    events = _Events(
        f"chatcmpl-fake-{next(_ids)}", str(body.get("model", "fake-model")), usage_asked
    )
    writer.write(stream_head() + events.choice({"role": "assistant", "content": ""}))
    await writer.drain()
    sent = deltas(reply, body)
    for index, delta in enumerate(sent):
        await _pause(record, reply, index)
        if reply.delay > 0:
            await asyncio.sleep(reply.delay)
        record.chunks_sent += 1  # Counted before it leaves: a client never sees more.
        writer.write(events.choice(delta))
        await writer.drain()
    await _pause(record, reply, len(sent))
    if reply.ending == Ending.STALL:
        await asyncio.Future()  # Until the client leaves.
    if reply.ending == Ending.DROP:
        writer.transport.abort()
        record.finished.set()
        return False
    # The ending leaves in one write, so a client reads `[DONE]` and the end of the body at once.
    ending: list[bytes] = []
    if reply.ending == Ending.MALFORMED:
        ending.append(chunk(MALFORMED_EVENT))
    elif reply.ending in (Ending.DONE, Ending.HOLD):
        ending.append(events.choice({}, reply.finish_reason))
        if usage_asked:
            prompt, completion = reply.usage or (_words(body), len(sent))
            ending.append(events.usage(prompt, completion))
        ending.append(chunk(b"data: [DONE]\n\n"))
    if reply.ending == Ending.HOLD:
        writer.write(b"".join(ending))
        await writer.drain()
        await asyncio.Future()  # Until the client leaves.
    writer.write(b"".join([*ending, LAST_CHUNK]))
    await writer.drain()
    record.finished.set()
    return True


def send_completion(body: Any, reply: Reply | ToolCalls, *, keep_alive: bool) -> bytes:
    """`reply` as one non-streamed `chat.completion` response."""
    data = body if isinstance(body, dict) else {}
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if isinstance(reply, Reply):
        message["content"], parts = reply.text, len(reply.chunks)
    else:
        calls = resolve_calls(reply, data)
        message["content"] = "".join(reply.text) or None
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
        parts = len(reply.text) + len(calls)
    prompt, completion = reply.usage or (_words(data), parts)
    answer = {
        "id": f"chatcmpl-fake-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(data.get("model", "fake-model")),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": _usage(prompt, completion),
    }
    return response(200, json.dumps(answer).encode(), "application/json", keep_alive=keep_alive)


async def _pause(record: RecordedRequest, reply: Reply | ToolCalls, sent: int) -> None:
    if reply.pause_after == sent:
        await record.resumed.wait()


def _words(body: Mapping[str, Any]) -> int:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    contents = (m.get("content") for m in messages if isinstance(m, dict))
    return sum(len(str(c).split()) for c in contents if c is not None)


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


@dataclass(frozen=True, slots=True)
class _Events:
    id: str
    model: str
    usage_asked: bool
    created: int = field(default_factory=lambda: int(time.time()))

    def choice(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
        return self._event(choices, None)

    def usage(self, prompt: int, completion: int) -> bytes:
        return self._event([], _usage(prompt, completion))

    def _event(self, choices: list[dict[str, Any]], usage: dict[str, int] | None) -> bytes:
        data: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.usage_asked:
            data["usage"] = usage
        return chunk(b"data: %s\n\n" % json.dumps(data).encode())
