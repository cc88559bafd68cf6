"""Structural checks of decoded definition data, producing a draft for semantic validation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ._definition import DEFAULT_MODEL, ConversationSpec, Route, StateSpec
from ._errors import Diagnostic, ErrorCode
from ._matchers import CommandMatcher, ExactMatcher, Matcher, PatternMatcher
from ._migration import Migration
from ._responses import Response, TemplateResponse, ToolResponse, to_response
from ._revisions import MAX_WEIGHT
from ._server_tools import (
    McpServerSpec,
    ServerToolSpec,
    check_references,
    read_server_tool,
    read_servers,
)
from ._types import to_kind
from ._validation import Draft, MissingMatcher, MissingResponse

_TOP_KEYS = frozenset(
    {
        *("$schema", "id", "revision", "description", "model", "conversation", "tools"),
        *("rollout", "migrations", "mcp_servers"),
    }
)
_MIGRATION_KEYS = frozenset({"from", "states", "routes"})
_TOOL_KEYS = frozenset({"approval", "server", "timeout"})
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a tool name may be, as the service checks the tools a turn declares."""
_CONVERSATION_KEYS = frozenset({"initial", "states", "routes"})
_STATE_KEYS = frozenset({"on", "actions"})
_MATCHER_KEYS = ("command", "exact", "pattern")
_ROUTE_KEYS = frozenset({"id", "event", "states", "kind", "response", "tool", *_MATCHER_KEYS})
_ROUTE_TOOL_KEYS = frozenset({"name", "arguments"})


