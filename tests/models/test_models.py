"""The offline adapter and the adapter registry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import pytest

from agentskit_chat.conversation import Message, Role
from agentskit_chat.models import (
    OFFLINE_REPLY,
    AdapterRegistry,
    FinishChunk,
    ModelChunk,
    ModelRequest,
    OfflineAdapter,
    TextChunk,
    UnknownAdapterError,
)


def collect(adapter: OfflineAdapter, request: ModelRequest) -> list[ModelChunk]:
    async def gather() -> list[ModelChunk]:
        return [chunk async for chunk in adapter.stream(request)]

    return asyncio.run(gather())


def test_the_offline_adapter_says_no_model_is_configured_and_invents_nothing() -> None:
    request = ModelRequest("support", "s1", (Message("u1", Role.USER, "What is 2 + 2?"),))
    chunks = collect(OfflineAdapter(), request)
    text = "".join(c.text for c in chunks if isinstance(c, TextChunk))
    assert text == OFFLINE_REPLY
    assert "No language model is configured" in text
    assert "2 + 2" not in text
    assert chunks[-1] == FinishChunk("stop")
    assert sum(isinstance(c, TextChunk) for c in chunks) == 2


class Recording:
    name = "recording"
    provider = "agentskit.recording"

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = settings
        self.closed = False

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        yield TextChunk("x")

    async def close(self) -> None:
        self.closed = True


def test_the_registry_builds_one_adapter_per_distinct_setting_and_closes_them() -> None:
    built: list[Recording] = []

    def factory(settings: Mapping[str, Any]) -> Recording:
        built.append(Recording(settings))
        return built[-1]

    registry = AdapterRegistry({"recording": factory})
    assert registry.names == {"offline", "openai", "recording"}
    first = registry.adapter({"adapter": "recording", "model": "a"})
    assert registry.adapter({"model": "a", "adapter": "recording"}) is first
    assert registry.adapter({"adapter": "recording", "model": "b"}) is not first
    assert isinstance(registry.adapter({}), OfflineAdapter)
    asyncio.run(registry.close())
    assert [r.closed for r in built] == [True, True]


@pytest.mark.parametrize("settings", [{"adapter": "nope"}, {"adapter": 3}])
def test_unknown_adapters_are_refused_by_name_only(settings: Mapping[str, Any]) -> None:
    with pytest.raises(UnknownAdapterError, match="this server provides: offline"):
        AdapterRegistry().check(settings)
