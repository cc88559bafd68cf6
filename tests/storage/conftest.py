"""Shared fixtures: one contract suite, run against every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentskit_chat.storage import (
    HistoryMode,
    MemoryStore,
    Store,
    StoredMessage,
    StoredSession,
    open_sqlite_store,
)

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on a fresh event loop."""
    return asyncio.run(coroutine)


def session(session_id: str = "s1", *, cursor: int = 0, record: bytes = b"r0") -> StoredSession:
    return StoredSession(
        session_id=session_id,
        definition_id="support",
        revision=3,
        history_mode=HistoryMode.SERVER,
        cursor=cursor,
        record=record,
        updated_at_ms=1_700_000_000_000 + cursor,
    )


def message(n: int, content: str | None = None) -> StoredMessage:
    return StoredMessage(f"m{n}", "user" if n % 2 else "assistant", content or f"text {n}")


async def open_backend(kind: str, directory: Path) -> Store:
    if kind == "memory":
        return MemoryStore()
    return await open_sqlite_store(directory / "store.db")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = run(open_backend(request.param, tmp_path))
    yield opened
    run(opened.close())
