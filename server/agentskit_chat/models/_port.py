"""The model port: an async, cancellable stream of chunks for one agentic turn."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentskit_chat.conversation import Message


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """The unchanged request of an agentic turn."""

    definition_id: str
    session_id: str
    messages: tuple[Message, ...] = field(repr=False)
    """The retained history, oldest first, exactly as the session holds it."""
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The definition's `model` mapping (adapter name, model, parameters)."""


@dataclass(frozen=True, slots=True)
class TextChunk:
    """The next piece of the answer."""

    text: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class UsageChunk:
    """Token counts reported by the model."""

    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class FinishChunk:
    """The model finished; `reason` as the model reported it (e.g. "stop")."""

    reason: str


ModelChunk = TextChunk | UsageChunk | FinishChunk


class ModelError(Exception):
    """A model call failed; `code` is stable and the message never holds content."""

    def __init__(self, code: str, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable


class ModelAdapter(Protocol):
    """Answers agentic turns. Closing the returned generator must stop the model call."""

    name: str
    """The adapter's registry name, such as `openai`."""
    provider: str
    """The provider as OpenTelemetry GenAI names it (`gen_ai.provider.name`)."""

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Chunks of the answer in order; raises ModelError on failure."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
