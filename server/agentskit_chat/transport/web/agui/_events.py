"""The AG-UI events of a turn: what each event of the service's turn stream becomes.

| service event                 | AG-UI events (slot)                                      |
|-------------------------------|----------------------------------------------------------|
| (the run is answered)         | RUN_STARTED (0.0), STATE_SNAPSHOT (0.1),                 |
|                               | MESSAGES_SNAPSHOT (0.2, a server-held thread reopened)   |
| TurnStarted                   | none (its assistant message id names the answer)         |
| TurnDecision                  | CUSTOM `agentskit.decision` (s.0)                        |
| TextDelta                     | TEXT_MESSAGE_START (s.0, the first only),                |
|                               | TEXT_MESSAGE_CONTENT (s.1)                               |
| ToolCallStarted, ToolCallDelta| TOOL_CALL_START, TOOL_CALL_ARGS, TOOL_CALL_END (s.0; see |
| ToolCallEnded                 | `_calls`)                                                |
| TurnCompleted                 | TEXT_MESSAGE_START + TEXT_MESSAGE_CONTENT (s.0, s.1, an  |
|                               | answer that streamed no delta), TEXT_MESSAGE_END (s.2),  |
|                               | STATE_DELTA (s.3, the state document changed),           |
|                               | RUN_FINISHED (s.4, its `outcome` what the answer waits   |
|                               | for: see `_calls`)                                       |
| TurnFailed                    | RUN_ERROR (s.0: the failure's code and safe message)     |

Every event is identified by `s.k`: `s` the sequence the turn gave the service event it
comes from (0 for the run's opening events), `k` its fixed slot among the events that
service event may produce (slots that produce nothing leave gaps). Ids therefore depend
only on the turn's own events, so a stream that replays the turn from its first event
(WatchTurn) gives every AG-UI event the id it had, and a resume skips those the client has.

The state document (`STATE_SNAPSHOT.snapshot`, patched by `STATE_DELTA`) is the
conversation snapshot and what a renderer draws from it: `state`, `allowedEvents`,
`actions`, and `commands` (the definition's routes that have an input a button may send,
eligible in this state: `{route, input, event}`), plus `definitionId` and `revision`, the
definition revision the thread's session runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb

from ._calls import call_args, call_end, call_result, call_start, outcome, snapshot_message

DECISION_EVENT: Final = "agentskit.decision"
KINDS: Final[Mapping[int, str]] = {
    pb.TURN_KIND_DETERMINISTIC: "deterministic",
    pb.TURN_KIND_AGENTIC: "agentic",
    pb.TURN_KIND_REPAIRED: "repaired",
    pb.TURN_KIND_FALLBACK: "fallback",
}
ROLES: Final[Mapping[int, str]] = {
    pb.ROLE_USER: "user",
    pb.ROLE_ASSISTANT: "assistant",
    pb.ROLE_SYSTEM: "system",
    pb.ROLE_TOOL: "tool",
}
Event = dict[str, Any]
Slotted = tuple[str, Event]
"""An event with its id."""


def state_document(definition: pb.Definition, state: str) -> dict[str, Any]:
    """What the renderer draws in `state` of `definition` (see the module docs)."""
    info = next((s for s in definition.states if s.name == state), None)
    events = [t.event for t in info.transitions] if info is not None else []
    commands = [
        {"route": route.id, "input": route.input_text, "event": route.event}
        for route in definition.routes
        if route.input_text
        and route.event in events
        and (not route.states or state in route.states)
    ]
    return {
        "definitionId": definition.id,
        "revision": definition.revision,
        "state": state,
        "allowedEvents": events,
        "actions": list(info.actions) if info is not None else [],
        "commands": commands,
    }


def patch(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An RFC 6902 JSON Patch from `before` to `after` (documents with the same keys):
    one `replace` per key whose value changed; every key when `before` is unknown."""
    return [
        {"op": "replace", "path": f"/{key}", "value": value}
        for key, value in after.items()
        if before is None or before.get(key) != value
    ]


def run_started(thread_id: str, run_id: str) -> Slotted:
    """The run's first event."""
    return "0.0", {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}


def state_snapshot(document: Mapping[str, Any]) -> Slotted:
    """The state document before the turn."""
    return "0.1", {"type": "STATE_SNAPSHOT", "snapshot": dict(document)}


def messages_snapshot(messages: Sequence[pb.Message]) -> Slotted:
    """A server-held thread's history."""
    return "0.2", {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [snapshot_message(m, ROLES.get(m.role, "user")) for m in messages],
    }


