"""cancel_turn and watch_session against a real in-process gRPC server."""

from __future__ import annotations

from contextlib import aclosing
from datetime import timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

from agentskit.chat.v1 import chat_pb2
from agentskit_chat_client import (
    CancelTurnResponse,
    ChatClient,
    ChatError,
    Session,
    TextDelta,
    TurnStarted,
    WatchHeartbeat,
    WatchItem,
)
from tests.client.conftest import Runner
from tests.client.fake_service import EPOCH, Abort, FakeChatService, event


def test_cancel_turn_reports_what_it_did(run: Runner[Any], service: FakeChatService) -> None:
    service.replies["CancelTurn"] = chat_pb2.CancelTurnResponse(cancelled=True)
    assert run(lambda c: c.cancel_turn("s1", "t1")) == CancelTurnResponse(cancelled=True)
    assert service.requests[-1] == chat_pb2.CancelTurnRequest(session_id="s1", turn_id="t1")
    service.replies["CancelTurn"] = chat_pb2.CancelTurnResponse(
        turn=chat_pb2.TurnRecord(turn_id="t1", outcome=chat_pb2.TURN_OUTCOME_COMPLETED)
    )
    finished = run(lambda c: c.cancel_turn("s1", "t1"))
    assert not finished.cancelled
    assert finished.turn is not None
    assert finished.turn.outcome == "completed"
    service.replies["CancelTurn"] = chat_pb2.CancelTurnResponse()
    assert run(lambda c: c.cancel_turn("s1", "t1")) == CancelTurnResponse(cancelled=False)


def test_cancel_turn_of_another_tenants_session_raises(
    run: Runner[Any], service: FakeChatService
) -> None:
    service.aborts["CancelTurn"] = Abort(
        grpc.StatusCode.NOT_FOUND, "no session", "ERROR_REASON_SESSION_NOT_FOUND"
    )
    with pytest.raises(ChatError) as raised:
        run(lambda c: c.cancel_turn("s1", "t1"))
    assert raised.value.reason == "ERROR_REASON_SESSION_NOT_FOUND"


def _session(cursor: int) -> chat_pb2.Session:
    return chat_pb2.Session(
        session_id="s1",
        definition_id="support",
        snapshot=chat_pb2.Snapshot(state="idle"),
        cursor=cursor,
    )


def test_watch_session_yields_sessions_events_and_heartbeats(
    run: Runner[Any], service: FakeChatService
) -> None:
    beat = timestamp_pb2.Timestamp()
    beat.FromDatetime(EPOCH + timedelta(seconds=15))
    service.session_items = [
        chat_pb2.WatchSessionResponse(session=_session(4)),
        chat_pb2.WatchSessionResponse(
            event=event(1, turn_id="t9", started=chat_pb2.TurnStarted(duplicate=False))
        ),
        chat_pb2.WatchSessionResponse(
            event=event(2, turn_id="t9", delta=chat_pb2.TextDelta(text="hi"))
        ),
        chat_pb2.WatchSessionResponse(heartbeat=chat_pb2.WatchHeartbeat(time=beat)),
        chat_pb2.WatchSessionResponse(session=_session(6)),
        chat_pb2.WatchSessionResponse(),  # an item this version does not know: skipped
    ]
    service.stream_hold = True

    async def scenario(client: ChatClient) -> list[WatchItem]:
        items: list[WatchItem] = []
        stream = client.watch_session("s1", after_cursor=3)
        async with aclosing(stream):
            async for item in stream:
                items.append(item)
                if len(items) == 5:
                    break
        return items

    first, started, delta, heartbeat, last = run(scenario)
    assert isinstance(first, Session)
    assert first.cursor == 4
    assert isinstance(started, TurnStarted)
    assert started.turn_id == "t9"
    assert isinstance(delta, TextDelta)
    assert (delta.text, delta.sequence) == ("hi", 2)
    assert heartbeat == WatchHeartbeat(time=EPOCH + timedelta(seconds=15))
    assert isinstance(last, Session)
    assert last.cursor == 6
    request = service.requests[-1]
    assert isinstance(request, chat_pb2.WatchSessionRequest)
    assert (request.session_id, request.after_cursor) == ("s1", 3)


def test_watch_session_without_a_cursor_sends_none(
    run: Runner[Any], service: FakeChatService
) -> None:
    service.session_items = [chat_pb2.WatchSessionResponse(session=_session(0))]
    service.stream_abort = Abort(
        grpc.StatusCode.ABORTED, "behind", "ERROR_REASON_WATCH_BEHIND", {"cursor": "0"}
    )

    items: list[WatchItem] = []

    async def scenario(client: ChatClient) -> None:
        async for item in client.watch_session("s1"):
            items.append(item)

    with pytest.raises(ChatError) as raised:
        run(scenario)
    assert raised.value.reason == "ERROR_REASON_WATCH_BEHIND"
    assert raised.value.metadata["cursor"] == "0"
    assert len(items) == 1
    request = service.requests[-1]
    assert isinstance(request, chat_pb2.WatchSessionRequest)
    assert not request.HasField("after_cursor")
