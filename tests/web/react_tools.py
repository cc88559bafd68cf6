"""The chats of the React renderer's tool tests (see `tool_chats`), served with
`--definitions-module` on the fake model at `AGENTSKIT_REACT_TOOLS_MODEL` (set by
tests/web/test_react.py)."""

from __future__ import annotations

from typing import Final

from agentskit_chat.conversation import ChatDefinition

from .tool_chats import APPROVED_TOOL, tool_chats

MODEL_ENV: Final = "AGENTSKIT_REACT_TOOLS_MODEL"
TOOLS: Final = "react-tools"
APPROVAL: Final = "react-approval"

__all__ = ["APPROVAL", "APPROVED_TOOL", "MODEL_ENV", "TOOLS", "definitions"]


def definitions() -> list[ChatDefinition]:
    """The two chats, on the model the environment names."""
    return tool_chats("react", MODEL_ENV)
