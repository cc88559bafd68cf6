"""The tools a front's request declares, read alike by every HTTP front.

A front reads only its own names and shapes (`tool_choice` or `toolChoice`, `parameters` or
`inputSchema`, a named function or a named tool); the list of declarations, the plain
choices, a choice that asks for tools when none are declared, the parallel flag and an
approval's `{approved, reason}` are checked here, so that every front refuses them alike,
naming its own field and never its value. The service checks names, schemas and limits as
for any caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb

from .fields import optional_text, unicode_text
from .fronts import bad_request

CHOICES: Final = frozenset({"auto", "none", "required"})
"""The tool choices every front spells as a string; the other kind names one tool."""

Declaration = Callable[[Any, str], pb.ToolDeclaration]
"""Reads one declared tool in a front's shape: (the tool, its field `tools[i]`)."""
NamedChoice = Callable[[dict[str, Any]], str | None]
"""Reads the tool an object choice names in a front's shape; None when it names none."""


@dataclass(frozen=True, slots=True)
class TurnTools:
    """The tools a request declares and how the model may use them."""

    tools: tuple[pb.ToolDeclaration, ...] = field(default=(), repr=False)
    choice: str = ""
    """One of CHOICES, a tool's name, or empty for the service's default."""
    parallel: bool | None = None
    """Whether the model may call several tools at once; None (always without tools)
    leaves it to the service."""

    def apply(self, turn: pb.StreamTurnRequest) -> None:
        """Set these on the turn's request."""
        turn.tools.extend(self.tools)
        turn.tool_choice = self.choice
        if self.parallel is not None:
            turn.parallel_tool_calls = self.parallel


NO_TOOLS: Final = TurnTools()


@dataclass(frozen=True, slots=True)
class ToolFields:
    """How a front spells the tool fields of its request body; the names are the fields
    its refusals name."""

    choice: str
    """The tool choice (`tool_choice`, `toolChoice`)."""
    parallel: str
    """The flag allowing parallel calls (`parallel_tool_calls`, `parallelToolCalls`)."""
    named_choice: str
    """How the refusal of a bad choice spells a choice naming one tool (`a named function`)."""
    not_a_list: str = "tools must be an array"
    """The message refusing a `tools` that is not an array."""


def declarations(
    value: object, read: Declaration, not_a_list: str = "tools must be an array"
) -> tuple[pb.ToolDeclaration, ...]:
    """The declarations of a request's `tools` (none when absent), each read by `read`;
    `not_a_list` refuses anything but an array."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request("tools", not_a_list)
    return tuple(read(tool, f"tools[{index}]") for index, tool in enumerate(value))


def turn_tools(
    body: Mapping[str, Any], fields: ToolFields, read: Declaration, named: NamedChoice
) -> TurnTools:
    """The `tools` (each read by `read`), tool choice (an object one read by `named`) and
    parallel flag of a request body, refusing the first field at fault in that order. A
    choice other than `none` needs tools; the flag is kept only with tools, since it means
    nothing without."""
    tools = declarations(body.get("tools"), read, fields.not_a_list)
    choice = _choice(body.get(fields.choice), fields, named)
    if choice and choice != "none" and not tools:
        raise bad_request(fields.choice, f"{fields.choice} needs tools")
    parallel = body.get(fields.parallel)
    if parallel is not None and not isinstance(parallel, bool):
        raise bad_request(fields.parallel, f"{fields.parallel} must be a boolean")
    return TurnTools(tools, choice, parallel if tools else None)


def _choice(value: object, fields: ToolFields, named: NamedChoice) -> str:
    if value is None:
        return ""
    if isinstance(value, str) and value in CHOICES:
        return value
    if isinstance(value, dict) and (name := named(value)):
        return name
    raise bad_request(
        fields.choice,
        f'{fields.choice} must be "auto", "none", "required" or {fields.named_choice}',
    )


def decision(value: Mapping[str, Any], at: str) -> tuple[bool, str]:
    """The `approved` and `reason` (empty when absent) of the approval object at `at`."""
    approved = value.get("approved")
    if not isinstance(approved, bool):
        raise bad_request(f"{at}.approved", f"{at}.approved must be a boolean")
    reason = optional_text(value.get("reason"), f"{at}.reason")
    return approved, unicode_text(f"{at}.reason", reason)
