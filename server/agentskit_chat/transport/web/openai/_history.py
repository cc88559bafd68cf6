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

ROLES: Final = {
    "system": pb.ROLE_SYSTEM,
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
}
NAME_CHARS: Final = 24
SEPARATOR: Final = "\x00"
"""Hex digits of the content digest in an id (96 bits)."""


class Namer(Protocol):
    """Names content by a keyed digest (the service)."""

    def content_name(self, text: str) -> str:
        """Hex digest of `text`."""
        ...


def message_ids(namer: Namer, messages: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The id of each (role, text) message: `m<position>.<role initial>.<digest>`."""
    return tuple(
        f"m{index}.{role[0]}.{namer.content_name(role + SEPARATOR + text)[:NAME_CHARS]}"
        for index, (role, text) in enumerate(messages)
    )


def pb_messages(messages: Sequence[tuple[str, str]], ids: Sequence[str]) -> list[pb.Message]:
    """The messages of a DispatchOperation."""
    return [
        pb.Message(id=ident, role=ROLES[role], content=text)
        for ident, (role, text) in zip(ids, messages, strict=True)
    ]


def continues(retained: Iterable[str], ids: Sequence[str]) -> bool:
    """Whether a history with `ids` continues a conversation whose retained turns resolved
    the user messages `retained`: it does when the conversation has none yet, or when one
    of them is still in the history (a new message, a retry, an edit of a later message).
    A history keeping none of them (a title or follow-up generation request, a new chat
    reusing the id) would discard every decision: it is not this conversation's."""
    known = {ident for ident in retained if ident}
    return not known or not known.isdisjoint(ids)
