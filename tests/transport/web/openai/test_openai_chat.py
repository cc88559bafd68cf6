"""How a chat completion runs as a turn, in-process: a stateless completion whose session
cannot be deleted afterwards (a store fault, made here by refusing the deletion) still
gets its answer, and the failure is one log line without content; a stateless request
is not de-duplicated by its Idempotency-Key."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.transport._rpcs import ChatRpcs
from tests.transport.web.aisdk.chat import DEFINITION, served

CANARY = "cnry-2b9d-openai-chat"


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def test_a_failed_cleanup_keeps_a_stateless_answer(
    tmp_path: Path,
    model: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def unavailable(self: ChatRpcs, request: Any) -> Any:
        raise ServiceError(Reason.STORE_UNAVAILABLE, "the store is unavailable")

    monkeypatch.setattr(ChatRpcs, "delete_session", unavailable)
    caplog.set_level(logging.INFO)
    messages = [{"role": "system", "content": CANARY}, {"role": "user", "content": "/start"}]

    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            answer = await web.http.post(
                "/v1/chat/completions", json={"model": "support", "messages": messages}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == "What is your name?"

    asyncio.run(scenario())
    kept = [r for r in caplog.records if "was not deleted" in r.getMessage()]
    assert len(kept) == 1
    assert "STORE_UNAVAILABLE" in kept[0].getMessage()
    assert all(CANARY not in r.getMessage() for r in caplog.records)


def test_a_stateless_request_is_not_de_duplicated_by_its_key(
    tmp_path: Path, model: FakeModelServer
) -> None:
    model.enqueue(Reply(chunks=("one",)))
    model.enqueue(Reply(chunks=("two",)))
    body = {"model": DEFINITION, "messages": [{"role": "user", "content": "Hello"}]}
    keyed = {"idempotency-key": "same-key"}

    async def scenario() -> list[str]:
        async with served(tmp_path, model) as web:
            found = []
            for _ in range(2):
                answer = await web.http.post("/v1/chat/completions", json=body, headers=keyed)
                assert answer.status_code == 200, answer.text
                assert answer.headers["x-agentskit-turn-id"] == "same-key"
                found.append(answer.json()["choices"][0]["message"]["content"])
            return found

    assert asyncio.run(scenario()) == ["one", "two"]
    assert len(model.requests) == 2
