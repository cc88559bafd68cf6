"""The model port: an async, cancellable stream of chunks for one agentic turn."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from agentskit_chat.conversation import Message


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling settings a caller asked for, for one agentic turn; each None (or empty)
    leaves the definition's setting, or else the model's own default."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    """Output token limit of the answer."""
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = field(default=(), repr=False)
    """Sequences that end the answer; left out of the repr, like any other content."""


NO_SAMPLING: Final = Sampling()


@dataclass(frozen=True, slots=True)
class SamplingCaps:
    """The server's bounds on what a caller's `Sampling` may ask of a model."""

    max_tokens: int = 4096
    """A caller's output token limit is lowered to this."""
    max_temperature: float = 2.0
    """A caller's temperature is lowered to this."""

    def __post_init__(self) -> None:
        if self.max_tokens < 1 or not 0 <= self.max_temperature <= 2:
            raise ValueError("sampling caps: max tokens >= 1 and max temperature in 0..2")

    def cap(self, sampling: Sampling | None) -> Sampling:
        """`sampling` within these caps (NO_SAMPLING for None)."""
        if sampling is None:
            return NO_SAMPLING
        temperature, tokens = sampling.temperature, sampling.max_tokens
        if temperature is not None and temperature > self.max_temperature:
            sampling = replace(sampling, temperature=self.max_temperature)
        if tokens is not None and tokens > self.max_tokens:
            sampling = replace(sampling, max_tokens=self.max_tokens)
        return sampling


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call in this turn, in the OpenAI `tools` shape."""

    name: str
    description: str = field(default="", repr=False)
    parameters: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The arguments' JSON Schema (an object schema); empty for a tool without arguments."""


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """The tools a caller declared for one turn, and how the model may use them."""

    tools: tuple[ToolSpec, ...] = ()
    choice: str | None = None
    """`auto`, `none`, `required`, or the name of the one tool the model must call; None
    leaves the model's default."""
    parallel: bool | None = None
    """Whether the model may call several tools in one answer; None leaves its default."""


NO_TOOLS: Final = ToolOptions()


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """The unchanged request of an agentic turn."""

    definition_id: str
    session_id: str
    messages: tuple[Message, ...] = field(repr=False)
    """The retained history, oldest first, exactly as the session holds it."""
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The definition's `model` mapping (adapter name, model, parameters)."""
    sampling: Sampling = NO_SAMPLING
    """What the caller asked for, within the server's caps; it overrides `settings`."""
    tools: ToolOptions = NO_TOOLS
    """The tools the model may call; none unless the caller declared some."""


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


@dataclass(frozen=True, slots=True)
class ResponseChunk:
    """What the model server said of its answer: the completion's id and the model that
    answered (both as it named them; either may be missing)."""

    response_id: str | None
    model: str | None


@dataclass(frozen=True, slots=True)
class ToolCallStartChunk:
    """The model started the tool call `call_id` (its `index`-th call of the answer)."""

    index: int
    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDeltaChunk:
    """The next piece of the arguments (JSON text) of the started call `call_id`."""

    call_id: str
    arguments: str = field(repr=False)


ModelChunk = (
    TextChunk | UsageChunk | FinishChunk | ResponseChunk | ToolCallStartChunk | ToolCallDeltaChunk
)
"""A tool call's arguments are the concatenation of its deltas; calls of one answer may
interleave their deltas. A call ends when the answer does (`FinishChunk` `tool_calls`)."""


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What telemetry may say of an adapter's calls: never content, never a secret.

    An adapter offers it as a `call_info` attribute; one without it is taken to call a
    remote model whose endpoint it does not name.
    """

    remote: bool = True
    """The adapter calls a model; False for a local stand-in that answers by itself."""
    server_address: str | None = None
    """Host name or address of the model endpoint."""
    server_port: int | None = None
    """Port of the model endpoint."""
    temperature: float | None = None
    """The sampling temperature each request asks for, when set."""
    max_tokens: int | None = None
    """The output token limit each request asks for, when set."""


UNNAMED = CallInfo()


def call_info(adapter: object) -> CallInfo:
    """The adapter's CallInfo, or one that names nothing but a remote model."""
    info = getattr(adapter, "call_info", None)
    return info if isinstance(info, CallInfo) else UNNAMED


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
