"""A turn's events as UI message stream chunks.

`Chunks` turns a turn's events into chunks: `start`, the data parts, one step of the answer
(`start-step`, `text-start` / `text-delta` / `text-end`, `tool-input-start` /
`tool-input-delta` / `tool-input-available`, `tool-approval-request`, `finish-step`), then
`finish` or `error`; `chunk` frames one as the server-sent event the AI SDK's parser reads.
"""

from __future__ import annotations

import json
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary.fronts import json_bytes

DECISION_PART: Final = "data-agentskit-decision"
"""The data part carrying the turn's decision (kind, route, from, to, replayed, turnId)."""
SNAPSHOT_PART: Final = "data-agentskit-snapshot"
"""The data part carrying the conversation snapshot (state, allowedEvents, actions) and the
commands a renderer may offer as buttons."""
TEXT_ID: Final = "text"
DONE: Final = b"data: [DONE]\n\n"
KINDS: Final = {
    pb.TURN_KIND_DETERMINISTIC: "deterministic",
    pb.TURN_KIND_AGENTIC: "agentic",
    pb.TURN_KIND_REPAIRED: "repaired",
    pb.TURN_KIND_FALLBACK: "fallback",
}
FINISH_REASONS: Final = {
    "length": "length",
    "content_filter": "content-filter",
    "tool_calls": "tool-calls",
    "tool_approval": "tool-calls",
}
"""The service's finish reasons in the AI SDK's words; any other is `stop`."""
APPROVAL_PREFIX: Final = "approval-"
"""An approval request's id: this and the call's id."""


def chunk(value: dict[str, Any]) -> bytes:
    """One UI message stream chunk as the server-sent event the AI SDK parses."""
    return b"data: " + json_bytes(value) + b"\n\n"


class Commands:
    """The commands a renderer may offer as buttons in a state: the input text of each
    route that is eligible there (its event allowed, the state among its states)."""

    def __init__(self, definition: pb.Definition) -> None:
        self.routes = [r for r in definition.routes if r.input_text]
        self.revision = definition.revision
        """The definition revision the chat's session runs."""

    def of(self, snapshot: pb.Snapshot) -> list[dict[str, str]]:
        """The commands of the snapshot's state, in route order."""
        return [
            {"route": route.id, "input": route.input_text}
            for route in self.routes
            if route.event in snapshot.allowed_events
            and (not route.states or snapshot.state in route.states)
        ]


def snapshot_part(snapshot: pb.Snapshot, commands: Commands) -> dict[str, Any]:
    """The snapshot data part; a later one (same id) replaces it in the message."""
    data = {
        "state": snapshot.state,
        "allowedEvents": list(snapshot.allowed_events),
        "actions": list(snapshot.actions),
        "commands": commands.of(snapshot),
    }
    return {"type": SNAPSHOT_PART, "id": "snapshot", "data": data}


