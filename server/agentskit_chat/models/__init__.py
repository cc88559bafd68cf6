"""Model adapters behind one port: `offline` (the embedded default) and `openai`."""

from ._port import (
    FinishChunk,
    ModelAdapter,
    ModelChunk,
    ModelError,
    ModelRequest,
    TextChunk,
    UsageChunk,
)
from ._registry import AdapterRegistry, InvalidAdapterSettingsError, UnknownAdapterError
from .offline import OFFLINE_REPLY, OfflineAdapter
from .openai import OpenAIAdapter

__all__ = [
    "OFFLINE_REPLY",
    "AdapterRegistry",
    "FinishChunk",
    "InvalidAdapterSettingsError",
    "ModelAdapter",
    "ModelChunk",
    "ModelError",
    "ModelRequest",
    "OfflineAdapter",
    "OpenAIAdapter",
    "TextChunk",
    "UnknownAdapterError",
    "UsageChunk",
]
