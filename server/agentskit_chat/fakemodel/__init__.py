"""A fake model server speaking the OpenAI Chat Completions streaming protocol over real HTTP.

For tests, demos and benchmarks: scripted replies and failures, a record of every request,
and notice when a client hangs up in the middle of an answer::

    with FakeModelServer() as server:
        server.enqueue(Reply(chunks=("Hello", " there")), HttpResponse(429, retry_after="1"))
        server.enqueue(ToolCalls((Call("get_weather", '{"city": "Paris"}'),)))
        ...  # point an `openai` adapter's base_url at server.url
        assert server.requests[0].body["stream"] is True

`python -m agentskit_chat.fakemodel --listen 127.0.0.1:0` serves the default reply.
"""

from ._core import BASE_PATH, FakeModel
from ._scripts import (
    DEFAULT_CHUNKS,
    DEFAULT_TEXT,
    Call,
    Ending,
    Hangup,
    HttpResponse,
    Reply,
    Script,
    Stall,
    ToolCalls,
    split_text,
)
from ._stream import RecordedRequest
from ._thread import FakeModelServer

__all__ = [
    "BASE_PATH",
    "DEFAULT_CHUNKS",
    "DEFAULT_TEXT",
    "Call",
    "Ending",
    "FakeModel",
    "FakeModelServer",
    "Hangup",
    "HttpResponse",
    "RecordedRequest",
    "Reply",
    "Script",
    "Stall",
    "ToolCalls",
    "split_text",
]
