"""Client-held OpenAI histories as the service's messages: ids derived, never stored content.

OpenAI messages carry no ids, so each is named by its position, its role and a keyed
digest of its content (`ChatService.content_name`, under the deployment's digest key:
stable across processes and restarts, and revealing nothing of the content): the same
history sent again gets the same ids, so its decisions replay and the state machine never
resets, while a changed message gets a new id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Protocol

from agentskit.chat.v1 import chat_pb2 as pb

from ._wire import WireMessage

ROLES: Final = {
    "system": pb.ROLE_SYSTEM,
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "tool": pb.ROLE_TOOL,
}
NAME_CHARS: Final = 24
SEPARATOR: Final = "\x00"
"""Hex digits of the content digest in an id (96 bits)."""


class Namer(Protocol):
    """Names content by a keyed digest (the service)."""

    def content_name(self, text: str) -> str:
        """Hex digest of `text`."""
        ...


def message_ids(namer: Namer, messages: Sequence[WireMessage]) -> tuple[str, ...]:
    """The id of each message: `m<position>.<role initial>.<digest>`, the digest over its
    role, text, tool calls and the call it answers."""
    return tuple(
        f"m{index}.{message.role[0]}.{namer.content_name(_named(message))[:NAME_CHARS]}"
        for index, message in enumerate(messages)
    )


def _named(message: WireMessage) -> str:
    parts = [message.role, message.text]
    if message.calls or message.answers:  # Plain messages keep the names they always had.
        parts.append(message.answers)
        for call in message.calls:
            parts.extend((call.id, call.name, call.arguments))
    return SEPARATOR.join(parts)


def pb_messages(messages: Sequence[WireMessage], ids: Sequence[str]) -> list[pb.Message]:
    """The messages of a DispatchOperation."""
    return [
        pb.Message(
            id=ident,
            role=ROLES[message.role],
            content=message.text,
            tool_calls=message.calls,
            tool_call_id=message.answers,
        )
        for ident, message in zip(ids, messages, strict=True)
    ]


def continues(retained: Iterable[str], ids: Sequence[str]) -> bool:
    """Whether a history with `ids` continues a conversation whose retained turns resolved
    the user messages `retained`: it does when the conversation has none yet, or when one
    of them is still in the history (a new message, a retry, an edit of a later message).
    A history keeping none of them (a title or follow-up generation request, a new chat
    reusing the id) would discard every decision: it is not this conversation's."""
    known = {ident for ident in retained if ident}
    return not known or not known.isdisjoint(ids)
