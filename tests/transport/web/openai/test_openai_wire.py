"""Reading OpenAI chat completions requests, and naming client-held messages: what is taken,
what is refused (naming the parameter, never repeating content), and stable message ids."""

from __future__ import annotations

from typing import Any

import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.models import Sampling
from agentskit_chat.transport.web.boundary.fronts import FrontError
from agentskit_chat.transport.web.openai._history import continues, message_ids
from agentskit_chat.transport.web.openai._wire import WireMessage, error_object, parse_request

CANARY = "cnry-71c3-openai-wire"


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "support", "messages": [{"role": "user", "content": CANARY}], **extra}


def test_a_request_is_read_with_its_history_and_sampling() -> None:
    request = parse_request(
        body(
            messages=[
                {"role": "developer", "content": "Be brief."},
                {"role": "assistant", "content": None},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
            ],
            stream=True,
            stream_options={"include_usage": True},
            temperature=0,
            max_completion_tokens=5,
            max_tokens=99,
            stop="END",
            user="someone",
            n=1,
            tools=[],
        )
    )
    assert [(m.role, m.text) for m in request.messages] == [
        ("system", "Be brief."),
        ("assistant", ""),
        ("user", "ab"),
    ]
    assert (request.stream, request.include_usage) == (True, True)
    assert request.sampling == Sampling(temperature=0.0, max_tokens=5, stop=("END",))


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"model": ""}, "model"),
        ({"messages": []}, "messages"),
        ({"messages": [CANARY]}, "messages[0]"),
        ({"messages": [{"role": "narrator", "content": CANARY}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "messages[0].content[0]",
        ),
        (
            {"messages": [{"role": "assistant", "content": CANARY, "tool_calls": [{"id": "x"}]}]},
            "messages[0].tool_calls[0]",
        ),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"top_logprobs": 2}, "logprobs"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"stream": "yes"}, "stream"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
        ({"top_p": 1.5}, "top_p"),
        ({"temperature": float("nan")}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_completion_tokens": True}, "max_completion_tokens"),
        ({"seed": 1.5}, "seed"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"presence_penalty": -3}, "presence_penalty"),
        ({"messages": [{"role": ["user"], "content": CANARY}]}, "messages[0].role"),
        ({"messages": [{"role": {"user": 1}, "content": CANARY}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": CANARY + "\ud800"}]}, "messages[0].content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]},
            "messages[0].content[0].text",
        ),
        ({"model": "support\ud800"}, "model"),
        ({"stop": ["ok", "\ud800"]}, "stop[1]"),
        (
            {"messages": [{"role": "user", "content": [{"type": ["text"]}]}]},
            "messages[0].content[0]",
        ),
        ({"n": True}, "n"),
        ({"n": 1.0}, "n"),
        (
            {"stream": True, "stream_options": {"include_usage": "yes"}},
            "stream_options.include_usage",
        ),
        ({"stream": True, "stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
        ({"seed": 2**63}, "seed"),
        ({"seed": -(2**63) - 1}, "seed"),
    ],
)
def test_a_bad_or_unsupported_parameter_is_named_not_repeated(
    extra: dict[str, Any], param: str
) -> None:
    with pytest.raises(FrontError) as refused:
        parse_request(body(**extra))
    error = error_object(refused.value)
    assert (error["param"], error["type"]) == (param, "invalid_request_error")
    assert refused.value.status == 400
    assert CANARY not in str(error)


def test_a_seed_is_taken_across_the_int64_range() -> None:
    for seed in (-(2**63), 2**63 - 1):
        assert parse_request(body(seed=seed)).sampling.seed == seed


class Namer:
    def content_name(self, text: str) -> str:
        return format(abs(hash(("key", text))), "032x")


def wire(*pairs: tuple[str, str]) -> tuple[WireMessage, ...]:
    return tuple(WireMessage(role, text) for role, text in pairs)


def test_message_ids_follow_position_role_and_content() -> None:
    history = wire(("system", "s"), ("user", "/start"), ("assistant", "What?"), ("user", "/name A"))
    ids = message_ids(Namer(), history)
    assert ids == message_ids(Namer(), history)
    assert len(set(ids)) == 4
    assert [i.split(".")[:2] for i in ids] == [["m0", "s"], ["m1", "u"], ["m2", "a"], ["m3", "u"]]
    edited = message_ids(Namer(), (*history[:3], WireMessage("user", "/name B")))
    assert edited[:3] == ids[:3]
    assert edited[3] != ids[3]
    assert all(CANARY not in i for i in message_ids(Namer(), wire(("user", CANARY))))


def test_tool_calls_and_results_are_part_of_a_message_id() -> None:
    call = pb.ToolCall(id="c1", name="weather", arguments='{"city":"Paris"}')
    asked = WireMessage("assistant", "", (call,))
    other = WireMessage("assistant", "", (pb.ToolCall(id="c1", name="weather", arguments="{}"),))
    answered = WireMessage("tool", "sunny", answers="c1")
    ids = message_ids(Namer(), (asked, answered))
    assert message_ids(Namer(), (other, WireMessage("tool", "sunny", answers="c2"))) != ids
    assert message_ids(Namer(), wire(("assistant", ""))) != ids[:1]


def test_tools_are_read_in_the_contract_shape() -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "weather", "parameters": {"type": "object"}, "strict": True},
        }
    ]
    request = parse_request(
        body(
            messages=[
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "weather", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": CANARY},
            ],
            tools=tools,
            tool_choice={"type": "function", "function": {"name": "weather"}},
            parallel_tool_calls=False,
        )
    )
    assert [t.name for t in request.tools.tools] == ["weather"]
    assert request.tools.tools[0].parameters_json == '{"type":"object"}'
    assert (request.tools.choice, request.tools.parallel) == ("weather", False)
    assert [m.answers for m in request.results()] == ["c1"]
    assert [c.id for c in request.messages[1].calls] == ["c1"]


def test_a_history_continues_a_conversation_while_it_keeps_one_of_its_turns() -> None:
    assert continues([], ["m0.u.x"])
    assert continues(["m0.u.x", "m2.u.y"], ["m0.u.x", "m1.a.z", "m2.u.w"])
    assert not continues(["m0.u.x"], ["m0.u.title"])
