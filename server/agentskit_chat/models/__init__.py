"""Model adapters behind one port; `offline` is the embedded default."""

from ._port import (
    FinishChunk,
    ModelAdapter,
    ModelChunk,
    ModelError,
    ModelRequest,
    TextChunk,
    UsageChunk,
)
from ._registry import AdapterRegistry, UnknownAdapterError
from .offline import OFFLINE_REPLY, OfflineAdapter

__all__ = [
    "OFFLINE_REPLY",
    "AdapterRegistry",
    "FinishChunk",
    "ModelAdapter",
    "ModelChunk",
    "ModelError",
    "ModelRequest",
    "OfflineAdapter",
    "TextChunk",
    "UnknownAdapterError",
    "UsageChunk",
]
