"""The served definitions' server tools: started with `serve`, replaced by a reload that
changes their declarations, closed at the end.

Until a definition declares an MCP server there are none (`current` stays None), so a
`serve` without server tools never loads the MCP SDK (see `agentskit_chat.mcp`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from agentskit_chat import mcp
from agentskit_chat.conversation import ChatDefinition
from agentskit_chat.mcp import UNKNOWN_TOOL, ServerToolsError, ToolObserver, ToolOutcome
from agentskit_chat.models import ToolSpec

if TYPE_CHECKING:
    from agentskit_chat.mcp import ServerTools


class ServedTools:
    """The server tools of the served definitions; `current` is None until a started
    definition declares one."""

    def __init__(self, observer: ToolObserver) -> None:
        self._observer = observer
        self.current: ServerTools | None = None

    async def start(self, definitions: Iterable[ChatDefinition]) -> bool:
        """Connect the servers of `definitions` and check their tools; False, with the
        reason on stderr, when they cannot start."""
        try:
            self.current = await self._started(definitions)
        except ServerToolsError as exc:
            print(f"agentskit-chat: {exc}", file=sys.stderr)
            return False
        return True

    async def prepare(self, definitions: Iterable[ChatDefinition]) -> ServerTools | None:
        """Started server tools for `definitions` when their declarations differ from the
        current ones (None when they are the same); raises ServerToolsError."""
        chosen = list(definitions)
        if self.current is None and not _declares_servers(chosen):
            return None
        candidate = mcp.ServerTools(chosen, observer=self._observer)
        if self.current is not None and candidate.declarations == self.current.declarations:
            return None
        await candidate.start()
        return candidate

    async def adopt(self, tools: ServerTools) -> None:
        """Serve with `tools` from now on, closing the ones they replace."""
        previous, self.current = self.current, tools
        if previous is not None:
            await previous.close()

    def specs(self, definition: ChatDefinition) -> tuple[ToolSpec, ...]:
        """The model-facing specs of `definition`'s server tools (none before `start`)."""
        return () if self.current is None else self.current.specs(definition)

    async def call(
        self,
        name: str,
        arguments_json: str,
        *,
        turn_id: str,
        call_id: str,
        definition: ChatDefinition,
    ) -> ToolOutcome:
        """A call through the current server tools (the service's `ServerToolPort`)."""
        if self.current is None:
            return ToolOutcome.failure(UNKNOWN_TOOL, f"no server tool is named {name!r}")
        return await self.current.call(
            name, arguments_json, turn_id=turn_id, call_id=call_id, definition=definition
        )

    async def attach(self, definition: ChatDefinition) -> None:
        """Connect the servers of `definition`, a revision another process published,
        beside the current ones (again after a reload replaced them)."""
        if self.current is None and definition.server_tools:
            self.current = mcp.ServerTools((), observer=self._observer)
        if self.current is not None:
            await self.current.attach(definition)

    async def close(self) -> None:
        if self.current is not None:
            await self.current.close()

    async def _started(self, definitions: Iterable[ChatDefinition]) -> ServerTools | None:
        chosen = list(definitions)
        if not _declares_servers(chosen):
            return None
        tools = mcp.ServerTools(chosen, observer=self._observer)
        await tools.start()
        return tools


def _declares_servers(definitions: Iterable[ChatDefinition]) -> bool:
    return any(definition.mcp_servers or definition.server_tools for definition in definitions)
