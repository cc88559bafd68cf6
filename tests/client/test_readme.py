"""The client README's examples run as written against the fake service."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import grpc
import pytest

from agentskit.chat.v1 import chat_pb2
from agentskit_chat_client import ChatClient, ChatError, Submit
from tests.client.fake_service import Abort, FakeChatService, event, serving

README = Path(__file__).resolve().parents[2] / "client" / "python" / "README.md"


def _examples() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2
    namespace: dict[str, Any] = {"__name__": "readme"}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    return namespace


def _script_a_turn(service: FakeChatService) -> None:
    session = chat_pb2.Session(
        session_id="s1", definition_id="support", snapshot=chat_pb2.Snapshot(state="idle")
    )
    service.replies["CreateSession"] = chat_pb2.CreateSessionResponse(session=session)
    service.replies["GetSession"] = chat_pb2.GetSessionResponse(
        session=session,
        messages=[
            chat_pb2.Message(id="m1", role=chat_pb2.ROLE_USER, content="/start"),
            chat_pb2.Message(id="a1", role=chat_pb2.ROLE_ASSISTANT, content="Your name?"),
        ],
    )
    service.events = [
        event(1, started=chat_pb2.TurnStarted(operation=chat_pb2.OPERATION_SUBMIT)),
        event(
            2,
            decision=chat_pb2.TurnDecision(
                kind=chat_pb2.TURN_KIND_DETERMINISTIC,
                route_id="start",
                from_state="idle",
                to_state="collecting",
            ),
        ),
        event(3, delta=chat_pb2.TextDelta(text="Your name?")),
        event(
            4,
            completed=chat_pb2.TurnCompleted(
                content="Your name?",
                snapshot=chat_pb2.Snapshot(state="collecting", allowed_events=["finish"]),
            ),
        ),
    ]


def test_the_usage_example_runs(capsys: pytest.CaptureFixture[str]):
    service = FakeChatService()
    _script_a_turn(service)
    main = _examples()["main"]

    async def run() -> None:
        async with serving(service) as target:
            await main(target)

    asyncio.run(run())

    assert capsys.readouterr().out.splitlines() == [
        "Your name?",
        "[collecting] next: finish",
        "deterministic start Your name?",
        "user: /start",
        "assistant: Your name?",
    ]


def test_the_retry_example_retries_busy_sessions_with_one_turn_id():
    service = FakeChatService()
    _script_a_turn(service)
    busy = Abort(
        grpc.StatusCode.ABORTED,
        "Session busy.",
        reason="ERROR_REASON_SESSION_BUSY",
        metadata={"retry_after_ms": "1"},
    )
    service.stream_rejections = [busy, busy]
    run_with_retry = _examples()["run_with_retry"]

    async def run() -> Any:
        async with serving(service) as target, ChatClient(target) as client:
            return await run_with_retry(client, "s1", Submit("/start"))

    result = asyncio.run(run())

    assert result.ok
    requests = [r for r in service.requests if isinstance(r, chat_pb2.StreamTurnRequest)]
    assert len(requests) == 3
    assert len({request.turn_id for request in requests}) == 1


def test_the_retry_example_gives_up_on_other_errors():
    service = FakeChatService()
    service.stream_rejections = [
        Abort(grpc.StatusCode.NOT_FOUND, "No session.", reason="ERROR_REASON_SESSION_NOT_FOUND")
    ]
    run_with_retry = _examples()["run_with_retry"]

    async def run() -> None:
        async with serving(service) as target, ChatClient(target) as client:
            with pytest.raises(ChatError, match="ERROR_REASON_SESSION_NOT_FOUND"):
                await run_with_retry(client, "s1", Submit("/start"))

    asyncio.run(run())

    assert len(service.requests) == 1
