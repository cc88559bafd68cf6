"""The `/ai-sdk/` front's refusals over plain HTTP: malformed requests naming their field,
tokens, paths, methods, definitions and limits; nothing stored changes."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.fakemodel import FakeModelServer
from agentskit_chat.service import Rate, RateLimits
from agentskit_chat.transport.web.boundary.logbound import LOGGER_NAME, MAX_EVENT_CHARS
from tests.transport.conftest import CANARY, run
from tests.transport.test_auth import TOKEN_B
from tests.transport.web.aisdk.chat import (
    DEFINITION,
    GOOD,
    SLOW,
    SLOW_TEXT,
    assistant,
    post,
    served,
    user,
    with_,
)


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        server.model.answers[SLOW_TEXT] = SLOW
        yield server


def _message(**changes: Any) -> dict[str, Any]:
    return with_(messages=[{**user("u1", "/start"), **changes}])


MALFORMED: list[tuple[Any, str]] = [
    (CANARY, "body"),
    ([CANARY], "body"),
    ({"messages": GOOD["messages"]}, "id"),
    (with_(id=5), "id"),
    (with_(id=f"bad id {CANARY}"), "id"),
    (with_(messages=[]), "messages"),
    (with_(messages=[CANARY]), "messages[0]"),
    (_message(id=None), "messages[0].id"),
    (_message(role=CANARY), "messages[0].role"),
    (_message(parts=CANARY), "messages[0].parts"),
    (_message(parts=[{"text": CANARY}]), "messages[0].parts[0]"),
    (_message(parts=[{"type": "text", "text": 5}]), "messages[0].parts[0].text"),
    (with_(trigger=CANARY), "trigger"),
    (with_(messageId=5), "messageId"),
    (with_(turnId=f"{CANARY} x"), "turnId"),
    (with_(resumable=CANARY), "resumable"),
    (with_(messages=[user("u1", "/start"), user("u1", CANARY)]), "messages[1].id"),
    (with_(messages=[assistant("a1", CANARY)]), "messages"),
    (with_(messages=[user("u1", CANARY), user("u2", "  ")]), "messages[1].parts"),
    # A role that is not a string (an array or object cannot name one).
    (_message(role=["user"]), "messages[0].role"),
    (_message(role={"user": CANARY}), "messages[0].role"),
    # Lone surrogates have no UTF-8 form: refused where they are read.
    (_message(parts=[{"type": "text", "text": f"{CANARY} \ud800"}]), "messages[0].parts[0].text"),
    (_message(id="u\ud800"), "messages[0].id"),
    (with_(id="chat-\udfff"), "id"),
    # Nesting deeper than the JSON parser follows.
    ('{"id":"chat-9","messages":' + "[" * 50000 + "]" * 50000 + "}", "body"),
]


@pytest.mark.parametrize(("body", "field"), MALFORMED)
def test_a_malformed_request_is_refused_naming_its_field(
    tmp_path: Path,
    model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    body: Any,
    field: str,
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            before = web.env.dump()
            content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            response = await web.http.post(
                f"/ai-sdk/{DEFINITION}",
                content=content,
                headers={"content-type": "application/json"},
            )
            assert response.status_code == 400
            assert response.headers["content-type"] == "application/json"
            error = response.json()["error"]
            assert (error["code"], error["field"]) == ("invalid_argument", field)
            assert CANARY not in response.text
            assert web.env.dump() == before

    run(scenario())
    assert not model.requests
    lines = [r for r in caplog.records if r.name == LOGGER_NAME]
    assert len(lines) <= 1
    for record in caplog.records:
        assert CANARY not in record.getMessage()
    for record in lines:
        assert len(record.getMessage()) <= MAX_EVENT_CHARS


def test_a_request_without_a_valid_token_is_refused(tmp_path: Path, model: FakeModelServer) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            before = web.env.dump()
            for token in (None, "not-a-token"):
                headers = {} if token is None else {"authorization": f"Bearer {token}"}
                web.http.headers.pop("authorization")
                web.http.headers.update(headers)
                for method, path in (
                    ("POST", f"/ai-sdk/{DEFINITION}"),
                    ("GET", f"/ai-sdk/{DEFINITION}/chat-1/stream"),
                    ("POST", f"/ai-sdk/{DEFINITION}/chat-1/cancel"),
                    ("GET", "/ai-sdk/nothing/here"),
                ):
                    response = await web.http.request(method, path, json=GOOD)
                    assert response.status_code == 401
                    assert response.json()["error"]["code"] == "unauthenticated"
                web.http.headers["authorization"] = ""
            assert web.env.dump() == before

    run(scenario())


def test_paths_methods_and_definitions(tmp_path: Path, model: FakeModelServer) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            before = web.env.dump()
            missing = await post(web.http, GOOD, "nowhere")
            assert missing.status_code == 404
            assert missing.json()["error"]["code"] == "definition_not_found"
            wrong = await web.http.get(f"/ai-sdk/{DEFINITION}")
            assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
            wrong = await web.http.post(f"/ai-sdk/{DEFINITION}/chat-1/stream")
            assert (wrong.status_code, wrong.headers["allow"]) == (405, "GET")
            wrong = await web.http.get(f"/ai-sdk/{DEFINITION}/chat-1/cancel")
            assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
            bad = await web.http.get(f"/ai-sdk/{DEFINITION}/{CANARY}%20x/stream")
            assert (bad.status_code, bad.json()["error"]["field"]) == (400, "chat_id")
            assert CANARY not in bad.text
            for path in ("/ai-sdk/", f"/ai-sdk/{DEFINITION}/chat-1", "/ai-sdk/a/b/c/d"):
                assert (await web.http.get(path)).status_code == 404
            assert web.env.dump() == before
            # A chat belongs to the definition it was created on.
            assert (await post(web.http, GOOD)).status_code == 200
            other = await post(web.http, GOOD, "support")
            assert other.status_code == 409
            assert other.json()["error"]["field"] == "id"
            none = await web.http.get("/ai-sdk/support/chat-1/stream")
            assert none.status_code == 204
            # Tenants: another tenant's token sees no such chat, and makes its own.
            theirs = await post(web.http, GOOD, "support", authorization=f"Bearer {TOKEN_B}")
            assert theirs.status_code == 200

    run(scenario())


def test_requests_over_the_limits_are_refused(tmp_path: Path, model: FakeModelServer) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model, max_request_bytes=64 * 1024) as web:
            before = web.env.dump()
            body = with_(messages=[user("u1", CANARY * 4000)])  # over 64 KiB
            large = await post(web.http, body)
            assert large.status_code == 413
            assert large.json()["error"]["field"] == "body"
            body = with_(messages=[user("u1", "x" * 40_000)])  # over the 32 KiB of a message
            long = await post(web.http, body)
            assert long.status_code == 413  # a smaller message mends it, not a retry
            error = long.json()["error"]
            assert (error["code"], error["field"]) == ("limit_exceeded", "messages[0].parts")
            assert "dispatch" not in error["message"]
            assert web.env.dump() == before
            assert CANARY not in large.text + long.text

    run(scenario())


def test_a_chat_created_for_a_refused_turn_is_not_kept(
    tmp_path: Path, model: FakeModelServer
) -> None:
    rates = RateLimits(turns=Rate(per_second=0.001, burst=1))

    async def scenario() -> None:
        async with served(tmp_path, model, rates=rates) as web:
            first = await post(web.http, with_(id="chat-1"))
            assert first.status_code == 200
            before = web.env.dump()
            refused = await post(web.http, with_(id="chat-2"))
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "rate_limited"
            assert int(refused.headers["retry-after"]) >= 1
            assert web.env.dump() == before  # chat-2 was created for the turn, then deleted

    run(scenario())
