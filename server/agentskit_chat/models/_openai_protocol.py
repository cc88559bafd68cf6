"""Chat Completions wire format: the request body, stream chunks and failures as ModelError.

Error messages are fixed text: never the upstream body, a URL, a key or any content.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, Final, TypeVar

import httpx

from agentskit_chat.conversation import Message

from ._openai_settings import OpenAISettings
from ._openai_tools import ToolCallError, ToolCallState, tool_fields, wire_messages
from ._port import (
    NO_SAMPLING,
    NO_TOOLS,
    FinishChunk,
    ModelChunk,
    ModelError,
    ResponseChunk,
    Sampling,
    TextChunk,
    ToolOptions,
    UsageChunk,
)

DONE: Final = "[DONE]"

UNAVAILABLE: Final = "model_unavailable"
SERVER_ERROR: Final = "model_server_error"
RATE_LIMITED: Final = "model_rate_limited"
REJECTED: Final = "model_rejected"
UNAUTHORIZED: Final = "model_unauthorized"
NOT_FOUND: Final = "model_not_found"
TIMEOUT: Final = "model_timeout"
PROTOCOL_ERROR: Final = "model_protocol_error"
CREDENTIALS_MISSING: Final = "model_credentials_missing"
CREDENTIALS_INVALID: Final = "model_credentials_invalid"
FAILED: Final = "model_failed"


class AttemptError(Exception):
    """A failed attempt: the error to report and, when the upstream said, when to retry."""

    def __init__(self, error: ModelError, retry_after: float | None = None) -> None:
        super().__init__(error.code)
        self.error = error
        self.retry_after = retry_after


def fail(code: str, message: str, *, retryable: bool) -> AttemptError:
    """An AttemptError without a retry hint."""
    return AttemptError(ModelError(code, message, retryable=retryable))


def request_body(
    settings: OpenAISettings,
    messages: Sequence[Message],
    sampling: Sampling = NO_SAMPLING,
    tools: ToolOptions = NO_TOOLS,
) -> bytes:
    """The JSON body of a streaming Chat Completions request; the caller's `sampling`
    may lower the definition's temperature and token limit, never raise them. Declared
    `tools` add `tools`, `tool_choice` and `parallel_tool_calls` (see tool_fields)."""
    wire: list[dict[str, Any]] = []
    if settings.system_prompt:
        wire.append({"role": "system", "content": settings.system_prompt})
    wire.extend(wire_messages(messages))
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": wire,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    temperature = _lower(settings.temperature, sampling.temperature)
    if temperature is not None:
        body["temperature"] = temperature
    max_tokens = _lower(settings.max_tokens, sampling.max_tokens)
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    for name in ("top_p", "presence_penalty", "frequency_penalty", "seed"):
        value = getattr(sampling, name)
        if value is not None:
            body[name] = value
    if sampling.stop:
        body["stop"] = list(sampling.stop)
    body.update(tool_fields(tools))
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


_Number = TypeVar("_Number", int, float)


def _lower(configured: _Number | None, asked: _Number | None) -> _Number | None:
    """The lower of what the definition configured and what the caller asked, when set."""
    if configured is None:
        return asked
    return configured if asked is None else min(configured, asked)


def parse_chunk(
    data: str, *, describe: bool = False, calls: ToolCallState | None = None
) -> list[ModelChunk]:
    """The model chunks of one `chat.completion.chunk` event; with `describe`, first a
    ResponseChunk naming the completion and its model, when the event names either.

    `calls` follows the answer's tool calls from one event to the next: pass the same one
    for every event of an answer (without it, the event is read on its own).
    """
    try:
        decoded = json.loads(data)
    except ValueError:
        raise _protocol("the model sent a chunk that is not JSON") from None
    if not isinstance(decoded, dict):
        raise _protocol("the model sent a chunk that is not a JSON object")
    if decoded.get("error") is not None:
        raise fail(SERVER_ERROR, "the model reported an error in its stream", retryable=True)
    found: list[ModelChunk] = []
    if describe:
        response_id, model = decoded.get("id"), decoded.get("model")
        if isinstance(response_id, str) or isinstance(model, str):
            found.append(
                ResponseChunk(
                    response_id if isinstance(response_id, str) and response_id else None,
                    model if isinstance(model, str) and model else None,
                )
            )
    choices = decoded.get("choices") or []
    if not isinstance(choices, list):
        raise _protocol("the model sent a chunk with malformed choices")
    if choices:
        found.extend(_choice(choices[0], ToolCallState() if calls is None else calls))
    usage = decoded.get("usage")
    if usage is not None:
        found.append(_usage(usage))
    return found


def _choice(choice: object, calls: ToolCallState) -> list[ModelChunk]:
    if not isinstance(choice, dict):
        raise _protocol("the model sent a chunk with a malformed choice")
    found: list[ModelChunk] = []
    delta = choice.get("delta") or {}
    if not isinstance(delta, dict):
        raise _protocol("the model sent a chunk with a malformed delta")
    content = delta.get("content")
    if content is not None and not isinstance(content, str):
        raise _protocol("the model sent a chunk with malformed content")
    if content:
        found.append(TextChunk(content))
    tool_calls = delta.get("tool_calls")
    if tool_calls is not None:
        try:
            found.extend(calls.delta(tool_calls))
        except ToolCallError as exc:
            raise _protocol(str(exc)) from None
    reason = choice.get("finish_reason")
    if reason is not None:
        if not isinstance(reason, str):
            raise _protocol("the model sent a malformed finish reason")
        found.append(FinishChunk(reason))
    return found


def _usage(usage: object) -> UsageChunk:
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int) and min(prompt, completion) >= 0:
            return UsageChunk(prompt, completion)
    raise _protocol("the model sent malformed token usage")


def _protocol(message: str) -> AttemptError:
    return fail(PROTOCOL_ERROR, message, retryable=False)


def check_response(response: httpx.Response) -> None:
    """Raise the AttemptError of a response that does not start an event stream."""
    status = response.status_code
    if 200 <= status < 300:
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "text/event-stream":
            raise _protocol("the model endpoint did not answer with an event stream")
        return
    retry_after = _retry_after(response.headers)
    if status == 429:
        error = ModelError(RATE_LIMITED, "the model is rate limited", retryable=True)
    elif status == 408:
        error = ModelError(TIMEOUT, "the model endpoint timed out", retryable=True)
    elif status >= 500:
        error = ModelError(SERVER_ERROR, "the model server failed", retryable=True)
    elif status in (401, 403):
        error = ModelError(
            UNAUTHORIZED, "the model endpoint refused the credentials", retryable=False
        )
    elif status == 404:
        error = ModelError(NOT_FOUND, "the model endpoint or model was not found", retryable=False)
    elif status >= 400:
        error = ModelError(REJECTED, "the model endpoint rejected the request", retryable=False)
    else:
        error = ModelError(
            PROTOCOL_ERROR, "the model endpoint answered with an unexpected status", retryable=False
        )
    raise AttemptError(error, retry_after if error.retryable else None)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from the Retry-After header; None when absent or unusable.

    A number of seconds counts when finite and not negative; an HTTP date in the past means
    now, and one without a usable zone (`-0000` or none) is read as UTC.
    """
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return _until(value)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _until(value: str) -> float | None:
    """Seconds from now to the HTTP date `value`, at least 0; None when it is not a date."""
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(when.timestamp() - time.time(), 0.0)


def transport_failure(exc: httpx.HTTPError, *, answering: bool) -> AttemptError:
    """The AttemptError of an httpx error; `answering` once the response headers arrived."""
    if isinstance(exc, httpx.TimeoutException):
        return fail(TIMEOUT, "the model did not answer in time", retryable=True)
    if isinstance(exc, httpx.ConnectError):
        return fail(UNAVAILABLE, "the model endpoint is unreachable", retryable=True)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.NetworkError):
        if answering:
            return fail(PROTOCOL_ERROR, "the model stream ended early", retryable=True)
        return fail(UNAVAILABLE, "the model endpoint closed the connection", retryable=True)
    return fail(FAILED, "the model call failed", retryable=False)
