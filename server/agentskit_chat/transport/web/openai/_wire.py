"""OpenAI chat completions on the wire: the request read and checked, errors in OpenAI's
shape, and the completion and its chunks.

Text conversations with tools are served (`_tools`): a request asking for what the service
cannot do (legacy functions, images or audio, `n` > 1, log probabilities, a structured
response format) is refused with 400 naming the parameter, rather than answered as if it
had been honoured.
Unknown parameters are ignored, as chat front ends send many. Messages never appear in
an error: they name the parameter at fault (`messages[2].content`), never its value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.models import Sampling
from agentskit_chat.transport.web.boundary.asgi import Headers
from agentskit_chat.transport.web.boundary.fields import unicode_text
from agentskit_chat.transport.web.boundary.fronts import FrontError, bad_request, json_bytes
from agentskit_chat.transport.web.boundary.tools import NO_TOOLS, TurnTools

from ._tools import answered_call, assistant_calls, calls_object, tool_choice

ROLES: Final = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
"""OpenAI message roles the service takes, and what each is to it."""
UNSUPPORTED: Final = {
    "functions": "functions are not supported: declare them as tools",
    "function_call": "functions are not supported: use tool_choice",
    "audio": "audio is not supported",
    "prediction": "predicted outputs are not supported",
}
"""Parameters refused whenever they are set (not null, not empty)."""
MAX_STOP: Final = 4
ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}
"""OpenAI's error `type` of each status; any other is a `server_error`."""


@dataclass(frozen=True, slots=True)
class WireMessage:
    """One message of a request: its role (system, user, assistant or tool) and text, the
    tool calls of an assistant message, the call a tool message answers."""

    role: str
    text: str = field(repr=False)
    calls: tuple[pb.ToolCall, ...] = field(default=(), repr=False)
    answers: str = ""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A checked chat completions request."""

    model: str
    messages: tuple[WireMessage, ...] = field(repr=False)
    """Oldest first; the last is the user's, or a tool result."""
    stream: bool = False
    include_usage: bool = False
    sampling: Sampling = field(default_factory=Sampling)
    tools: TurnTools = NO_TOOLS

    def results(self) -> tuple[WireMessage, ...]:
        """The tool messages that end the history (empty when a user message ends it)."""
        count = 0
        while count < len(self.messages) and self.messages[-1 - count].role == "tool":
            count += 1
        return self.messages[len(self.messages) - count :]


