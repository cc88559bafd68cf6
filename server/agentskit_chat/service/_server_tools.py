"""The server tools port: how the service runs a definition's declared server tools (the
MCP client implements it), and the runner tool routes get from it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Protocol

from agentskit_chat.conversation import ChatDefinition, RouteContext, RouteToolError, RouteTools
from agentskit_chat.models import ToolSpec


class ToolCallOutcome(Protocol):
    """The outcome of one call: the result text, or an error the model may read."""

    @property
    def text(self) -> str: ...

    @property
    def is_error(self) -> bool: ...

    @property
    def error_type(self) -> str | None:
        """What went wrong (`timeout`, `tool_error`, `server_gone`, ...) when `is_error`."""
        ...


class ServerToolPort(Protocol):
    """Runs declared server tools; never raises for a tool's or its server's failure."""

    def specs(self, definition: ChatDefinition) -> tuple[ToolSpec, ...]:
        """What the model is told of `definition`'s server tools."""
        ...

    async def call(
        self,
        name: str,
        arguments_json: str,
        *,
        turn_id: str,
        call_id: str,
        definition: ChatDefinition,
    ) -> ToolCallOutcome:
        """Run `name`, as `definition` declares it, with `arguments_json` (a JSON object)
        within the tool's timeout; `turn_id` and `call_id` reach the tool as its
        idempotency key."""
        ...

    async def attach(self, definition: ChatDefinition) -> None:
        """Make the server tools of `definition` callable when it is not one the port was
        started with (a revision another process published): its servers are connected
        on demand. Never raises for a server's failure (its tools then fail as calls)."""
        ...


ROUTE_CALL_PREFIX = "route-"
"""A tool route's call id is this and the id of the user message it answers."""


def route_tools(port: ServerToolPort, definition: ChatDefinition, turn_id: str) -> RouteTools:
    """The runner of `definition`'s tool routes in turn `turn_id`: a failed call fails the
    route with the outcome's error type (never its text)."""

    async def run(tool: str, arguments: Mapping[str, str], context: RouteContext) -> str:
        call_id = f"{ROUTE_CALL_PREFIX}{context.message_id or ''}"
        outcome = await port.call(
            tool,
            json.dumps(dict(arguments)),
            turn_id=turn_id,
            call_id=call_id,
            definition=definition,
        )
        if outcome.is_error:
            raise RouteToolError(outcome.error_type or "tool_error")
        return outcome.text

    return run
