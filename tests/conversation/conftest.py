"""Shared fixtures: the seeds' support chat and a message-history helper."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat.conversation import (
    ChatDefinition,
    ChatSession,
    Message,
    Role,
    create_chat_session,
    load_definition,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "definitions"
KEY = b"test-deployment-key-0123456789"


@pytest.fixture
def support() -> ChatDefinition:
    return load_definition(EXAMPLES / "support.yaml")


@pytest.fixture
def session(support: ChatDefinition) -> ChatSession:
    return create_chat_session(support, session_id="s1", digest_key=KEY)


class History:
    """A client-side message list with fresh ids."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._next = 0

    def _id(self, prefix: str) -> str:
        self._next += 1
        return f"{prefix}{self._next}"

    def user(self, content: str) -> list[Message]:
        self.messages.append(Message(self._id("u"), Role.USER, content))
        return list(self.messages)

    def assistant(self, content: str) -> list[Message]:
        self.messages.append(Message(self._id("a"), Role.ASSISTANT, content))
        return list(self.messages)

    def edit(self, message_id: str, content: str) -> list[Message]:
        """Replace a message's content and drop everything after it."""
        index = next(i for i, m in enumerate(self.messages) if m.id == message_id)
        self.messages = [*self.messages[:index], Message(message_id, Role.USER, content)]
        return list(self.messages)

    def truncate(self, count: int) -> list[Message]:
        self.messages = self.messages[:count]
        return list(self.messages)


@pytest.fixture
def history() -> History:
    return History()
