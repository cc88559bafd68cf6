"""Request limits and turn timing, with the checks that enforce them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from agentskit_chat.conversation import Message
from agentskit_chat.models import SamplingCaps

from ._errors import invalid, limit_exceeded

_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]*")
MAX_RESPONSE_BYTES: Final = 4 * 1024 * 1024
"""The default receive limit of stock gRPC clients: no response may be larger."""
MESSAGE_OVERHEAD: Final = 64
"""Bytes a history message adds to a response besides its content and ids."""
RESPONSE_OVERHEAD: Final = 64 * 1024
"""Bytes a response holds besides its messages: session, snapshot, turn fields."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request may carry and how long one turn may run."""

    max_input_bytes: int = 32 * 1024
    """UTF-8 size of one message's content."""
    max_history_messages: int = 1_000
    """Messages retained in one history, after the operation."""
    max_history_bytes: int = 2 * 1024 * 1024
    """UTF-8 size of all message contents of one dispatched history."""
    max_id_length: int = 128
    max_output_bytes: int = 1024 * 1024
    """UTF-8 size of one answer, model output or route response; past it the turn fails
    with `output_limit` and nothing is committed."""
    turn_timeout: float = 60.0
    """Seconds a turn may run, model stream included."""
    lease_ttl: float = 75.0
    """Seconds a turn's lease lasts; longer than `turn_timeout` so a live turn keeps it."""
    sampling_caps: SamplingCaps = field(default_factory=SamplingCaps)
    """Bounds on the sampling settings a caller may ask of a model."""
    max_tools: int = 64
    """Tools one turn may declare."""
    max_tool_schema_bytes: int = 16 * 1024
    """UTF-8 size of one declared tool's description and parameters schema together."""
    max_tool_calls: int = 16
    """Tool calls one answer may make; past it the turn fails with `tool_limit`."""
    max_tool_arguments_bytes: int = 64 * 1024
    """UTF-8 size of one tool call's arguments; past it the turn fails with `tool_limit`."""
    max_tool_rounds: int = 8
    """Rounds of server tool calls one turn may run before the model must answer; past it
    the turn fails with `tool_rounds`."""

    def __post_init__(self) -> None:
        if self.turn_timeout <= 0 or self.lease_ttl <= self.turn_timeout:
            raise ValueError("lease_ttl must exceed a positive turn_timeout")
        sizes = (
            self.max_input_bytes,
            self.max_history_messages,
            self.max_history_bytes,
            self.max_id_length,
            self.max_output_bytes,
            self.max_tools,
            self.max_tool_schema_bytes,
            self.max_tool_calls,
            self.max_tool_arguments_bytes,
            self.max_tool_rounds,
        )
        if min(sizes) < 1:
            raise ValueError("every size limit must be at least 1")
        if self.largest_response() > MAX_RESPONSE_BYTES:
            raise ValueError(
                "the history and output limits would let a response exceed "
                f"{MAX_RESPONSE_BYTES} bytes, the receive limit of stock gRPC clients"
            )

    def largest_response(self) -> int:
        """An upper bound of any response's size: a server-held history holds at most
        `max_history_bytes` before a turn plus one answer of `max_output_bytes`."""
        per_message = 3 * self.max_id_length + MESSAGE_OVERHEAD
        return (
            self.max_history_bytes
            + self.max_output_bytes
            + self.max_history_messages * per_message
            + RESPONSE_OVERHEAD
        )

    def check_id(self, field: str, value: str) -> str:
        """`value` if it is a well-formed identifier."""
        if len(value) > self.max_id_length or _ID.fullmatch(value) is None:
            raise invalid(
                field,
                f"{field} must be 1-{self.max_id_length} characters of letters, digits "
                "and . _ : - starting with a letter or digit",
            )
        return value

    def check_text(self, field: str, content: str) -> str:
        """`content` if it holds more than whitespace and fits `max_input_bytes`."""
        if not content or content.isspace():
            raise invalid(field, f"{field} must not be empty or only whitespace")
        return self.check_content(field, content)

    def check_content(self, field: str, content: str) -> str:
        """`content` if it fits `max_input_bytes`."""
        if len(content) * 4 > self.max_input_bytes and (_utf8_size(content) > self.max_input_bytes):
            raise limit_exceeded(
                "input_bytes",
                self.max_input_bytes,
                f"{field} is larger than {self.max_input_bytes} bytes",
            )
        return content

    def check_history_length(self, count: int) -> None:
        """Raise when a history of `count` messages is longer than allowed."""
        if count > self.max_history_messages:
            raise limit_exceeded(
                "history_messages",
                self.max_history_messages,
                f"the history would hold more than {self.max_history_messages} messages",
            )

    def check_dispatch(self, messages: Sequence[Message]) -> None:
        """Raise when a client-held history is malformed or too large."""
        self.check_history_length(len(messages))
        seen: set[str] = set()
        for index, message in enumerate(messages):
            field = f"dispatch.messages[{index}].id"
            self.check_id(field, message.id)
            if message.id in seen:
                raise invalid(field, f"{field} repeats an earlier message id")
            seen.add(message.id)
            self.check_content(f"dispatch.messages[{index}].content", message.content)
        self.check_history_bytes(messages)

    def check_history_bytes(self, messages: Sequence[Message]) -> None:
        """Raise when the contents of `messages` are larger than `max_history_bytes`."""
        contents = [m.content for m in messages]
        if sum(map(len, contents)) * 4 > self.max_history_bytes and (
            sum(map(_utf8_size, contents)) > self.max_history_bytes
        ):
            raise limit_exceeded(
                "history_bytes",
                self.max_history_bytes,
                f"the history would be larger than {self.max_history_bytes} bytes",
            )


def utf8_size(text: str) -> int:
    """The UTF-8 size of `text` (lone surrogates count as three bytes)."""
    return _utf8_size(text)


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))