class Chunks:
    """The UI message stream chunks of one turn's events, in order.

    `continues` is the id of the assistant UIMessage a turn continuing an answer (with tool
    results or approvals) adds its step to, so `start` names it; `denied` the calls the
    request denies, shown as `tool-output-denied` at once; `held` the calls whose parts
    that message holds already: a call of them sent back to the client to run (an approved
    one) only has its input made available again, which updates its part in place."""

    def __init__(
        self,
        chat_id: str,
        before: pb.Snapshot,
        commands: Commands,
        continues: str | None = None,
        denied: tuple[str, ...] = (),
        held: frozenset[str] = frozenset(),
    ) -> None:
        self.chat_id = chat_id
        self.before = before
        self.commands = commands
        self.continues = continues
        self.denied = denied
        self.held = held
        self.text_open = False
        self.texted = False
        self.step_open = False
        self.ended = False
        self.calls: dict[str, str] = {}
        """Call id -> tool name, of the calls this stream showed."""
        self.shown: set[str] = set()
        """The calls whose input this stream made available."""
        self.ran = False
        """Server tools ran in the open step: the model's next call is a step of its own."""

    def of(self, event: pb.StreamTurnResponse) -> list[dict[str, Any]]:
        """The chunks of `event` (none for an event the stream does not show)."""
        which = event.WhichOneof("event")
        if which == "delta":
            return [
                *self._open_text(),
                {"type": "text-delta", "id": TEXT_ID, "delta": event.delta.text},
            ]
        if which == "tool_call_started":
            started = event.tool_call_started
            self.calls[started.tool_call_id] = started.name
            if started.tool_call_id in self.held:
                return []
            opened = {"type": "tool-input-start", "toolCallId": started.tool_call_id}
            return [*self._open_step(), *self._close_text(), {**opened, "toolName": started.name}]
        if which == "tool_call_delta":
            delta = event.tool_call_delta
            if delta.tool_call_id in self.held:
                return []
            piece = {"toolCallId": delta.tool_call_id, "inputTextDelta": delta.arguments_delta}
            return [{"type": "tool-input-delta", **piece}]
        if which == "tool_call_ended":
            ended = event.tool_call_ended
            name = self.calls.get(ended.tool_call_id, "")
            return self._available(ended.tool_call_id, name, ended.arguments, ended.wait)
        if which == "tool_call_result":
            ran = event.tool_call_result
            self.ran = True
            if ran.error_type:
                error = {"toolCallId": ran.tool_call_id, "errorText": ran.content}
                return [{"type": "tool-output-error", **error}]
            return [
                {
                    "type": "tool-output-available",
                    "toolCallId": ran.tool_call_id,
                    "output": ran.content,
                }
            ]
        if which == "started":
            return self._started(event)
        if which == "decision":
            decision = event.decision
            data = {
                "kind": KINDS.get(decision.kind, "unspecified"),
                "route": decision.route_id or None,
                "from": decision.from_state,
                "to": decision.to_state,
                "replayed": decision.replayed,
                "turnId": event.turn_id,
            }
            return [{"type": DECISION_PART, "id": "decision", "data": data}]
        if which == "completed":
            return self._completed(event.completed)
        if which == "failed":
            failed = event.failed
            return self._ended(failed.code, failed.message)
        return []

    def failure(self, code: str, message: str) -> list[dict[str, Any]]:
        """The chunks that end the stream on a refusal met after it opened."""
        return [] if self.ended else self._ended(code, message)

    def _started(self, event: pb.StreamTurnResponse) -> list[dict[str, Any]]:
        start: dict[str, Any] = {"type": "start"}
        message_id = self.continues or event.started.assistant_message_id
        if message_id:
            start["messageId"] = message_id
        start["messageMetadata"] = {
            "chatId": self.chat_id,
            "turnId": event.turn_id,
            "revision": self.commands.revision,
        }
        found = [start]
        found += [{"type": "tool-output-denied", "toolCallId": ident} for ident in self.denied]
        found.append(snapshot_part(self.before, self.commands))
        return found

    def _open_step(self) -> list[dict[str, Any]]:
        if self.step_open and not self.ran:
            return []
        closed = [*self._close_text(), {"type": "finish-step"}] if self.step_open else []
        self.step_open, self.ran = True, False
        return [*closed, {"type": "start-step"}]

    def _open_text(self) -> list[dict[str, Any]]:
        if self.text_open:
            return []
        self.text_open = self.texted = True
        return [*self._open_step(), {"type": "text-start", "id": TEXT_ID}]

    def _close_text(self) -> list[dict[str, Any]]:
        if not self.text_open:
            return []
        self.text_open = False
        return [{"type": "text-end", "id": TEXT_ID}]

    def _available(self, ident: str, name: str, arguments: str, wait: int) -> list[dict[str, Any]]:
        """A call's complete input (and its approval request when it waits for one)."""
        self.shown.add(ident)
        try:
            value: object = json.loads(arguments) if arguments else {}
        except ValueError:
            value = None
        call = {"toolCallId": ident, "toolName": name}
        if not isinstance(value, dict):  # the model's arguments are not a JSON object
            error = "the tool call's arguments are not a JSON object"
            return [{"type": "tool-input-error", **call, "input": arguments, "errorText": error}]
        found: list[dict[str, Any]] = [{"type": "tool-input-available", **call, "input": value}]
        if wait == pb.TOOL_WAIT_APPROVAL:
            approval = {"approvalId": APPROVAL_PREFIX + ident, "toolCallId": ident}
            found.append({"type": "tool-approval-request", **approval})
        return found

    def _completed(self, completed: pb.TurnCompleted) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        if not self.texted and completed.content:
            found += self._open_text()  # a repeated turn: its answer at once
            found.append({"type": "text-delta", "id": TEXT_ID, "delta": completed.content})
        found += self._close_text()
        # Calls the answer waits on that this stream did not show (an approved call sent
        # back to the client to run, a repeated turn): their input now.
        made = {call.id: call for call in completed.tool_calls}
        for pending in completed.pending_tool_calls:
            if pending.tool_call_id not in self.shown:
                call = made.get(pending.tool_call_id)
                arguments = "" if call is None else call.arguments
                found += self._available(
                    pending.tool_call_id, pending.name, arguments, pending.wait
                )
        if self.step_open:
            found.append({"type": "finish-step"})
            self.step_open = False
        found.append(snapshot_part(completed.snapshot, self.commands))
        reason = FINISH_REASONS.get(completed.finish_reason, "stop")
        if completed.pending_tool_calls:
            reason = "tool-calls"
        finish: dict[str, Any] = {"type": "finish", "finishReason": reason}
        if completed.HasField("usage"):
            usage = {
                "inputTokens": completed.usage.input_tokens,
                "outputTokens": completed.usage.output_tokens,
            }
            finish["messageMetadata"] = {"usage": usage}
        found.append(finish)
        self.ended = True
        return found

    def _ended(self, code: str, message: str) -> list[dict[str, Any]]:
        self.ended = True
        return [*self._close_text(), {"type": "error", "errorText": f"{code}: {message}"}]
