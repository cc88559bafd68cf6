"""What a chat completion of the OpenAI front yields, from the service's turn events: its
decision, its text, its tool calls and its end, and a failed turn as a refusal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary.fronts import FrontError

KINDS: Final = {
    pb.TURN_KIND_DETERMINISTIC: "deterministic",
    pb.TURN_KIND_AGENTIC: "agentic",
    pb.TURN_KIND_REPAIRED: "repaired",
    pb.TURN_KIND_FALLBACK: "fallback",
}
FAILED_STATUS: Final = {
    "deadline_exceeded": 504,
    "cancelled": 503,
    "interrupted": 503,
    "output_limit": 500,
    "route_failed": 500,
}


@dataclass(frozen=True, slots=True)
class Decision:
    """How the turn is answered, as the `agentskit` object and headers say it."""

    kind: str
    route: str | None
    from_state: str
    to_state: str
    replayed: bool
    turn_id: str
    session_id: str | None
    """None for a stateless completion (its session is gone when it ends)."""
    history: str
    """`stateless`, `client` or `server`."""
    revision: int
    """The definition revision the session ran when the request came."""

    def fields(self) -> dict[str, Any]:
        """The `agentskit` object."""
        return {
            "kind": self.kind,
            "route": self.route,
            "from": self.from_state,
            "to": self.to_state,
            "replayed": self.replayed,
            "turn_id": self.turn_id,
            "session_id": self.session_id,
            "history": self.history,
            "revision": self.revision,
        }


@dataclass(frozen=True, slots=True)
class Finished:
    """The turn committed; `usage` (prompt, completion tokens) when a model answered, and
    OpenAI's `finish_reason`: `length` when the model was cut by its token limit,
    `tool_calls` when the answer waits for tool results (or an approval, which OpenAI's
    protocol has no word for); `calls` maps each call id to its name and arguments."""

    usage: tuple[int, int] | None
    finish_reason: str = "stop"
    calls: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class CallStarted:
    """A tool call began: its position in the answer, id and name."""

    index: int
    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class CallArguments:
    """A piece of a tool call's arguments."""

    index: int
    piece: str = field(repr=False)


Item = Decision | str | CallStarted | CallArguments | Finished
"""What a completion yields: its decision first, then text and tool calls, then Finished."""


class CallIndexes:
    """The position of each call of one answer, by call id, in the order they started.

    Calls of server tools are the service's own business: the client never answers them,
    so they are not shown (nor their results).
    """

    def __init__(self) -> None:
        self._indexes: dict[str, int] = {}
        self._hidden: set[str] = set()

    def item(self, event: pb.StreamTurnResponse) -> CallStarted | CallArguments | None:
        """The item of a tool event (`None` for the end of a call, which adds nothing, and
        for a server tool's events)."""
        which = event.WhichOneof("event")
        if which == "tool_call_started":
            started = event.tool_call_started
            if started.wait == pb.TOOL_WAIT_SERVER:
                self._hidden.add(started.tool_call_id)
                return None
            index = self._indexes.setdefault(started.tool_call_id, len(self._indexes))
            return CallStarted(index, started.tool_call_id, started.name)
        if which == "tool_call_delta":
            delta = event.tool_call_delta
            if delta.tool_call_id in self._hidden:
                return None
            return CallArguments(self._indexes.get(delta.tool_call_id, 0), delta.arguments_delta)
        return None


def decision_of(
    decision: pb.TurnDecision,
    turn: pb.StreamTurnRequest,
    session_id: str | None,
    history: str,
    revision: int,
) -> Decision:
    """The decision of `turn` as the front reports it."""
    return Decision(
        KINDS.get(decision.kind, "agentic"),
        decision.route_id or None,
        decision.from_state,
        decision.to_state,
        decision.replayed,
        turn.turn_id,
        session_id,
        history,
        revision,
    )


def finished_of(completed: pb.TurnCompleted) -> Finished:
    """The Finished item of a committed turn."""
    reason = "length" if completed.finish_reason == "length" else "stop"
    waiting = {p.tool_call_id for p in completed.pending_tool_calls}
    calls = {
        call.id: (call.name, call.arguments) for call in completed.tool_calls if call.id in waiting
    }
    if completed.pending_tool_calls:
        reason = "tool_calls"
    return Finished(usage_of(completed), reason, calls)


def usage_of(completed: pb.TurnCompleted) -> tuple[int, int] | None:
    if not completed.HasField("usage"):
        return None
    return (completed.usage.input_tokens, completed.usage.output_tokens)


def failure_of(failed: pb.TurnFailed) -> FrontError:
    status = FAILED_STATUS.get(failed.code, 502 if failed.retryable else 500)
    return FrontError(status, failed.code, failed.message)
