"""The OpenAI-compatible front through a live `serve`, driven by the official Python SDK
unchanged: deterministic and agentic turns, streamed and not, the decision read from the
raw response, a client-held conversation, refusals in OpenAI's shape."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat_client import ChatClient
from tests.cli.conftest import Launcher
from tests.cli.conftest import launch as launch
from tests.cli.fixtures.serving import run_cli
from tests.transport.web.openai.live import OTHER_TOKEN, TOKEN, OpenAILive, start

JOKE = Reply(chunks=("Why did ", "the stream ", "cross the road?"), usage=(7, 3))


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def live(launch: Launcher, model: FakeModelServer, tmp_path: Path) -> OpenAILive:
    return start(launch, model, tmp_path)


@pytest.fixture
def client(live: OpenAILive) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=live.base_url, api_key=TOKEN, max_retries=0, timeout=30) as sdk:
        yield sdk


def test_a_deterministic_turn_answers_without_the_model(
    client: openai.OpenAI, model: FakeModelServer
) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="support", messages=[{"role": "user", "content": "/start"}]
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "What is your name?"
    assert answer.choices[0].finish_reason == "stop"
    assert raw.headers["x-agentskit-kind"] == "deterministic"
    assert raw.headers["x-agentskit-route"] == "start"
    extra = raw.http_response.json()["agentskit"]
    assert extra["kind"] == "deterministic"
    assert (extra["from"], extra["to"]) == ("idle", "collecting")
    assert model.requests == []


def test_an_agentic_turn_streams_the_model_answer(
    client: openai.OpenAI, model: FakeModelServer
) -> None:
    model.enqueue(JOKE)
    stream = client.chat.completions.create(
        model="support",
        messages=[{"role": "user", "content": "Tell me a joke"}],
        stream=True,
        stream_options={"include_usage": True},
        temperature=0.5,
        max_tokens=100000,
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == JOKE.text
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (7, 3)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    body = model.requests[0].body
    assert body["temperature"] == 0.5
    assert body["max_tokens"] == 4096


def test_an_answer_cut_by_its_token_limit_finishes_with_length(
    client: openai.OpenAI, model: FakeModelServer
) -> None:
    cut = Reply(chunks=("Why did ", "the"), finish_reason="length")
    joke: Any = [{"role": "user", "content": "Tell me a joke"}]
    model.enqueue(cut)
    answer = client.chat.completions.create(model="support", messages=joke, max_tokens=2)
    assert (answer.choices[0].message.content, answer.choices[0].finish_reason) == (
        cut.text,
        "length",
    )
    model.enqueue(cut)
    chunks = list(
        client.chat.completions.create(model="support", messages=joke, max_tokens=2, stream=True)
    )
    assert [c.choices[0].finish_reason for c in chunks] == [None, None, None, "length"]
    model.enqueue(Reply(chunks=("A whole joke",)))
    whole = client.chat.completions.create(model="support", messages=joke)
    assert whole.choices[0].finish_reason == "stop"


def test_models_are_the_definitions_the_token_may_use(live: OpenAILive) -> None:
    with openai.OpenAI(base_url=live.base_url, api_key=TOKEN, max_retries=0) as sdk:
        assert sorted(m.id for m in sdk.models.list()) == ["coffee", "orders", "support"]
        assert sdk.models.retrieve("orders").owned_by == "agentskit-chat"
    with openai.OpenAI(base_url=live.base_url, api_key=OTHER_TOKEN, max_retries=0) as sdk:
        assert [m.id for m in sdk.models.list()] == ["support"]
        with pytest.raises(openai.NotFoundError) as refused:
            sdk.models.retrieve("orders")
        assert refused.value.code == "model_not_found"


def test_a_stateless_completion_leaves_nothing_in_the_store(
    client: openai.OpenAI, model: FakeModelServer, live: OpenAILive
) -> None:
    model.enqueue(JOKE)
    answers = [
        client.chat.completions.with_raw_response.create(
            model="support", messages=[{"role": "user", "content": text}], stream=stream
        )
        for text, stream in (("/start", False), ("Tell me a joke", True), ("/start", True))
    ]
    assert [a.headers["x-agentskit-history"] for a in answers] == ["stateless"] * 3
    assert "x-agentskit-session-id" not in answers[0].headers
    first: Any = answers[0].parse()
    assert first.choices[0].message.content == "What is your name?"
    streamed: Any = answers[1].parse()
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == JOKE.text
    started: Any = answers[2].parse()
    assert "".join(c.choices[0].delta.content or "" for c in started) == "What is your name?"
    for table in ("sessions", "messages", "turn_events", "turn_signals"):
        assert live.rows(table) == 0, table


def _conversation(client: openai.OpenAI, messages: list[Any], **headers: str) -> Any:
    return client.chat.completions.with_raw_response.create(
        model="support", messages=messages, extra_headers=headers
    )


def test_a_client_held_conversation_keeps_its_state_and_replays_a_retry(
    client: openai.OpenAI, model: FakeModelServer, live: OpenAILive
) -> None:
    chat = {"X-AgentsKit-Conversation": "chat-1"}
    start = [{"role": "user", "content": "/start"}]
    first = _conversation(client, start, **chat)
    assert first.headers["x-agentskit-history"] == "client"
    assert first.headers["x-agentskit-session-id"] == "chat-1"
    history = [
        *start,
        {"role": "assistant", "content": first.parse().choices[0].message.content},
        {"role": "user", "content": "/name Ada"},
    ]
    keyed = {**chat, "Idempotency-Key": "turn-name-ada"}
    named = _conversation(client, history, **keyed)
    assert named.parse().choices[0].message.content == "Welcome, Ada."
    decision = named.http_response.json()["agentskit"]
    assert (decision["from"], decision["to"], decision["turn_id"]) == (
        "collecting",
        "complete",
        "turn-name-ada",
    )
    again = _conversation(client, history, **keyed)  # the SDK's retry of the same request
    assert again.parse().choices[0].message.content == "Welcome, Ada."
    assert again.http_response.json()["agentskit"]["turn_id"] == "turn-name-ada"
    regenerated = _conversation(client, history, **chat)  # the same history, a new turn
    assert regenerated.parse().choices[0].message.content == "Welcome, Ada."
    assert regenerated.headers["x-agentskit-replayed"] == "true"
    assert regenerated.headers["x-agentskit-to-state"] == "complete"
    assert model.requests == []


def test_a_retry_after_the_event_log_is_gone_still_gets_the_whole_answer(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    live = start(launch, model, tmp_path)
    chat = {"X-AgentsKit-Conversation": "chat-2", "Idempotency-Key": "turn-start"}
    messages = [{"role": "user", "content": "/start"}]
    with openai.OpenAI(base_url=live.base_url, api_key=TOKEN, max_retries=0) as sdk:
        assert _conversation(sdk, messages, **chat).parse().choices[0].message.content
    live.server.send(signal.SIGTERM)
    assert live.server.wait() == 0
    # The turn's events stay in the store for a minute after its end (any process would
    # stream them as they were): past that minute, as if, only its record is left.
    with sqlite3.connect(live.state / "sessions.db") as db:
        db.execute("DELETE FROM turn_events")
    restarted = start(launch, model, tmp_path, reuse=True)  # a new process: no event log
    with openai.OpenAI(base_url=restarted.base_url, api_key=TOKEN, max_retries=0) as sdk:
        again = _conversation(sdk, messages, **chat)
    assert again.parse().choices[0].message.content == "What is your name?"
    assert again.headers["x-agentskit-replayed"] == "true"
    assert again.headers["x-agentskit-turn-id"] == "turn-start"


def test_a_request_that_does_not_continue_the_conversation_leaves_it_alone(
    client: openai.OpenAI, model: FakeModelServer
) -> None:
    chat = {"X-OpenWebUI-Chat-Id": "chat-3"}
    start = [{"role": "user", "content": "/start"}]
    assert _conversation(client, start, **chat).headers["x-agentskit-to-state"] == "collecting"
    model.enqueue(Reply(chunks=("A title",)))
    title = _conversation(client, [{"role": "user", "content": "Title this chat"}], **chat)
    assert title.headers["x-agentskit-history"] == "stateless"
    assert title.parse().choices[0].message.content == "A title"
    history = [*start, {"role": "assistant", "content": "What is your name?"}]
    named = _conversation(client, [*history, {"role": "user", "content": "/name Bo"}], **chat)
    assert named.headers["x-agentskit-history"] == "client"
    assert named.parse().choices[0].message.content == "Welcome, Bo."


def test_a_session_header_submits_the_last_user_message(
    client: openai.OpenAI, live: OpenAILive, model: FakeModelServer
) -> None:
    session = asyncio.run(_create(live))
    model.enqueue(JOKE)
    answer = _conversation(
        client,
        [{"role": "user", "content": "/start"}, {"role": "user", "content": "Tell me a joke"}],
        **{"X-AgentsKit-Session": session},
    )
    assert answer.headers["x-agentskit-history"] == "server"
    assert answer.parse().choices[0].message.content == JOKE.text
    assert asyncio.run(_messages(live, session)) == [
        ("user", "Tell me a joke"),
        ("assistant", JOKE.text),
    ]


async def _create(live: OpenAILive) -> str:
    async with ChatClient(live.server.target, token=TOKEN, timeout=30) as chat:
        return (await chat.create_session("support")).session_id


async def _messages(live: OpenAILive, session_id: str) -> list[tuple[str, str]]:
    async with ChatClient(live.server.target, token=TOKEN, timeout=30) as chat:
        history = await chat.get_session(session_id)
    return [(m.role, m.content) for m in history.messages]


def test_a_keyed_agentic_retry_is_answered_from_the_turn_not_the_model(
    client: openai.OpenAI, model: FakeModelServer
) -> None:
    model.enqueue(JOKE)
    keyed = {"X-AgentsKit-Conversation": "chat-4", "Idempotency-Key": "joke-1"}
    messages: Any = [{"role": "user", "content": "Tell me a joke"}]
    first = _conversation(client, messages, **keyed)
    again: Any = client.chat.completions.create(
        model="support", messages=messages, stream=True, extra_headers=keyed
    )
    assert first.parse().choices[0].message.content == JOKE.text
    assert "".join(c.choices[0].delta.content or "" for c in again if c.choices) == JOKE.text
    assert len(model.requests) == 1


def test_the_sdk_retries_a_busy_conversation_and_gets_the_whole_answer(
    live: OpenAILive, model: FakeModelServer
) -> None:
    statuses: list[int] = []
    hooks = {"response": [lambda response: statuses.append(response.status_code)]}
    chat = {"X-AgentsKit-Conversation": "chat-5"}
    model.enqueue(Reply(chunks=("one ", "two"), pause_after=1))
    with (
        httpx.Client(event_hooks=hooks, timeout=60) as http,
        openai.OpenAI(
            base_url=live.base_url, api_key=TOKEN, max_retries=8, http_client=http
        ) as sdk,
        ThreadPoolExecutor(1) as pool,
    ):
        running = sdk.chat.completions.create(
            model="support",
            messages=[{"role": "user", "content": "Tell me a joke"}],
            stream=True,
            extra_headers=chat,
        )
        pieces = iter(running)
        next(pieces)  # the turn holds the conversation now
        keyed = {**chat, "Idempotency-Key": "start-while-busy"}
        history = [
            {"role": "user", "content": "Tell me a joke"},
            {"role": "assistant", "content": "(not yet answered)"},
            {"role": "user", "content": "/start"},
        ]
        retried = pool.submit(_conversation, sdk, history, **keyed)
        deadline = time.monotonic() + 30
        while 409 not in statuses and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 409 in statuses
        model.resume()
        assert "".join(c.choices[0].delta.content or "" for c in pieces if c.choices) == "one two"
        answer = retried.result(timeout=60)
    assert answer.parse().choices[0].message.content == "What is your name?"
    assert int(answer.http_request.headers["x-stainless-retry-count"]) >= 1


def test_the_sampling_caps_come_from_serve_flags(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    live = start(
        launch, model, tmp_path, "--sampling-max-tokens", "50", "--sampling-max-temperature", "0.5"
    )
    model.enqueue(JOKE)
    with openai.OpenAI(base_url=live.base_url, api_key=TOKEN, max_retries=0) as sdk:
        sdk.chat.completions.create(
            model="support",
            messages=[{"role": "user", "content": "Tell me a joke"}],
            temperature=1.5,
            max_completion_tokens=10_000,
            seed=3,
        )
        sdk.chat.completions.create(  # ignored by a deterministic turn
            model="support", messages=[{"role": "user", "content": "/start"}], temperature=1.5
        )
    (sent,) = model.requests
    assert (sent.body["temperature"], sent.body["max_tokens"], sent.body["seed"]) == (0.5, 50, 3)
    refused = run_cli("serve", "--state-dir", str(tmp_path / "x"), "--sampling-max-tokens", "0")
    assert refused.returncode == 2
    assert "sampling caps" in refused.stderr
