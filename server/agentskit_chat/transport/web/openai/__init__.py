"""The OpenAI-compatible front under `/v1/`: chat completions as turns of the service."""

from ._front import OpenAIFront

__all__ = ["OpenAIFront"]