class Reader:
    """Checks the structure of decoded data and builds a draft with placeholders where it fails."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.diagnostics: list[Diagnostic] = []
        self.failed: set[str] = set()
        self.approvals: frozenset[str] = frozenset()
        """Tools the definition marks as needing approval (set by `draft`)."""
        self.rollout: int | None = None
        """The revision's weight for new sessions (set by `draft`)."""
        self.migrations: dict[int, Migration] = {}
        """How sessions of older revisions move to this one (set by `draft`)."""
        self.mcp_servers: dict[str, McpServerSpec] = {}
        """The MCP servers the definition declares (set by `draft`)."""
        self.server_tools: dict[str, ServerToolSpec] = {}
        """The tools the service runs on those servers (set by `draft`)."""

    def report(self, code: ErrorCode, path: str, message: str, *, suppress: bool = True) -> None:
        """Record a diagnostic; with `suppress`, semantic checks at or below `path` are skipped."""
        self.diagnostics.append(Diagnostic(code, self.file, path, message))
        if suppress:
            self.failed.add(path)

    def mapping(
        self,
        value: Any,
        path: str,
        allowed: frozenset[str] | None,
        required: tuple[str, ...] = (),
    ) -> dict[str, Any] | None:
        """The mapping at `path` with unknown keys reported; None when it is not a mapping."""
        if not isinstance(value, Mapping):
            self.report(ErrorCode.INVALID_TYPE, path or "(root)", "expected a mapping")
            return None
        result: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.report(ErrorCode.INVALID_TYPE, _join(path, str(key)), "keys must be strings")
            elif allowed is not None and key not in allowed:
                self.report(ErrorCode.UNKNOWN_KEY, _join(path, key), f"unknown key {key!r}")
            else:
                result[key] = item
        for key in required:
            if key not in result and _join(path, key) not in self.failed:
                self.report(
                    ErrorCode.MISSING_KEY, _join(path, key), f"missing required key {key!r}"
                )
        return result

    def string(self, value: Any, path: str, default: str = "") -> str:
        if value is None and path in self.failed:
            return default
        if isinstance(value, str):
            return value
        self.report(ErrorCode.INVALID_TYPE, path, "expected a string")
        return default

    def strings(self, value: Any, path: str) -> tuple[str, ...] | None:
        if not isinstance(value, list | tuple):
            self.report(ErrorCode.INVALID_TYPE, path, "expected a list of strings")
            return None
        return tuple(self.string(item, f"{path}[{i}]") for i, item in enumerate(value))

    def draft(self, data: Any) -> tuple[Draft | None, str]:
        top = self.mapping(data, "", _TOP_KEYS, ("id", "revision", "conversation"))
        if top is None:
            return None, ""
        definition_id = self.string(top.get("id"), "id")
        description = self.string(top.get("description", ""), "description")
        model = top.get("model", DEFAULT_MODEL)
        self.mcp_servers = read_servers(self, top.get("mcp_servers", {}))
        self.approvals = self.tools(top.get("tools", {}))
        check_references(self, self.mcp_servers, self.server_tools)
        self.rollout = self.weight(top.get("rollout"))
        self.migrations = self.read_migrations(top.get("migrations", []))
        conversation = self.conversation(top.get("conversation"))
        revision = top.get("revision")
        if conversation is None:
            return None, description
        return Draft(definition_id, revision, model, conversation), description

    def tools(self, value: Any) -> frozenset[str]:
        """The `tools` section: each tool the model may be given, by name, with its policy
        (`approval: true` makes its calls wait for a decision) and, for a server tool, its
        `server` and `timeout` (kept in `server_tools`); the names needing approval."""
        body = self.mapping(value, "tools", None) or {}
        approvals = set()
        for name, policy in body.items():
            path = f"tools.{name}"
            if not TOOL_NAME.fullmatch(name):
                self.report(
                    ErrorCode.INVALID_TOOL, path, "a tool name is 1-64 letters, digits, _ or -"
                )
            settings = self.mapping({} if policy is None else policy, path, _TOOL_KEYS) or {}
            approval = settings.get("approval", False)
            if not isinstance(approval, bool):
                self.report(ErrorCode.INVALID_TYPE, f"{path}.approval", "expected true or false")
            elif approval:
                approvals.add(name)
            server_tool = read_server_tool(self, name, settings, approval is True)
            if server_tool is not None:
                self.server_tools[name] = server_tool
        return frozenset(approvals)

    def weight(self, value: Any) -> int | None:
        """`rollout`: the revision's weight for new sessions, 0 to MAX_WEIGHT."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_WEIGHT:
            self.report(
                ErrorCode.INVALID_ROLLOUT, "rollout", f"expected a whole number 0-{MAX_WEIGHT}"
            )
            return None
        return value

    def read_migrations(self, value: Any) -> dict[int, Migration]:
        """`migrations`: for each older revision (`from`), its `states` and `routes` maps."""
        if not isinstance(value, list | tuple):
            self.report(ErrorCode.INVALID_TYPE, "migrations", "expected a list of migrations")
            return {}
        found: dict[int, Migration] = {}
        for index, item in enumerate(value):
            path = f"migrations[{index}]"
            body = self.mapping(item, path, _MIGRATION_KEYS, ("from",))
            if body is None:
                continue
            source = body.get("from")
            if isinstance(source, bool) or not isinstance(source, int) or source < 1:
                self.report(ErrorCode.INVALID_MIGRATION, f"{path}.from", "expected a revision")
                continue
            if source in found:
                self.report(
                    ErrorCode.INVALID_MIGRATION, f"{path}.from", f"revision {source} migrates twice"
                )
                continue
            states = self.mapping(body.get("states", {}), f"{path}.states", None) or {}
            routes = self.mapping(body.get("routes", {}), f"{path}.routes", None) or {}
            state_map = {k: self.string(v, f"{path}.states.{k}") for k, v in states.items()}
            route_map: dict[str, str | None] = {
                k: None if v is None else self.string(v, f"{path}.routes.{k}")
                for k, v in routes.items()
            }
            found[source] = Migration(
                source, MappingProxyType(state_map), MappingProxyType(route_map)
            )
        return found

    def conversation(self, value: Any) -> ConversationSpec | None:
        if value is None and "conversation" in self.failed:
            return None
        body = self.mapping(value, "conversation", _CONVERSATION_KEYS, ("initial", "states"))
        if body is None:
            return None
        initial = self.string(body.get("initial"), "conversation.initial")
        states: dict[str, StateSpec] = {}
        raw_states = body.get("states")
        if raw_states is not None or "conversation.states" not in self.failed:
            raw = self.mapping(raw_states, "conversation.states", None)
            for name, state in (raw or {}).items():
                states[name] = self.state(state, f"conversation.states.{name}")
        routes: list[Route] = []
        raw_routes = body.get("routes", [])
        if isinstance(raw_routes, list | tuple):
            routes = [self.route(r, f"conversation.routes[{i}]") for i, r in enumerate(raw_routes)]
        else:
            self.report(ErrorCode.INVALID_TYPE, "conversation.routes", "expected a list of routes")
        return ConversationSpec(initial, MappingProxyType(states), tuple(routes))

    def state(self, value: Any, path: str) -> StateSpec:
        body = self.mapping({} if value is None else value, path, _STATE_KEYS) or {}
        on: dict[str, str] = {}
        raw_on = self.mapping(body.get("on", {}), f"{path}.on", None) or {}
        for event, target in raw_on.items():
            on[event] = self.string(target, f"{path}.on.{event}")
        actions = self.strings(body.get("actions", []), f"{path}.actions") or ()
        return StateSpec(on=MappingProxyType(on), actions=actions)

    def route(self, value: Any, path: str) -> Route:
        if isinstance(value, Route):
            return value  # Built in code by command_route and friends.
        body = self.mapping(value, path, _ROUTE_KEYS, ("id", "event", "response"))
        if body is None:
            return Route("", "", MissingMatcher(), MissingResponse())
        states = body.get("states")
        return Route(
            id=self.string(body.get("id"), f"{path}.id"),
            event=self.string(body.get("event"), f"{path}.event"),
            matcher=self.matcher(body, path),
            response=self.route_response(body, path),
            states=None if states is None else self.strings(states, f"{path}.states"),
            kind=to_kind(self.string(body.get("kind", "deterministic"), f"{path}.kind")),
        )

    def matcher(self, body: dict[str, Any], path: str) -> Matcher:
        present = [key for key in _MATCHER_KEYS if key in body]
        if len(present) != 1:
            found = ", ".join(present) or "none"
            self.report(
                ErrorCode.MATCHER_COUNT,
                path,
                f"a route needs exactly one of command, exact or pattern (found: {found})",
                suppress=False,
            )
            return MissingMatcher()
        key = present[0]
        text = self.string(body[key], f"{path}.{key}")
        if key == "command":
            return CommandMatcher(text)
        return ExactMatcher(text) if key == "exact" else PatternMatcher(text)

    def route_response(self, body: dict[str, Any], path: str) -> Response:
        """The route's response: its template, filled by its tool's result when it names
        one (`tool: {name, arguments}`)."""
        response = self.response(body.get("response"), f"{path}.response")
        if "tool" not in body:
            return response
        tool = self.mapping(body["tool"], f"{path}.tool", _ROUTE_TOOL_KEYS, ("name",))
        if tool is None or not isinstance(response, TemplateResponse):
            return MissingResponse()
        name = self.string(tool.get("name"), f"{path}.tool.name")
        if name and name not in self.server_tools:
            self.report(
                ErrorCode.UNKNOWN_ROUTE_TOOL,
                f"{path}.tool.name",
                f"tool {name!r} is not a server tool (a tools entry with `server`)",
            )
        arguments = self.mapping(tool.get("arguments", {}), f"{path}.tool.arguments", None) or {}
        templates = {
            key: TemplateResponse(self.string(value, f"{path}.tool.arguments.{key}"))
            for key, value in arguments.items()
        }
        return ToolResponse(name, MappingProxyType(templates), response)

    def response(self, value: Any, path: str) -> Response:
        if value is None:
            return MissingResponse()
        if not isinstance(value, str):
            self.report(ErrorCode.INVALID_TYPE, path, "expected a string")
            return MissingResponse()
        return to_response(value)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
