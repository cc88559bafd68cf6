"""WatchTurn and CancelTurn over Connect (JSON) and gRPC-Web: the same turns, numbering and
errors as over gRPC."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

from agentskit.chat.v1 import chat_pb2 as pb
from tests.transport.conftest import run
from tests.transport.test_live_turns import cut_after_first_delta, turn
from tests.transport.web.conftest import web_live
from tests.transport.web.wire import (
    END_STREAM,
    SERVICE,
    TRAILERS,
    envelope,
    frames,
    grpc_web,
    reason,
    stream,
    unary,
)
from tests.waiting import EVENT_WAIT, until


def test_a_continued_turn_is_reattached_and_cancelled_over_connect_and_grpc_web(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            # A continued turn whose Connect stream is cut after its first event.
            request = {
                "sessionId": sid,
                "turnId": "t-1",
                "submit": {"content": "/slow"},
                "onDisconnect": "DISCONNECT_MODE_CONTINUE",
            }
            starter = asyncio.ensure_future(stream(web.http, "StreamTurn", request))
            await web.env.probe.entered.wait()
            starter.cancel()
            await asyncio.gather(starter, return_exceptions=True)
            watch = {"sessionId": sid, "turnId": "t-1", "afterSequence": "1"}
            watching = asyncio.ensure_future(stream(web.http, "WatchTurn", watch))
            await until(lambda: web.env.service.watchers.count("", sid) == 1, "the watch")
            web.env.probe.gate.set()
            result = await watching
            assert result.end == {}
            sequences = [int(m["sequence"]) for m in result.messages]
            assert sequences == list(range(2, 2 + len(sequences)))
            assert result.messages[-1]["completed"]["content"] == "model answer"
            # gRPC-Web: the same events, from the same sequence on.
            binary = await grpc_web(
                web.http,
                "WatchTurn",
                pb.WatchTurnRequest(session_id=sid, turn_id="t-1", after_sequence=1),
            )
            assert binary.code == 0, binary.trailers
            events = [pb.StreamTurnResponse.FromString(m) for m in binary.messages]
            assert [e.sequence for e in events] == sequences
            # Errors as over gRPC; a cancel of a finished turn reports it.
            unknown = await stream(web.http, "WatchTurn", {"sessionId": sid, "turnId": "none"})
            assert unknown.error is not None
            assert reason(unknown.error) == "ERROR_REASON_TURN_NOT_FOUND"
            done = await unary(web.http, "CancelTurn", {"sessionId": sid, "turnId": "t-1"})
            assert done.status_code == 200
            assert done.json()["turn"]["outcome"] == "TURN_OUTCOME_COMPLETED"
            assert "cancelled" not in done.json()

    run(scenario())


def test_cancel_turn_over_connect_ends_a_running_turn_cancelled(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            request = {"sessionId": sid, "turnId": "t-2", "submit": {"content": "/slow"}}
            starter = asyncio.ensure_future(stream(web.http, "StreamTurn", request))
            await web.env.probe.entered.wait()
            stopped = await unary(web.http, "CancelTurn", {"sessionId": sid, "turnId": "t-2"})
            assert stopped.json() == {"cancelled": True}
            result = await starter
            assert result.messages[-1]["failed"]["code"] == "cancelled"
            assert result.messages[-1]["failed"]["retryable"] is True

    run(scenario())


def test_a_quiet_watch_starts_its_response_before_any_event(tmp_path: Path) -> None:
    """A proxy waits for the response headers only so long: a watch of a turn whose model
    pauses starts its response at once, over Connect and gRPC-Web."""

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            started = turn(sid, "t-3", "/slow", keep=True)
            seen = (await cut_after_first_delta(web.env, started))[-1].sequence
            await web.env.probe.entered.wait()
            as_json = {"sessionId": sid, "turnId": "t-3", "afterSequence": str(seen)}
            as_proto = pb.WatchTurnRequest(session_id=sid, turn_id="t-3", after_sequence=seen)
            calls = [
                ({"content-type": "application/connect+json"}, json.dumps(as_json).encode()),
                (
                    {"content-type": "application/grpc-web+proto", "x-grpc-web": "1"},
                    as_proto.SerializeToString(),
                ),
            ]
            async with contextlib.AsyncExitStack() as stack:
                responses = []
                for headers, body in calls:
                    call = web.http.stream(
                        "POST", SERVICE + "WatchTurn", content=envelope(body), headers=headers
                    )
                    response = await asyncio.wait_for(stack.enter_async_context(call), EVENT_WAIT)
                    assert response.status_code == 200
                    responses.append(response)
                web.env.probe.gate.set()
                for response in responses:
                    found = frames(await response.aread())
                    assert found[-1][0] & (END_STREAM | TRAILERS)
                    assert len(found) > 1

    run(scenario())
