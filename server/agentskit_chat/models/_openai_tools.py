"""Tools in the Chat Completions wire format: declarations, tool history, streamed calls.

Nothing here names argument text or a tool result in an error: ToolCallError messages are
fixed text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentskit_chat.conversation import Message, Role

from ._port import ModelChunk, ToolCallDeltaChunk, ToolCallStartChunk, ToolOptions, ToolSpec

CHOICES: Final = frozenset({"auto", "none", "required"})
"""`tool_choice` values sent as they are; any other choice names the tool to call."""
EMPTY_PARAMETERS: Final[Mapping[str, Any]] = {"type": "object", "properties": {}}
"""The arguments' schema sent for a tool declared without one."""
NO_ARGUMENTS: Final = "{}"
"""The arguments sent for a call of the history whose arguments are empty (not known)."""


class ToolCallError(Exception):
    """The model streamed a malformed tool call; the message is fixed text."""


def tool_fields(options: ToolOptions) -> dict[str, Any]:
    """The request fields of the declared tools: `tools`, and `tool_choice` and
    `parallel_tool_calls` when set; none at all without tools."""
    if not options.tools:
        return {}
    fields: dict[str, Any] = {"tools": [_tool(spec) for spec in options.tools]}
    if options.choice:
        fields["tool_choice"] = (
            options.choice
            if options.choice in CHOICES
            else {"type": "function", "function": {"name": options.choice}}
        )
    if options.parallel is not None:
        fields["parallel_tool_calls"] = options.parallel
    return fields


def _tool(spec: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    function["parameters"] = _plain(spec.parameters) if spec.parameters else EMPTY_PARAMETERS
    return {"type": "function", "function": function}


def _plain(value: Any) -> Any:
    """`value` with every mapping a dict and every tuple a list, for json.dumps."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The history in the Chat Completions shape: `role` and `content`, with `tool_calls`
    on an assistant message that made calls and `tool_call_id` on a tool message.

    Only answered calls are sent, since a model server refuses a call without its result
    and a result without its call: a call no later tool message answers is left out (and
    an assistant message left with neither text nor calls with it), and so is a tool
    message whose call is not sent before it (or was answered already).
    """
    answered_later: set[str] = set()
    answered: list[frozenset[str]] = [frozenset()] * len(messages)
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role == Role.TOOL and message.tool_call_id is not None:
            answered_later.add(message.tool_call_id)
        elif message.tool_calls:
            answered[position] = frozenset(
                c.id for c in message.tool_calls if c.id in answered_later
            )
    wire: list[dict[str, Any]] = []
    open_calls: set[str] = set()
    for message, answers in zip(messages, answered, strict=True):
        if message.role == Role.TOOL:
            if message.tool_call_id in open_calls:
                open_calls.discard(message.tool_call_id)
                wire.append(
                    {
                        "role": "tool",
                        "tool_call_id": message.tool_call_id,
                        "content": message.content,
                    }
                )
        elif not message.tool_calls:
            wire.append({"role": str(message.role), "content": message.content})
        elif calls := [c for c in message.tool_calls if c.id in answers and c.id not in open_calls]:
            open_calls.update(c.id for c in calls)
            wire.append(
                {
                    "role": str(message.role),
                    "content": message.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments or NO_ARGUMENTS},
                        }
                        for c in calls
                    ],
                }
            )
        elif message.content:
            wire.append({"role": str(message.role), "content": message.content})
    return wire


class ToolCallState:
    """The tool calls of one streamed answer: each `index` the model used, and its call id.

    The first delta of an index must name the call's id and function name; it starts the
    call (ToolCallStartChunk with the model's index). Later deltas of that index carry
    arguments pieces (ToolCallDeltaChunk, keyed by the call's id); they may repeat the id
    and name, never change them. Calls may interleave their deltas.
    """

    def __init__(self) -> None:
        self._calls: dict[int, tuple[str, str]] = {}
        """index -> (call id, name) of every started call."""
        self._ids: set[str] = set()

    def delta(self, tool_calls: object) -> list[ModelChunk]:
        """The chunks of a delta's `tool_calls` list."""
        if not isinstance(tool_calls, list):
            raise ToolCallError("the model sent malformed tool calls")
        found: list[ModelChunk] = []
        for item in tool_calls:
            found.extend(self._item(item))
        return found

    def _item(self, item: object) -> list[ModelChunk]:
        if not isinstance(item, dict):
            raise ToolCallError("the model sent a malformed tool call delta")
        index = item.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ToolCallError("the model sent a tool call delta without a valid index")
        function = item.get("function")
        if function is None:
            function = {}
        if not isinstance(function, dict):
            raise ToolCallError("the model sent a tool call delta with a malformed function")
        call_id, name = item.get("id"), function.get("name")
        arguments = function.get("arguments")
        if any(v is not None and not isinstance(v, str) for v in (call_id, name, arguments)):
            raise ToolCallError("the model sent a tool call delta with a malformed field")
        found: list[ModelChunk] = []
        started = self._calls.get(index)
        if started is None:
            if not call_id or not name:
                raise ToolCallError("the model started a tool call without an id or a name")
            if call_id in self._ids:
                raise ToolCallError("the model sent two tool calls with the same id")
            started = self._calls[index] = (call_id, name)
            self._ids.add(call_id)
            found.append(ToolCallStartChunk(index, call_id, name))
        elif (call_id and call_id != started[0]) or (name and name != started[1]):
            raise ToolCallError("the model changed the id or name of a tool call")
        if arguments:
            found.append(ToolCallDeltaChunk(started[0], arguments))
        return found
