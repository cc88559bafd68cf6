"""The OpenAI-compatible front through a live `serve`, driven by the official Python SDK
unchanged: deterministic and agentic turns, streamed and not, the decision read from the
raw response, a client-held conversation, refusals in OpenAI's shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from tests.cli.conftest import Launcher
from tests.cli.conftest import launch as launch
from tests.transport.web.openai_live import TOKEN, OpenAILive, start

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
