"""Fixtures: a scripted fake service and a runner that serves it to a connected client."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from agentskit_chat_client import ChatClient
from tests.client.fake_service import FakeChatService, serving

T = TypeVar("T")

Runner = Callable[[Callable[[ChatClient], Awaitable[T]]], T]


@pytest.fixture
def service() -> FakeChatService:
    return FakeChatService()


@pytest.fixture
def run(service: FakeChatService):
    """Serve ``service``, connect a client to it and run ``scenario(client)`` to completion."""

    def runner(scenario: Callable[[ChatClient], Awaitable[T]]) -> T:
        async def main() -> T:
            async with serving(service) as target, ChatClient(target) as client:
                return await scenario(client)

        return asyncio.run(main())

    return runner
