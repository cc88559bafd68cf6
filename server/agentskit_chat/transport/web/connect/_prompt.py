"""The Connect application, with the response of a watch started as soon as it is read.

The Connect application sends a stream's response headers with its first message. A watch
(WatchTurn, WatchSession) may stay quiet for long: a model that pauses, a turn whose server
stopped waiting for its lease to lapse. A proxy waits for the headers at most its read
timeout (HTTP/2 pings do not count), so a watch sends them once its request is read.

The application offers no hook for this: `PromptHeaders` wraps its private
`_stream_responses` (connectrpc is pinned to one version, whose tests cover it here).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, Final

from agentskit.chat.v1.chat_connect import ChatServiceASGIApplication

PROMPT_METHODS: Final = frozenset({"WatchTurn", "WatchSession"})
"""Methods whose response headers go out once the request is read."""


class PromptHeaders(ChatServiceASGIApplication):
    """`ChatServiceASGIApplication`; a watch's headers are sent once its request is read."""

    async def _stream_responses(
        self,
        endpoint: Any,
        request_stream: AsyncGenerator[Any],
        stream: Any,
        metadata_run: Any,
        disconnected: Any,
        send: Any,
        loop: Any,
        ctx: Any,
    ) -> None:
        if ctx.method.name in PROMPT_METHODS:
            request_stream = _then_headers(request_stream, stream, send, ctx)
        await super()._stream_responses(
            endpoint, request_stream, stream, metadata_run, disconnected, send, loop, ctx
        )


async def _then_headers(
    requests: AsyncGenerator[Any], stream: Any, send: Any, ctx: Any
) -> AsyncGenerator[Any]:
    """The requests; once one was read and they ended, the response headers, unless sent."""
    read = False
    async for request in requests:
        read = True
        yield request
    if read and not send.started:
        await stream.send_headers(send, ctx)
