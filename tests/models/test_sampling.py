"""Sampling settings of the model port: the server's caps, and the `openai` adapter sending
the caller's settings over the definition's, to the fake model over real HTTP."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

import pytest

from agentskit_chat.conversation import Message, Role
from agentskit_chat.fakemodel import FakeModelServer
from agentskit_chat.models import NO_SAMPLING, ModelRequest, OpenAIAdapter, Sampling, SamplingCaps

HISTORY = (Message("u1", Role.USER, "Hello"),)


def sent(server: FakeModelServer, sampling: Sampling, **model: Any) -> dict[str, Any]:
    settings = {"adapter": "openai", "base_url": server.url, "model": "m", **model}

    async def run() -> None:
        adapter = OpenAIAdapter(settings)
        try:
            request = ModelRequest("chat", "s1", HISTORY, settings, sampling)
            async with aclosing(adapter.stream(request)) as chunks:
                async for _ in chunks:
                    pass
        finally:
            await adapter.close()

    asyncio.run(run())
    return dict(server.requests[-1].body)


def test_the_callers_settings_override_the_definitions(server: FakeModelServer) -> None:
    sampling = Sampling(
        temperature=0.2,
        top_p=0.9,
        max_tokens=12,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        seed=7,
        stop=("END",),
    )
    body = sent(server, sampling, temperature=1.0, max_tokens=500)
    assert {k: body[k] for k in sampling.__slots__} == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 12,
        "presence_penalty": 0.5,
        "frequency_penalty": -0.5,
        "seed": 7,
        "stop": ["END"],
    }


def test_without_caller_settings_the_definitions_apply(server: FakeModelServer) -> None:
    body = sent(server, NO_SAMPLING, temperature=1.0, max_tokens=500)
    assert (body["temperature"], body["max_tokens"]) == (1.0, 500)
    assert not {"top_p", "seed", "stop", "presence_penalty", "frequency_penalty"} & set(body)


def test_a_caller_cannot_raise_the_definitions_settings(server: FakeModelServer) -> None:
    body = sent(server, Sampling(temperature=1.5, max_tokens=4000), temperature=0.3, max_tokens=50)
    assert (body["temperature"], body["max_tokens"]) == (0.3, 50)
    body = sent(server, Sampling(temperature=1.5, max_tokens=4000))
    assert (body["temperature"], body["max_tokens"]) == (1.5, 4000)


def test_the_caps_lower_what_is_asked_and_keep_the_rest() -> None:
    caps = SamplingCaps(max_tokens=100, max_temperature=1.0)
    assert caps.cap(None) is NO_SAMPLING
    asked = Sampling(temperature=1.5, max_tokens=1000, top_p=0.5, stop=("x",))
    assert caps.cap(asked) == Sampling(temperature=1.0, max_tokens=100, top_p=0.5, stop=("x",))
    within = Sampling(temperature=0.5, max_tokens=10)
    assert caps.cap(within) is within


@pytest.mark.parametrize(("tokens", "temperature"), [(0, 1.0), (10, -0.1), (10, 2.5)])
def test_caps_out_of_range_are_refused(tokens: int, temperature: float) -> None:
    with pytest.raises(ValueError, match="sampling caps"):
        SamplingCaps(tokens, temperature)


def test_stop_sequences_are_left_out_of_the_repr() -> None:
    assert "secret-stop" not in repr(Sampling(stop=("secret-stop",)))
