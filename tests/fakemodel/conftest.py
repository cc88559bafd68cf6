"""A fake model server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentskit_chat.fakemodel import FakeModelServer


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as running:
        yield running