def run_finished(
    thread_id: str,
    run_id: str,
    result: Mapping[str, Any] | None = None,
    ended: Mapping[str, Any] | None = None,
) -> Event:
    """The run ended well; `ended` is its outcome (success when not given)."""
    event: Event = {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}
    if result is not None:
        event["result"] = dict(result)
    event["outcome"] = dict(ended) if ended is not None else {"type": "success"}
    return event


@dataclass(slots=True)
class TurnEvents:
    """Translates one turn's service events, in order, into AG-UI events with their ids.

    `baseline` is the state document the client was sent before the turn (None when it is
    unknown, as on a resume: the document of the decision's `from` state stands for it, and
    without a decision the state delta replaces every key).
    """

    thread_id: str
    run_id: str
    definition: pb.Definition
    baseline: Mapping[str, Any] | None
    held: frozenset[str] = frozenset()
    """Calls the client holds already, whose events are not sent again (an approved
    call the answer sends back to run: AG-UI does not start a call twice)."""
    message_id: str = ""
    text_open: bool = False
    from_state: str | None = None
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)

    def translate(self, event: pb.StreamTurnResponse) -> Iterator[Slotted]:
        """The AG-UI events of one service event."""
        sequence = event.sequence
        which = event.WhichOneof("event")
        if which == "started":
            self.message_id = event.started.assistant_message_id or f"{self.run_id}.answer"
        elif which == "decision":
            self.from_state = event.decision.from_state
            yield f"{sequence}.0", self._decision(event.decision)
        elif which == "delta":
            if event.delta.text:
                if not self.text_open:
                    self.text_open = True
                    yield f"{sequence}.0", self._text_start()
                yield f"{sequence}.1", self._content(event.delta.text)
        elif which == "tool_call_started":
            if event.tool_call_started.tool_call_id not in self.held:
                yield f"{sequence}.0", call_start(event.tool_call_started, self.message_id)
        elif which == "tool_call_delta":
            if event.tool_call_delta.tool_call_id not in self.held:
                yield f"{sequence}.0", call_args(event.tool_call_delta)
        elif which == "tool_call_ended":
            if event.tool_call_ended.tool_call_id not in self.held:
                yield f"{sequence}.0", call_end(event.tool_call_ended)
        elif which == "tool_call_result":
            yield f"{sequence}.0", call_result(event.tool_call_result)
        elif which == "completed":
            yield from self._completed(sequence, event.completed)
        elif which == "failed":
            error = {"type": "RUN_ERROR", "message": event.failed.message}
            error["code"] = event.failed.code
            yield f"{sequence}.0", error

    def _completed(self, sequence: int, done: pb.TurnCompleted) -> Iterator[Slotted]:
        if done.assistant_message_id:
            self.message_id = done.assistant_message_id
        if not self.text_open and done.content:
            self.text_open = True
            yield f"{sequence}.0", self._text_start()
            yield f"{sequence}.1", self._content(done.content)
        if self.text_open:
            self.text_open = False
            end = {"type": "TEXT_MESSAGE_END", "messageId": self.message_id}
            yield f"{sequence}.2", end
        after = self._document(done.snapshot.state)
        baseline = self.baseline
        if baseline is None and self.from_state is not None:
            baseline = self._document(self.from_state)
        changes = patch(baseline, after)
        if changes:
            yield f"{sequence}.3", {"type": "STATE_DELTA", "delta": changes}
        result = {"assistantMessageId": done.assistant_message_id, "cursor": done.cursor}
        ended = outcome(done.pending_tool_calls)
        yield f"{sequence}.4", run_finished(self.thread_id, self.run_id, result, ended)

    def _document(self, state: str) -> dict[str, Any]:
        document = self.documents.get(state)
        if document is None:
            document = self.documents[state] = state_document(self.definition, state)
        return document

    def _decision(self, decision: pb.TurnDecision) -> Event:
        value = {
            "kind": KINDS.get(decision.kind, "unspecified"),
            "route": decision.route_id,
            "from": decision.from_state,
            "to": decision.to_state,
            "replayed": decision.replayed,
            "turnId": self.run_id,
            "sessionId": self.thread_id,
        }
        return {"type": "CUSTOM", "name": DECISION_EVENT, "value": value}

    def _text_start(self) -> Event:
        return {"type": "TEXT_MESSAGE_START", "messageId": self.message_id, "role": "assistant"}

    def _content(self, text: str) -> Event:
        return {"type": "TEXT_MESSAGE_CONTENT", "messageId": self.message_id, "delta": text}