def parse_request(body: Mapping[str, Any]) -> ChatRequest:
    """The request in `body`; a FrontError (400) names the first parameter at fault."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("model", "model is required: the id of a chat definition")
    unicode_text("model", model)
    for name, message in UNSUPPORTED.items():
        if body.get(name) not in (None, [], {}, "none"):
            raise bad_request(name, message)
    n = body.get("n")
    if n is not None and (type(n) is not int or n != 1):
        raise bad_request("n", "only n = 1 is supported")
    if body.get("logprobs") or body.get("top_logprobs") is not None:
        raise bad_request("logprobs", "logprobs are not supported")
    modalities = body.get("modalities")
    if modalities is not None and modalities != ["text"]:
        raise bad_request("modalities", "only text output is supported")
    response_format = body.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise bad_request("response_format", "only text responses are supported")
    stream = _boolean(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise bad_request("stream_options", "stream_options must be an object")
    include_usage = _boolean(options or {}, "include_usage", "stream_options.include_usage")
    if options and not stream:
        raise bad_request("stream_options", "stream_options needs stream: true")
    tools = tool_choice(body)
    return ChatRequest(
        model, _messages(body.get("messages")), stream, include_usage, _sampling(body), tools
    )


def _boolean(body: Mapping[str, Any], name: str, at: str | None = None) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(at or name, f"{at or name} must be a boolean")
    return value


def _messages(value: object) -> tuple[WireMessage, ...]:
    if not isinstance(value, list) or not value:
        raise bad_request("messages", "messages must be a non-empty array")
    found = []
    for index, message in enumerate(value):
        at = f"messages[{index}]"
        if not isinstance(message, dict):
            raise bad_request(at, f"{at} must be an object")
        role = message.get("role")
        if not isinstance(role, str):
            raise bad_request(f"{at}.role", f"{at}.role must be a string")
        if role == "function" or message.get("function_call"):
            raise bad_request(f"{at}.role", "functions are not supported: use tools")
        if role not in ROLES:
            raise bad_request(
                f"{at}.role", f"{at}.role must be system, developer, user, assistant or tool"
            )
        text = _text(message.get("content"), f"{at}.content")
        calls = assistant_calls(message, at) if role == "assistant" else ()
        if message.get("tool_calls") and role != "assistant":
            raise bad_request(f"{at}.tool_calls", "only assistant messages make tool calls")
        answers = answered_call(message, at) if role == "tool" else ""
        found.append(WireMessage(ROLES[role], text, calls, answers))
    if found[-1].role not in ("user", "tool"):
        raise bad_request(
            f"messages[{len(found) - 1}].role",
            "the last message must be the user's or a tool result",
        )
    return tuple(found)


def _text(content: object, at: str) -> str:
    if isinstance(content, str):
        return unicode_text(at, content)
    if content is None:
        return ""
    if not isinstance(content, list):
        raise bad_request(at, f"{at} must be a string or an array of text parts")
    parts = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("image_url", "input_audio", "file", "image", "audio"):
            raise bad_request(f"{at}[{index}]", "images, audio and files are not supported")
        text = part.get("text") if isinstance(part, dict) else None
        if kind != "text" or not isinstance(text, str):
            raise bad_request(f"{at}[{index}]", f"{at}[{index}] must be a text part")
        parts.append(unicode_text(f"{at}[{index}].text", text))
    return "".join(parts)


def _sampling(body: Mapping[str, Any]) -> Sampling:
    tokens = body.get("max_completion_tokens")
    name = "max_completion_tokens"
    if tokens is None:
        tokens, name = body.get("max_tokens"), "max_tokens"
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (
        not isinstance(stop, list)
        or len(stop) > MAX_STOP
        or not all(isinstance(s, str) and s for s in stop)
    ):
        raise bad_request("stop", f"stop must be a string or up to {MAX_STOP} strings")
    for index, text in enumerate(stop or ()):
        unicode_text(f"stop[{index}]" if isinstance(body.get("stop"), list) else "stop", text)
    return Sampling(
        temperature=_number(body, "temperature", 0, 2),
        top_p=_number(body, "top_p", 0, 1),
        max_tokens=_integer(tokens, name, 1),
        presence_penalty=_number(body, "presence_penalty", -2, 2),
        frequency_penalty=_number(body, "frequency_penalty", -2, 2),
        seed=_integer(body.get("seed"), "seed", -(2**63), 2**63 - 1),
        stop=tuple(stop or ()),
    )


def _number(body: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise bad_request(name, f"{name} must be a number from {low} to {high}")
    return float(value)


def _integer(value: object, name: str, low: int, high: int | None = None) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bounds = f" >= {low}" if high is None else f" from {low} to {high}"
        raise bad_request(name, f"{name} must be an integer{bounds}")
    return value


_CODES: Final = {
    "unauthenticated": "invalid_api_key",
    "definition_not_found": "model_not_found",
}


def error_body(error: FrontError) -> bytes:
    """`{"error": {message, type, param, code}}` of a refusal."""
    return json_bytes({"error": error_object(error)})


def error_object(error: FrontError) -> dict[str, Any]:
    """The `error` object of a refusal (also sent as the last event of a broken stream)."""
    return {
        "message": error.message,
        "type": ERROR_TYPES.get(error.status, "server_error"),
        "param": error.field,
        "code": _CODES.get(code := error.code.removeprefix("error_reason_"), code),
    }


def decision_headers(fields: Mapping[str, Any]) -> Headers:
    """The decision as `X-AgentsKit-*` response headers (empty values left out)."""
    found: Headers = []
    for name, header in HEADER_NAMES.items():
        value = fields.get(name)
        if value is None or value == "":
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        found.append((header, text.encode("latin-1", "replace")))
    return found


HEADER_NAMES: Final = {
    "kind": b"x-agentskit-kind",
    "route": b"x-agentskit-route",
    "from": b"x-agentskit-from-state",
    "to": b"x-agentskit-to-state",
    "replayed": b"x-agentskit-replayed",
    "turn_id": b"x-agentskit-turn-id",
    "session_id": b"x-agentskit-session-id",
    "history": b"x-agentskit-history",
    "revision": b"x-agentskit-revision",
}
"""The response header of each decision field."""


def usage_object(usage: tuple[int, int] | None) -> dict[str, int]:
    """OpenAI's `usage`: zero for a turn no model answered."""
    prompt, completion = usage or (0, 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion(
    ident: str,
    created: int,
    model: str,
    text: str,
    usage: tuple[int, int] | None,
    decision: Mapping[str, Any],
    *,
    finish: str = "stop",
    calls: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """One `chat.completion`, with the decision as the extra `agentskit` object."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["content"] = text or None
        message["tool_calls"] = calls_object(calls)
    return {
        "id": ident,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": usage_object(usage),
        "system_fingerprint": None,
        "agentskit": dict(decision),
    }


def chunk(
    ident: str,
    created: int,
    model: str,
    delta: Mapping[str, Any] | None,
    *,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    include_usage: bool = False,
    decision: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk`; `delta` None makes the usage chunk (no choices)."""
    value: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish}],
    }
    if include_usage:
        value["usage"] = usage
    if decision is not None:
        value["agentskit"] = dict(decision)
    return value
