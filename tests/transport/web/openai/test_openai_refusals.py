"""Refusals of the OpenAI front in OpenAI's error shape, through a live `serve` and the
official Python SDK: a bad token, an unknown model, what is not supported, a busy session,
the rate limit, draining; a cancelled stream; and no content in any log or span."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from agentskit_chat.fakemodel import Ending, FakeModelServer, HttpResponse, Reply, Stall
from agentskit_chat_client import ChatClient
from tests.cli.conftest import Launcher
from tests.cli.conftest import launch as launch
from tests.transport.web.openai.live import (
    LIMITED_TOKEN,
    OTHER_TOKEN,
    TOKEN,
    OpenAILive,
    start,
)

CANARY = "cnry-5e1f-openai-front"
PAUSED = Reply(chunks=("first ", "second ", "third"), pause_after=1)
START: Any = [{"role": "user", "content": "/start"}]
USER: Any = [{"role": "user", "content": "Tell me a joke"}]


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def live(launch: Launcher, model: FakeModelServer, tmp_path: Path) -> OpenAILive:
    return start(launch, model, tmp_path, "--telemetry-console")


@pytest.fixture
def client(live: OpenAILive) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=live.base_url, api_key=TOKEN, max_retries=0, timeout=30) as sdk:
        yield sdk


def _error(refused: pytest.ExceptionInfo[openai.APIStatusError]) -> dict[str, Any]:
    body = refused.value.response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def test_a_bad_token_is_refused_with_401(live: OpenAILive, model: FakeModelServer) -> None:
    with openai.OpenAI(base_url=live.base_url, api_key="not-a-token", max_retries=0) as sdk:
        with pytest.raises(openai.AuthenticationError) as refused:
            sdk.chat.completions.create(model="support", messages=USER)
        assert _error(refused)["code"] == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            sdk.models.list()
        with pytest.raises(openai.AuthenticationError):  # an unknown path tells nothing either
            sdk.get("/nowhere", cast_to=object)
    assert model.requests == []


def test_an_unknown_model_is_404(client: openai.OpenAI, live: OpenAILive) -> None:
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model="nonexistent", messages=USER)
    error = _error(refused)
    assert (error["code"], error["type"]) == ("model_not_found", "invalid_request_error")
    other = openai.OpenAI(base_url=live.base_url, api_key=OTHER_TOKEN, max_retries=0)
    with other, pytest.raises(openai.NotFoundError):  # another tenant's token may not use it
        other.chat.completions.create(model="orders", messages=USER)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0]"),
        (
            {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "x"},
            "tool_choice",
        ),
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"temperature": 3}, "temperature"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": CANARY},
                            {"type": "image_url", "image_url": {"url": "https://x.example/a.png"}},
                        ],
                    }
                ]
            },
            "messages[0].content[1]",
        ),
        (
            {"messages": [{"role": "tool", "content": CANARY}]},
            "messages[0].tool_call_id",
        ),
        ({"messages": [{"role": "assistant", "content": CANARY}]}, "messages[0].role"),
    ],
)
def test_what_is_not_supported_is_a_clear_400(
    client: openai.OpenAI,
    live: OpenAILive,
    model: FakeModelServer,
    extra: dict[str, Any],
    param: str,
) -> None:
    request: dict[str, Any] = {
        "model": "support",
        "messages": [{"role": "user", "content": CANARY}],
    }
    request.update(extra)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(**request)
    error = _error(refused)
    assert (error["param"], error["type"]) == (param, "invalid_request_error")
    assert CANARY not in refused.value.response.text
    assert model.requests == []
    assert live.rows("sessions") == 0


@pytest.mark.parametrize(
    ("header", "param"),
    [
        ("Idempotency-Key", "Idempotency-Key"),
        ("X-AgentsKit-Session", "X-AgentsKit-Session"),
        ("X-AgentsKit-Conversation", "x-agentskit-conversation"),
    ],
)
def test_a_malformed_id_header_is_a_400_naming_it(
    client: openai.OpenAI, live: OpenAILive, header: str, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="support", messages=START, extra_headers={header: "not an id!"}
        )
    assert _error(refused)["param"] == param
    assert live.rows("sessions") == 0


@pytest.mark.parametrize("headers", [{}, {"X-AgentsKit-Conversation": "c-surrogate"}])
def test_a_lone_surrogate_is_a_400_and_keeps_nothing(
    live: OpenAILive, model: FakeModelServer, headers: dict[str, str]
) -> None:
    raw = b'{"model": "support", "messages": [{"role": "user", "content": "x\\ud800"}]}'
    answer = httpx.post(
        f"{live.base_url}/chat/completions",
        content=raw,
        headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json", **headers},
        timeout=30,
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "messages[0].content"
    assert live.rows("sessions") == 0
    assert model.requests == []


def test_a_conversation_id_of_a_definition_the_token_may_not_use_is_409(
    client: openai.OpenAI, live: OpenAILive, model: FakeModelServer
) -> None:
    on = {"X-AgentsKit-Conversation": "c-elsewhere"}
    model.enqueue(Reply(chunks=("Hello",)))
    assert _conversation_start(client, "coffee", on).headers["x-agentskit-history"] == "client"
    other = openai.OpenAI(base_url=live.base_url, api_key=LIMITED_TOKEN, max_retries=0)
    with other, pytest.raises(openai.ConflictError) as refused:
        _conversation_start(other, "support", on)
    assert _error(refused)["param"] == "x-agentskit-conversation"
    assert live.rows("sessions") == 1


def _conversation_start(sdk: openai.OpenAI, definition: str, headers: dict[str, str]) -> Any:
    return sdk.chat.completions.with_raw_response.create(
        model=definition, messages=START, extra_headers=headers
    )


def test_a_new_conversation_whose_first_turn_is_refused_is_not_kept(
    client: openai.OpenAI, live: OpenAILive, model: FakeModelServer
) -> None:
    too_long: Any = [{"role": "user", "content": "x" * 40_000}]
    with pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(
            model="support", messages=too_long, extra_headers={"X-AgentsKit-Conversation": "c1"}
        )
    assert refused.value.status_code in (413, 429)
    assert live.rows("sessions") == 0
    assert model.requests == []


def test_a_busy_session_is_409_and_a_cancelled_stream_commits_nothing(
    client: openai.OpenAI, live: OpenAILive, model: FakeModelServer
) -> None:
    session = asyncio.run(_create(live))
    on_session = {"X-AgentsKit-Session": session}
    model.enqueue(PAUSED)
    stream: Any = client.chat.completions.create(
        model="support", messages=USER, stream=True, extra_headers=on_session
    )
    chunks = iter(stream)
    assert next(chunks).choices[0].delta.role == "assistant"
    assert next(chunks).choices[0].delta.content == "first "
    with pytest.raises(openai.ConflictError) as refused:
        client.chat.completions.create(model="support", messages=USER, extra_headers=on_session)
    assert _error(refused)["code"] == "session_busy"
    stream.close()
    assert model.wait_disconnect(timeout=30), "the model call went on after the client left"
    model.resume()
    assert asyncio.run(_turns(live, session)) == []
    assert asyncio.run(_messages(live, session)) == []


def test_a_cancelled_stateless_stream_leaves_nothing_in_the_store(
    client: openai.OpenAI, live: OpenAILive, model: FakeModelServer
) -> None:
    model.enqueue(PAUSED)
    stream: Any = client.chat.completions.create(model="support", messages=USER, stream=True)
    chunks = iter(stream)
    next(chunks)
    assert next(chunks).choices[0].delta.content == "first "
    stream.close()
    assert model.wait_disconnect(timeout=30)
    model.resume()
    deadline = time.monotonic() + 30
    while live.rows("sessions") and time.monotonic() < deadline:
        time.sleep(0.05)
    for table in ("sessions", "messages", "turn_events", "turn_signals"):
        assert live.rows(table) == 0, table


def test_a_conversation_whose_first_turn_was_cancelled_goes_on_only_with_its_history(
    client: openai.OpenAI, live: OpenAILive, model: FakeModelServer
) -> None:
    chat = {"X-OpenWebUI-Chat-Id": "chat-cancelled"}
    model.enqueue(PAUSED)
    stream: Any = client.chat.completions.create(
        model="support", messages=USER, stream=True, extra_headers=chat
    )
    chunks = iter(stream)
    next(chunks)
    assert next(chunks).choices[0].delta.content == "first "
    stream.close()
    assert model.wait_disconnect(timeout=30)
    model.resume()
    model.enqueue(Reply(chunks=("A title",)))
    title: Any = [{"role": "user", "content": "Title this chat"}]
    titled = client.chat.completions.with_raw_response.create(
        model="support", messages=title, extra_headers=chat
    )
    assert titled.headers["x-agentskit-history"] == "stateless"
    assert titled.parse().choices[0].message.content == "A title"
    follow: Any = [*USER, {"role": "assistant", "content": "first "}, *START]
    retrying = client.with_options(max_retries=5)  # the cancelled turn may still hold it
    followed = retrying.chat.completions.with_raw_response.create(
        model="support", messages=follow, extra_headers=chat
    )
    assert followed.headers["x-agentskit-history"] == "client"
    assert followed.headers["x-agentskit-to-state"] == "collecting"
    assert len(asyncio.run(_turns(live, "chat-cancelled"))) == 1


def test_a_model_failure_before_any_text_is_an_error_status_and_commits_nothing(
    client: openai.OpenAI, live: OpenAILive, model: FakeModelServer
) -> None:
    model.enqueue(HttpResponse(400, body=CANARY))
    with pytest.raises(openai.InternalServerError) as refused:
        client.chat.completions.create(
            model="support",
            messages=USER,
            stream=True,
            extra_headers={"X-AgentsKit-Conversation": "m1"},
        )
    assert _error(refused)["code"] == "model_rejected"
    assert CANARY not in refused.value.response.text
    assert asyncio.run(_turns(live, "m1"))[0].outcome == "failed"


def test_a_model_failure_after_text_ends_the_stream_with_an_error_event(
    client: openai.OpenAI, live: OpenAILive, model: FakeModelServer
) -> None:
    model.enqueue(Reply(chunks=("partial ",), ending=Ending.MALFORMED))
    stream: Any = client.chat.completions.create(
        model="support",
        messages=USER,
        stream=True,
        extra_headers={"X-AgentsKit-Conversation": "m2"},
    )
    seen: list[str] = []
    with pytest.raises(openai.APIError) as failed:
        seen.extend(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert "".join(seen) == "partial "
    assert "model" in str(failed.value.message)
    (turn,) = asyncio.run(_turns(live, "m2"))
    assert (turn.outcome, turn.assistant_message_id) == ("failed", None)


def test_past_the_rate_limit_is_429_with_retry_after(live: OpenAILive) -> None:
    with openai.OpenAI(base_url=live.base_url, api_key=OTHER_TOKEN, max_retries=0) as sdk:
        for _ in range(2):
            sdk.chat.completions.create(model="support", messages=START)
        with pytest.raises(openai.RateLimitError) as refused:
            sdk.chat.completions.create(model="support", messages=START)
    assert int(refused.value.response.headers["retry-after"]) >= 1
    assert _error(refused)["type"] == "rate_limit_error"


def test_a_draining_server_is_503(launch: Launcher, model: FakeModelServer, tmp_path: Path) -> None:
    live = start(launch, model, tmp_path, "--drain-delay", "120")
    live.server.send(signal.SIGTERM)
    live.server.wait_output("draining")
    response = httpx.post(
        f"{live.base_url}/chat/completions",
        json={"model": "support", "messages": USER},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["type"] == "server_error"


def test_no_content_reaches_logs_or_spans(
    client: openai.OpenAI, live: OpenAILive, model: FakeModelServer
) -> None:
    model.enqueue(Reply(chunks=(CANARY,)))
    said: Any = [{"role": "system", "content": CANARY}, {"role": "user", "content": CANARY}]
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    answer = client.chat.completions.create(
        model="support",
        messages=said,
        extra_headers={
            "X-AgentsKit-Conversation": "canary",
            "traceparent": f"00-{trace}-00f067aa0ba902b7-01",
        },
    )
    assert answer.choices[0].message.content == CANARY
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="support", messages=said, n=3)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model=CANARY, messages=said)
    live.server.wait_output("/v1/chat/completions")  # the request spans were written
    live.server.wait_output(trace)  # continuing the caller's trace
    assert CANARY not in live.server.stdout + live.server.stderr


async def _create(live: OpenAILive) -> str:
    async with ChatClient(live.server.target, token=TOKEN, timeout=30) as chat:
        return (await chat.create_session("support")).session_id


async def _turns(live: OpenAILive, session_id: str) -> list[Any]:
    async with ChatClient(live.server.target, token=TOKEN, timeout=30) as chat:
        return list((await chat.list_turns(session_id)).turns)


async def _messages(live: OpenAILive, session_id: str) -> list[Any]:
    async with ChatClient(live.server.target, token=TOKEN, timeout=30) as chat:
        return list((await chat.get_session(session_id)).messages)


def test_the_listeners_bounds_apply_cors_body_size_and_deadline(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    origin = "http://renderer.example:5173"
    args = ("--cors-origin", origin, "--max-request-bytes", "20000", "--turn-timeout", "2")
    live = start(launch, model, tmp_path, *args)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=live.base_url, timeout=30) as http:
        asked = (
            "authorization, content-type, x-agentskit-conversation, idempotency-key, x-stainless-os"
        )
        preflight = http.options(
            "/chat/completions",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": asked,
            },
        )
        assert preflight.status_code == 204
        allowed = preflight.headers["access-control-allow-headers"].lower()
        assert all(name in allowed for name in asked.split(", "))
        answer = http.post(
            "/chat/completions",
            json={"model": "support", "messages": START},
            headers={**auth, "Origin": origin},
        )
        assert answer.headers["access-control-allow-origin"] == origin
        assert "x-agentskit-kind" in answer.headers["access-control-expose-headers"].lower()
        big = http.post(
            "/chat/completions",
            json={"model": "support", "messages": [{"role": "user", "content": "x" * 30_000}]},
            headers=auth,
        )
        assert big.status_code == 413
        assert big.json()["error"]["param"] == "body"
        model.enqueue(Stall())
        late = http.post(
            "/chat/completions", json={"model": "support", "messages": USER}, headers=auth
        )
        assert late.status_code == 504
        assert late.json()["error"]["code"] == "deadline_exceeded"
