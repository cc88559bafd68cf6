"""A model adapter that answers agentic turns with canned replies, for in-process tests."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

from agentskit_chat.models import (
    OFFLINE_REPLY,
    AdapterRegistry,
    FinishChunk,
    ModelAdapter,
    ModelChunk,
    ModelRequest,
    TextChunk,
)


class ScriptedModel:
    """Answers each session's next agentic turn with the reply queued for it, or with the
    offline adapter's sentence when none is queued; never calls a model."""

    name = "scripted"
    provider = "agentskit.scripted"

    def __init__(self, default: str = OFFLINE_REPLY) -> None:
        self.default = default
        self._next: dict[str, str] = {}

    def queue(self, session_id: str, reply: str) -> None:
        """Answer the next agentic turn of `session_id` with `reply`."""
        self._next[session_id] = reply

    def discard(self, session_id: str) -> None:
        """Forget a reply the step did not use (its turn was answered by a route)."""
        self._next.pop(session_id, None)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """The reply in two pieces, then `stop`."""
        reply = self._next.pop(request.session_id, self.default)
        middle = len(reply) // 2
        for piece in (reply[:middle], reply[middle:]):
            if piece:
                yield TextChunk(piece)
        yield FinishChunk("stop")

    async def close(self) -> None:
        """Nothing to release."""

    def registry(self) -> AdapterRegistry:
        """A registry answering every adapter name with this model, whatever the settings."""

        def build(_: Mapping[str, Any]) -> ModelAdapter:
            return self

        return AdapterRegistry(dict.fromkeys(AdapterRegistry().names, build))
