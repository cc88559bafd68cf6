"""ChatService over Connect (JSON and binary) and gRPC-Web: the same service, store and
errors as gRPC."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from google.rpc import error_details_pb2

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport import Authenticator, token_digest
from agentskit_chat_client import Submit
from tests.transport.conftest import CANARY, once_released, refused, run
from tests.transport.web.conftest import web_live
from tests.transport.web.wire import (
    END_STREAM,
    SERVICE,
    envelope,
    frames,
    grpc_web,
    reason,
    stream,
    unary,
)

EVENTS = ("started", "decision", "delta", "completed", "failed")


def _kind(event: dict[str, object]) -> str:
    (kind,) = set(EVENTS) & set(event)
    return kind


def test_list_definitions_as_plain_json(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            response = await unary(web.http, "ListDefinitions", {})
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/json"
            ids = {d["id"] for d in response.json()["definitions"]}
            assert {"support", "orders", "probe"} <= ids

    run(scenario())


def test_binary_connect_unary(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            response = await web.http.post(
                SERVICE + "CreateSession",
                content=pb.CreateSessionRequest(definition_id="support").SerializeToString(),
                headers={"content-type": "application/proto"},
            )
            assert response.status_code == 200
            session = pb.CreateSessionResponse.FromString(response.content).session
            assert session.definition_id == "support"
            assert session.snapshot.state == "idle"

    run(scenario())


def test_a_turn_streams_over_connect_and_is_seen_over_grpc(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            created = await unary(web.http, "CreateSession", {"definitionId": "support"})
            session_id = created.json()["session"]["sessionId"]
            result = await stream(
                web.http,
                "StreamTurn",
                {"sessionId": session_id, "turnId": "t1", "submit": {"content": "/start"}},
            )
            assert result.status == 200
            assert result.end == {}
            kinds = [_kind(m) for m in result.messages]
            assert kinds == ["started", "decision", "delta", "completed"]
            decision = result.messages[1]["decision"]
            assert decision["kind"] == "TURN_KIND_DETERMINISTIC"
            assert decision["fromState"] == "idle"
            # The same session, read over gRPC: one service, one store.
            history = await web.env.client.get_session(session_id)
            assert history.session.snapshot.state == decision["toState"]
            assert [m.role for m in history.messages] == ["user", "assistant"]

    run(scenario())


def test_grpc_web_streams_a_model_turn_with_trailers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            session = await web.env.client.create_session("probe")
            request = pb.StreamTurnRequest(
                session_id=session.session_id, turn_id="t1", submit=pb.SubmitOperation(content="hi")
            )
            result = await grpc_web(web.http, "StreamTurn", request)
            assert result.status == 200
            assert result.code == 0, result.trailers
            events = [pb.StreamTurnResponse.FromString(m) for m in result.messages]
            assert [e.WhichOneof("event") for e in events] == [
                "started",
                "decision",
                "delta",
                "delta",
                "completed",
            ]
            assert "".join(e.delta.text for e in events if e.HasField("delta")) == "model answer"

    run(scenario())


def test_errors_carry_the_grpc_codes_and_details(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            response = await unary(web.http, "GetSession", {"sessionId": "missing"})
            assert response.status_code == 404
            error = response.json()
            assert error["code"] == "not_found"
            assert reason(error) == "ERROR_REASON_SESSION_NOT_FOUND"
            # gRPC-Web: the same status in the trailers, details included.
            result = await grpc_web(
                web.http, "GetSession", pb.GetSessionRequest(session_id="missing")
            )
            assert result.code == 5
            (info,) = result.details()
            assert isinstance(info, error_details_pb2.ErrorInfo)
            assert info.reason == "ERROR_REASON_SESSION_NOT_FOUND"
            assert info.domain == "chat.agentskit.dev"

    run(scenario())


def test_a_busy_session_says_when_to_retry(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            session = await web.env.client.create_session("probe")
            sid = session.session_id
            first = asyncio.create_task(
                stream(
                    web.http,
                    "StreamTurn",
                    {"sessionId": sid, "turnId": "a", "submit": {"content": "/slow"}},
                )
            )
            await web.env.probe.entered.wait()
            busy = await stream(
                web.http,
                "StreamTurn",
                {"sessionId": sid, "turnId": "b", "submit": {"content": "x"}},
            )
            assert busy.error is not None
            assert busy.error["code"] == "aborted"
            assert reason(busy.error) == "ERROR_REASON_SESSION_BUSY"
            types = [d["type"] for d in busy.error["details"]]
            assert types == ["google.rpc.ErrorInfo", "google.rpc.RetryInfo"]
            web.env.probe.gate.set()
            done = await first
            assert done.error is None

    run(scenario())


def test_invalid_requests_change_nothing_and_echo_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            session = await web.env.client.create_session("support")
            sid = session.session_id
            await web.env.client.run_turn(sid, Submit("/start"))
            before = web.env.dump()
            bad_enum = await unary(web.http, "CreateSession", {"definitionId": {"text": CANARY}})
            assert bad_enum.status_code == 400
            assert bad_enum.json()["code"] == "invalid_argument"
            assert reason(bad_enum.json()) == "ERROR_REASON_INVALID_ARGUMENT"
            not_json = await web.http.post(
                SERVICE + "GetSession",
                content=f'{{"sessionId": "{CANARY}'.encode(),
                headers={"content-type": "application/json"},
            )
            assert not_json.status_code == 400
            empty_edit = await stream(
                web.http,
                "StreamTurn",
                {"sessionId": sid, "turnId": "e", "edit": {"content": CANARY}},
            )
            assert empty_edit.error is not None
            assert empty_edit.error["code"] == "invalid_argument"
            bad_proto = await web.http.post(
                SERVICE + "StreamTurn",
                content=envelope(b"\xff\xff" + CANARY.encode()),
                headers={"content-type": "application/connect+proto"},
            )
            ((flags, payload),) = frames(bad_proto.content)
            assert flags == END_STREAM
            assert json.loads(payload)["error"]["code"] == "invalid_argument"
            for body in (
                bad_enum.text,
                not_json.text,
                json.dumps(empty_edit.end),
                payload.decode(),
            ):
                assert CANARY not in body
            assert web.env.dump() == before

    run(scenario())


def test_tokens_guard_the_listener_but_not_health(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        f"tokens:\n  - sha256: {token_digest('web-secret')}\n    tenant: web\n", encoding="utf-8"
    )

    async def scenario() -> None:
        async with web_live(
            tmp_path, authenticator=Authenticator(tokens), token="web-secret"
        ) as web:
            refused = await unary(web.http, "ListDefinitions", {})
            assert refused.status_code == 401
            assert reason(refused.json()) == "ERROR_REASON_UNAUTHENTICATED"
            wrong = await unary(web.http, "ListDefinitions", {}, authorization="Bearer nope")
            assert wrong.status_code == 401
            allowed = await unary(
                web.http,
                "CreateSession",
                {"definitionId": "support"},
                authorization="Bearer web-secret",
            )
            assert allowed.status_code == 200
            # The session belongs to the token's tenant: the gRPC client (same token) sees it.
            sid = allowed.json()["session"]["sessionId"]
            assert (await web.env.client.get_session(sid)).session.session_id == sid
            health = await web.http.get("/healthz")
            assert (health.status_code, health.text) == (200, "SERVING\n")

    run(scenario())


def test_a_deadline_ends_the_turn_and_frees_the_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            session = await web.env.client.create_session("probe")
            sid = session.session_id
            late = await stream(
                web.http,
                "StreamTurn",
                {"sessionId": sid, "turnId": "a", "submit": {"content": "/slow"}},
                connect_timeout_ms="300",
            )
            assert late.error is not None
            assert late.error["code"] == "deadline_exceeded"
            await asyncio.wait_for(web.env.probe.model_closed.wait(), 60)
            web.env.probe.gate.set()
            result = await once_released(web.env.client, sid, "/count")
            assert result.text == "counted 1"
            # gRPC-Web's own header says the same.
            web.env.probe.gate.clear()
            web.env.probe.model_closed.clear()
            timed = await grpc_web(
                web.http,
                "StreamTurn",
                pb.StreamTurnRequest(
                    session_id=sid, turn_id="b", submit=pb.SubmitOperation(content="/slow")
                ),
                grpc_timeout="300m",
            )
            assert timed.code == 4, timed.trailers
            await asyncio.wait_for(web.env.probe.model_closed.wait(), 60)

    run(scenario())


def test_a_browser_going_away_cancels_the_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            session = await web.env.client.create_session("probe")
            sid = session.session_id
            body = envelope(
                json.dumps(
                    {"sessionId": sid, "turnId": "a", "submit": {"content": "/slow"}}
                ).encode()
            )
            async with web.http.stream(
                "POST",
                SERVICE + "StreamTurn",
                content=body,
                headers={"content-type": "application/connect+json"},
            ) as response:
                assert response.status_code == 200
                await web.env.probe.entered.wait()
            # Leaving the block closed the connection mid-stream, as an aborted fetch does.
            await asyncio.wait_for(web.env.probe.model_closed.wait(), 60)
            result = await once_released(web.env.client, sid, "/count")
            assert result.text == "counted 1"
            # The cancelled turn committed nothing: no record, no messages of it.
            missing = await refused(web.env.client.get_turn(sid, "a"))
            assert missing.reason == "ERROR_REASON_TURN_NOT_FOUND"
            history = await web.env.client.get_session(sid)
            assert [m.content for m in history.messages if m.role == "user"] == ["/count"]

    run(scenario())
