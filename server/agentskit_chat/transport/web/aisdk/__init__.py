"""The AI SDK front: `useChat`'s default transport over the service, answered as a UI
message stream."""

from ._front import AiSdkFront

__all__ = ["AiSdkFront"]
