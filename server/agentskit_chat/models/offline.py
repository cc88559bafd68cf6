"""The embedded default adapter: says plainly that no model is configured."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Final

from ._port import CallInfo, FinishChunk, ModelChunk, ModelRequest, TextChunk

OFFLINE_REPLY: Final = (
    "No language model is configured for this chat, so I can only answer its known commands."
)


class OfflineAdapter:
    """Replies with OFFLINE_REPLY; never invents content and never reports token usage."""

    name = "offline"
    provider = "agentskit.offline"
    call_info = CallInfo(remote=False)
    """No model is called: telemetry records no GenAI span or metric for it."""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Two deltas of the fixed reply, then `stop`."""
        head, _, tail = OFFLINE_REPLY.partition(", ")
        yield TextChunk(head + ", ")
        yield TextChunk(tail)
        yield FinishChunk("stop")

    async def close(self) -> None:
        """Nothing to release."""
