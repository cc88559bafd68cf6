"""Tools in `agentskit-chat chat`: the person at the terminal runs them.

`--tools FILE` declares tools for every turn (a JSON or YAML list of `name`, `description`,
`parameters`). When the model calls them, each call is shown with its arguments; then,
for each call the answer waits on, `chat` asks: for a call needing approval `y/n` (and a
reason for a no), and for a call to run, its result, typed in. The answers go back as the
next turn (`ToolResults`), which the model continues.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from agentskit_chat_client import (
    PendingToolCall,
    ToolApproval,
    ToolCall,
    ToolDeclaration,
    ToolResult,
    ToolResults,
)

Ask = Callable[[str], str]
"""Shows a prompt and returns the line typed (raises EOFError at the end of the input)."""


def load_tools(path: Path) -> tuple[ToolDeclaration, ...]:
    """The declarations of a tools file; ValueError naming what is wrong."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"--tools {path}: cannot read it ({type(exc).__name__})") from None
    if not isinstance(data, list):
        raise ValueError(f"--tools {path}: expected a list of tools")
    return tuple(_declaration(item, f"--tools {path}: tool {i}") for i, item in enumerate(data))


def _declaration(item: Any, where: str) -> ToolDeclaration:
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        raise ValueError(f"{where}: needs a name")
    description = item.get("description", "")
    parameters = item.get("parameters")
    if not isinstance(description, str) or not isinstance(parameters, Mapping | None):
        raise ValueError(f"{where}: description is text and parameters a JSON Schema object")
    return ToolDeclaration(item["name"], description, parameters)


def call_line(call: ToolCall) -> str:
    """How a call of the answer is shown."""
    return f"[tool call] {call.name} {call.arguments or '{}'}"


def answers(pending: Sequence[PendingToolCall], calls: Sequence[ToolCall], ask: Ask) -> ToolResults:
    """Ask the person for each pending call: a decision where it needs approval, and its
    result where it is to run (an approved call is run at once)."""
    arguments = {call.id: call.arguments for call in calls}
    results: list[ToolResult] = []
    approvals: list[ToolApproval] = []
    for call in pending:
        shown = f"{call.name} {arguments.get(call.tool_call_id) or '{}'}"
        if call.wait == "approval":
            approved = _yes(ask(f"approve {shown}? [y/n] "))
            reason = "" if approved else ask("reason (optional): ").strip()
            approvals.append(ToolApproval(call.tool_call_id, approved, reason))
            if not approved:
                continue
        result = ask(f"result of {shown}: ").strip()
        results.append(ToolResult(call.tool_call_id, result or json.dumps(None)))
    return ToolResults(results, approvals)


def _yes(text: str) -> bool:
    return text.strip().lower() in ("y", "yes")
