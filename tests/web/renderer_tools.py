"""The chats of the web renderer's tool tests, served with `--definitions-module`.

Both leave every message to the model at `AGENTSKIT_WEB_TOOLS_MODEL` (the fake model's base
URL, set by tests/web/test_renderer_tools.py): `web-tools` lets the model call the page's
tools freely, `web-approval` marks the page's `local_time` for approval, so that a call of
it waits for the user's decision before the page runs it.
"""

from __future__ import annotations

import os
from typing import Final

from agentskit_chat.conversation import ChatDefinition, define_chat

MODEL_ENV: Final = "AGENTSKIT_WEB_TOOLS_MODEL"
TOOLS: Final = "web-tools"
APPROVAL: Final = "web-approval"
APPROVED_TOOL: Final = "local_time"


def _chat(id: str, description: str, tools: dict[str, dict[str, bool]] | None) -> ChatDefinition:
    return define_chat(
        id=id,
        description=description,
        model={"adapter": "openai", "base_url": os.environ[MODEL_ENV], "model": "web-tools"},
        conversation={"initial": "idle", "states": {"idle": {}}, "routes": []},
        tools=tools,
    )


def definitions() -> list[ChatDefinition]:
    """The two chats, on the model the environment names."""
    return [
        _chat(TOOLS, "The model answers, and may call the page's tools.", None),
        _chat(
            APPROVAL,
            "The model answers; a call of local_time waits for your approval.",
            {APPROVED_TOOL: {"approval": True}},
        ),
    ]
