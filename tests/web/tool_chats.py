"""The two chats of a renderer's tool tests, served with `--definitions-module` through a
module of each renderer's that names its prefix and the environment variable holding the
fake model's base URL: `{prefix}-tools` lets the model call the page's tools freely,
`{prefix}-approval` marks the page's `local_time` for approval, so that a call of it waits
for the user's decision before the page runs it."""

from __future__ import annotations

import os
from typing import Any, Final

from agentskit_chat.conversation import ChatDefinition, define_chat

APPROVED_TOOL: Final = "local_time"


def tool_chats(prefix: str, model_env: str) -> list[ChatDefinition]:
    """The two chats, on the model `model_env` names."""
    model = {"adapter": "openai", "base_url": os.environ[model_env], "model": f"{prefix}-tools"}

    def chat(suffix: str, description: str, tools: dict[str, dict[str, bool]] | None) -> Any:
        return define_chat(
            id=f"{prefix}-{suffix}",
            description=description,
            model=model,
            conversation={"initial": "idle", "states": {"idle": {}}, "routes": []},
            tools=tools,
        )

    return [
        chat("tools", "The model answers, and may call the page's tools.", None),
        chat(
            "approval",
            "The model answers; a call of local_time waits for your approval.",
            {APPROVED_TOOL: {"approval": True}},
        ),
    ]
