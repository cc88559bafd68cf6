"""Model adapters behind one port: `offline` (the embedded default) and `openai`."""

from ._port import (
    NO_SAMPLING,
    NO_TOOLS,
    CallInfo,
    FinishChunk,
    ModelAdapter,
    ModelChunk,
    ModelError,
    ModelRequest,
    ResponseChunk,
    Sampling,
    SamplingCaps,
    TextChunk,
    ToolCallDeltaChunk,
    ToolCallStartChunk,
    ToolOptions,
    ToolSpec,
    UsageChunk,
    call_info,
)
from ._registry import AdapterRegistry, InvalidAdapterSettingsError, UnknownAdapterError
from .offline import OFFLINE_REPLY, OfflineAdapter
from .openai import OpenAIAdapter

__all__ = [
    "NO_SAMPLING",
    "NO_TOOLS",
    "OFFLINE_REPLY",
    "AdapterRegistry",
    "CallInfo",
    "FinishChunk",
    "InvalidAdapterSettingsError",
    "ModelAdapter",
    "ModelChunk",
    "ModelError",
    "ModelRequest",
    "OfflineAdapter",
    "OpenAIAdapter",
    "ResponseChunk",
    "Sampling",
    "SamplingCaps",
    "TextChunk",
    "ToolCallDeltaChunk",
    "ToolCallStartChunk",
    "ToolOptions",
    "ToolSpec",
    "UnknownAdapterError",
    "UsageChunk",
    "call_info",
]
