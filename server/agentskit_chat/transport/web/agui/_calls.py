"""The tool calls of a turn as AG-UI events, and how the run ends when its answer waits.

| service event     | AG-UI event (slot)                                                |
|-------------------|-------------------------------------------------------------------|
| ToolCallStarted   | TOOL_CALL_START (s.0: toolCallId, toolCallName, parentMessageId = |
|                   | the assistant message id)                                         |
| ToolCallDelta     | TOOL_CALL_ARGS (s.0: toolCallId, delta)                           |
| ToolCallEnded     | TOOL_CALL_END (s.0: toolCallId)                                   |

`RUN_FINISHED.outcome` says what the answer waits for:

- nothing: `{"type": "success"}`;
- results of frontend tools: `{"type": "success", "pendingToolCallIds": [...]}`; the next
  run sends a `tool` message per call (`toolCallId`) and continues the answer;
- an approval: `{"type": "interrupt", "interrupts": [...]}`, one interrupt per call waiting
  for approval (`id` and `toolCallId` the call id, `reason` `tool_call`), and
  `pendingToolCallIds` naming the calls that wait for results beside them. The next run's
  `resume` entries (`interruptId` the call id) approve or deny each (see `_tools`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb

Event = dict[str, Any]

APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
"""What a `resume` entry's payload answers an approval interrupt with."""


def call_start(call: pb.ToolCallStarted, parent: str) -> Event:
    """A tool call started, in the answer `parent`."""
    return {
        "type": "TOOL_CALL_START",
        "toolCallId": call.tool_call_id,
        "toolCallName": call.name,
        "parentMessageId": parent,
    }


def call_args(delta: pb.ToolCallDelta) -> Event:
    """The next piece of a call's arguments."""
    return {
        "type": "TOOL_CALL_ARGS",
        "toolCallId": delta.tool_call_id,
        "delta": delta.arguments_delta,
    }


def call_end(ended: pb.ToolCallEnded) -> Event:
    """A call's arguments are complete."""
    return {"type": "TOOL_CALL_END", "toolCallId": ended.tool_call_id}


def call_result(ran: pb.ToolCallResult) -> Event:
    """The result of a server tool the service ran within the run."""
    return {
        "type": "TOOL_CALL_RESULT",
        "messageId": ran.message_id or f"{ran.tool_call_id}.result",
        "toolCallId": ran.tool_call_id,
        "content": ran.content,
        "role": "tool",
    }


def outcome(pending: Sequence[pb.PendingToolCall]) -> dict[str, Any]:
    """The `RUN_FINISHED.outcome` of an answer waiting on `pending` (see the module docs)."""
    results = [p.tool_call_id for p in pending if p.wait != pb.TOOL_WAIT_APPROVAL]
    approvals = [p for p in pending if p.wait == pb.TOOL_WAIT_APPROVAL]
    if not approvals:
        done: dict[str, Any] = {"type": "success"}
        if results:
            done["pendingToolCallIds"] = results
        return done
    interrupts = [
        {
            "id": p.tool_call_id,
            "reason": "tool_call",
            "message": f"Approve the call of {p.name}?",
            "toolCallId": p.tool_call_id,
            "responseSchema": APPROVAL_SCHEMA,
        }
        for p in approvals
    ]
    paused: dict[str, Any] = {"type": "interrupt", "interrupts": interrupts}
    if results:
        paused["pendingToolCallIds"] = results
    return paused


def snapshot_message(message: pb.Message, role: str) -> dict[str, Any]:
    """A stored message as `MESSAGES_SNAPSHOT` lists it, with its tool data."""
    item: dict[str, Any] = {"id": message.id, "role": role, "content": message.content}
    if message.tool_calls:
        item["toolCalls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id:
        item["toolCallId"] = message.tool_call_id
    return item
