"""The served definitions' server tools, started with `serve` and closed at its end."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from agentskit_chat.conversation import ChatDefinition
from agentskit_chat.mcp import ServerTools, ServerToolsError, ToolObserver


async def start_server_tools(
    definitions: Iterable[ChatDefinition], observer: ToolObserver
) -> ServerTools | None:
    """The started server tools of `definitions` (their MCP servers connected, each
    declared tool found); None, with the reason on stderr, when they cannot start."""
    try:
        tools = ServerTools(definitions, observer=observer)
        await tools.start()
    except ServerToolsError as exc:
        print(f"agentskit-chat: {exc}", file=sys.stderr)
        return None
    return tools
