"""The fake model server over real HTTP: the streaming protocol, scripts, records, hang-ups."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from agentskit_chat.fakemodel import (
    DEFAULT_TEXT,
    Ending,
    FakeModel,
    FakeModelServer,
    Hangup,
    HttpResponse,
    Reply,
    Stall,
    split_text,
)

BODY: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": "three words here"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}


def events(text: str) -> list[str]:
    """The data of every event of a streamed body."""
    return [line[len("data: ") :] for line in text.split("\n\n") if line.startswith("data: ")]


def chunks(data: list[str]) -> list[dict[str, Any]]:
    return [json.loads(item) for item in data if item != "[DONE]"]


def content(decoded: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in decoded if c["choices"])


def test_the_default_reply_streams_the_openai_chunk_format(server: FakeModelServer) -> None:
    response = httpx.post(f"{server.url}/chat/completions", json=BODY)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    data = events(response.text)
    assert data[-1] == "[DONE]"
    decoded = chunks(data)
    assert all(c["object"] == "chat.completion.chunk" for c in decoded)
    assert decoded[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert content(decoded) == DEFAULT_TEXT
    assert decoded[-2]["choices"][0]["finish_reason"] == "stop"
    assert decoded[-1]["choices"] == []
    assert decoded[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_usage_is_only_sent_when_asked_for(server: FakeModelServer) -> None:
    server.enqueue(Reply(chunks=("a", "b"), usage=(5, 6), finish_reason="length"))
    plain = {key: value for key, value in BODY.items() if key != "stream_options"}
    decoded = chunks(events(httpx.post(f"{server.url}/chat/completions", json=plain).text))
    assert all("usage" not in c for c in decoded)
    assert content(decoded) == "ab"
    assert decoded[-1]["choices"][0]["finish_reason"] == "length"


def test_a_request_without_stream_gets_one_completion(server: FakeModelServer) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    answer = httpx.post(f"{server.url}/chat/completions", json=body).json()
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": DEFAULT_TEXT}
    assert answer["usage"]["prompt_tokens"] == 1


@pytest.mark.parametrize(
    ("method", "path", "content", "status"),
    [
        ("POST", "/v1/embeddings", b"{}", 404),
        ("GET", "/v1/chat/completions", b"", 405),
        ("POST", "/v1/chat/completions", b"{not json", 400),
    ],
)
def test_other_requests_get_json_errors(
    server: FakeModelServer, method: str, path: str, content: bytes, status: int
) -> None:
    base = server.url.removesuffix("/v1")
    response = httpx.request(method, base + path, content=content)
    assert response.status_code == status
    assert "error" in response.json()


def test_scripts_answer_in_order_then_the_default_reply(server: FakeModelServer) -> None:
    server.enqueue(
        HttpResponse(429, '{"error": "slow down"}', retry_after="3"),
        Reply(chunks=("only",)),
    )
    url = f"{server.url}/chat/completions"
    with httpx.Client() as client:
        limited = client.post(url, json=BODY)
        scripted = client.post(url, json=BODY)
        default = client.post(url, json=BODY)
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "3"
    assert limited.json() == {"error": "slow down"}
    assert content(chunks(events(scripted.text))) == "only"
    assert content(chunks(events(default.text))) == DEFAULT_TEXT
    assert len({r.client_port for r in server.requests}) == 1  # One kept-alive connection.


def test_requests_are_recorded_with_headers_and_body(server: FakeModelServer) -> None:
    httpx.post(
        f"{server.url}/chat/completions",
        json=BODY,
        headers={"Authorization": "Bearer k", "X-Extra": "1"},
    )
    (received,) = server.requests
    assert (received.method, received.path, received.body) == ("POST", "/v1/chat/completions", BODY)
    assert received.headers["authorization"] == "Bearer k"
    assert received.headers["x-extra"] == "1"
    assert received.finished.wait(10)
    assert received.chunks_sent == 4
    assert not received.disconnected.is_set()


def test_a_hangup_closes_the_connection_without_an_answer(server: FakeModelServer) -> None:
    server.enqueue(Hangup())
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(f"{server.url}/chat/completions", json=BODY)


@pytest.mark.parametrize(
    ("ending", "last"),
    [
        (Ending.TRUNCATE, "b"),
        (Ending.MALFORMED, '{"choices": [{"delta": {"content": '),
    ],
)
def test_broken_endings_end_the_body_without_done(
    server: FakeModelServer, ending: Ending, last: str
) -> None:
    server.enqueue(Reply(chunks=("a", "b"), ending=ending))
    data = events(httpx.post(f"{server.url}/chat/completions", json=BODY).text)
    assert "[DONE]" not in data
    assert data[-1] == last or json.loads(data[-1])["choices"][0]["delta"]["content"] == last


def test_a_dropped_stream_cuts_the_connection(server: FakeModelServer) -> None:
    server.enqueue(Reply(chunks=("a",), ending=Ending.DROP))
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(f"{server.url}/chat/completions", json=BODY)


def test_a_client_leaving_mid_stream_is_noticed(server: FakeModelServer) -> None:
    server.enqueue(Reply(chunks=("a", "b", "c"), pause_after=1))
    with (
        httpx.Client() as client,
        client.stream("POST", f"{server.url}/chat/completions", json=BODY) as response,
    ):
        first = next(response.iter_bytes())
        assert first.startswith(b"data: ")
    assert server.wait_disconnect(10)
    (received,) = server.requests
    assert received.disconnected.is_set()
    assert not received.finished.is_set()


def test_a_stall_holds_the_request_until_the_client_gives_up(server: FakeModelServer) -> None:
    server.enqueue(Stall())
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/chat/completions", json=BODY, timeout=0.2)
    assert server.wait_disconnect(10)


def test_resume_lets_a_paused_reply_finish(server: FakeModelServer) -> None:
    server.enqueue(Reply(chunks=("a", "b"), pause_after=0))
    with (
        httpx.Client() as client,
        client.stream("POST", f"{server.url}/chat/completions", json=BODY) as response,
    ):
        parts = response.iter_bytes()
        assert b'"role": "assistant"' in next(parts)
        assert server.requests[0].chunks_sent == 0
        server.resume()
        rest = b"".join(parts).decode()
    assert content(chunks(events(rest))) == "ab"


def test_stopping_cuts_open_connections() -> None:
    server = FakeModelServer().start()
    server.enqueue(Stall())
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, f"{server.url}/chat/completions", json=BODY, timeout=30)
        while not server.requests and not pending.done():
            time.sleep(0.01)
        server.stop()
        with pytest.raises(httpx.RemoteProtocolError):
            pending.result()
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{server.url}/chat/completions", json=BODY)


def test_the_server_runs_on_the_callers_event_loop_too() -> None:
    async def run() -> str:
        async with FakeModel(Reply(chunks=("x", "y"))) as model, httpx.AsyncClient() as client:
            response = await client.post(f"{model.url}/chat/completions", json=BODY)
            assert model.requests[0].body == BODY
            return content(chunks(events(response.text)))

    assert asyncio.run(run()) == "xy"


def test_the_threaded_server_works_as_an_async_context_manager() -> None:
    async def run() -> int:
        async with FakeModelServer() as server, httpx.AsyncClient() as client:
            response = await client.post(f"{server.url}/chat/completions", json=BODY)
            return response.status_code

    assert asyncio.run(run()) == 200


@pytest.mark.parametrize("parts", [1, 2, 4, 20, 21, 22, 60, len(DEFAULT_TEXT)])
def test_split_text_keeps_every_character_in_non_empty_pieces(parts: int) -> None:
    pieces = split_text(DEFAULT_TEXT, parts)
    assert len(pieces) == parts
    assert "".join(pieces) == DEFAULT_TEXT
    assert all(pieces)


@pytest.mark.parametrize("parts", [0, len(DEFAULT_TEXT) + 1])
def test_split_text_refuses_impossible_counts(parts: int) -> None:
    with pytest.raises(ValueError, match="cannot split"):
        split_text(DEFAULT_TEXT, parts)


def test_keyed_answers_follow_the_last_user_message_and_leave_the_queue_alone(
    server: FakeModelServer,
) -> None:
    server.model.answers["asked by key"] = Reply(chunks=("keyed ", "answer"))
    server.model.answers["fail by key"] = HttpResponse(503)
    server.enqueue(Reply(chunks=("queued",)))
    keyed = {
        **BODY,
        "messages": [
            {"role": "user", "content": "fail by key"},
            {"role": "assistant", "content": "earlier"},
            {"role": "user", "content": "asked by key"},
        ],
    }
    first = httpx.post(f"{server.url}/chat/completions", json=keyed)
    assert content(chunks(events(first.text))) == "keyed answer"
    failing = {**BODY, "messages": [{"role": "user", "content": "fail by key"}]}
    assert httpx.post(f"{server.url}/chat/completions", json=failing).status_code == 503
    other = httpx.post(f"{server.url}/chat/completions", json=BODY)
    assert content(chunks(events(other.text))) == "queued"  # the queue was not consumed above
    again = httpx.post(f"{server.url}/chat/completions", json=BODY)
    assert content(chunks(events(again.text))) == DEFAULT_TEXT
