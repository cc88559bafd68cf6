"""Turn events as the bytes of a stored batch (see storage.EventBatch).

A batch is compact JSON, one array per event. For a client-held session the whole batch is
sealed (as route responses are: AES-SIV under the deployment key, bound to the session and
to the batch's place in its turn), so the store never holds its text in the clear.

Each event's array ends with its publication time (ns), after every field a reader of an
earlier format reads (such readers ignore it); an array without it (written by such a
server) decodes with time 0, which the wire stamps when it sends the event.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Final

from agentskit_chat.conversation import ConversationSnapshot, PendingCall, ResponseSealer, ToolCall

from ._types import (
    Completed,
    Decided,
    Delta,
    Failed,
    Started,
    ToolDelta,
    ToolEnded,
    ToolRan,
    ToolStarted,
    TurnEvent,
    Usage,
)

_PLAIN: Final = b"J"
_SEALED: Final = b"S"


class BatchCodec:
    """Encodes and decodes the batches of one turn attempt (`name`) of one session."""

    def __init__(self, session_id: str, name: str, sealer: ResponseSealer | None = None) -> None:
        self._session_id = session_id
        self._name = name
        self._sealer = sealer
        """Seals batches when set (a client-held session)."""

    def encode(self, first: int, events: Sequence[TurnEvent]) -> bytes:
        """The body of the batch holding `events`, the first one numbered `first`."""
        text = json.dumps([_encode(event) for event in events], separators=(",", ":"))
        if self._sealer is None:
            return _PLAIN + text.encode("utf-8", "surrogatepass")
        sealed = self._sealer.seal(text, session_id=self._session_id, message_id=self._at(first))
        return _SEALED + sealed.encode("ascii")

    def decode(self, first: int, body: bytes) -> list[TurnEvent]:
        """The events of a batch body; ValueError (or SealedResponseError) when unusable."""
        kind, data = body[:1], body[1:]
        if kind == _SEALED:
            if self._sealer is None:
                raise ValueError("a sealed batch without a sealer")
            text = self._sealer.open(
                data.decode("ascii"), session_id=self._session_id, message_id=self._at(first)
            )
        elif kind == _PLAIN:
            text = data.decode("utf-8", "surrogatepass")
        else:
            raise ValueError("unknown batch encoding")
        items = json.loads(text)
        if not isinstance(items, list):
            raise ValueError("a batch is a list of events")
        return [_decode(item) for item in items]

    def _at(self, first: int) -> str:
        return f"turn-events:{self._name}:{first}"


def _snapshot(value: ConversationSnapshot) -> list[Any]:
    return [value.state, list(value.events), list(value.actions)]


def _usage(value: Usage | None) -> list[int] | None:
    return None if value is None else [value.input_tokens, value.output_tokens]


def _encode(event: TurnEvent) -> list[Any]:
    encoded = _fields(event)
    encoded.append(event.time_ns)
    if isinstance(event, ToolStarted):
        encoded.append(event.wait)  # after the time, where older servers' logs end
    return encoded


def _fields(event: TurnEvent) -> list[Any]:
    if isinstance(event, Delta):
        return ["d", event.text]
    if isinstance(event, ToolDelta):
        return ["td", event.call_id, event.arguments]
    if isinstance(event, ToolStarted):
        return ["ts", event.call_id, event.name]
    if isinstance(event, ToolEnded):
        return ["te", event.call_id, event.arguments, event.wait]
    if isinstance(event, ToolRan):
        return ["tr", event.call_id, event.content, event.error_type, event.message_id]
    if isinstance(event, Started):
        return [
            "s",
            event.operation,
            event.user_message_id,
            event.duplicate,
            event.assistant_message_id,
        ]
    if isinstance(event, Decided):
        return ["k", event.kind, event.route_id, event.from_state, event.to_state, event.replayed]
    if isinstance(event, Completed):
        encoded = [
            "c",
            event.assistant_message_id,
            event.content,
            _snapshot(event.snapshot),
            event.cursor,
            _usage(event.usage),
            event.finish_reason,
        ]
        # Always present, so that the time comes at one place after them.
        encoded.append([[c.id, c.name, c.arguments] for c in event.tool_calls])
        encoded.append([[p.call_id, p.name, p.wait] for p in event.pending])
        return encoded
    return ["f", event.code, event.message, event.retryable, event.route_id]


_TIME_AT: Final = {"d": 1, "td": 2, "ts": 2, "te": 3, "tr": 4, "s": 4, "k": 5, "c": 8, "f": 4}
"""Where each kind of event holds its time among its fields."""


def _decode(item: Any) -> TurnEvent:
    if not isinstance(item, list) or not item:
        raise ValueError("an event is a non-empty list")
    event = _event(item[0], item[1:])
    at = _TIME_AT[item[0]]
    if len(item) > at + 1:
        time_ns = item[at + 1]
        if type(time_ns) is not int or time_ns < 0:
            raise ValueError("an event's time is a count of nanoseconds")
        event = dataclasses.replace(event, time_ns=time_ns)
    return event


def _event(tag: Any, fields: list[Any]) -> TurnEvent:
    if tag == "d":
        return Delta(str(fields[0]))
    if tag == "td":
        return ToolDelta(str(fields[0]), str(fields[1]))
    if tag == "ts":  # the wait follows the time (absent from older servers' logs)
        wait = str(fields[3]) if len(fields) > 3 else "result"
        return ToolStarted(str(fields[0]), str(fields[1]), wait)
    if tag == "te":
        return ToolEnded(str(fields[0]), str(fields[1]), str(fields[2]))
    if tag == "tr":
        error = None if fields[2] is None else str(fields[2])
        return ToolRan(str(fields[0]), str(fields[1]), error, str(fields[3]))
    if tag == "s":
        answer_id = fields[3] if len(fields) > 3 else None  # absent from older servers' logs
        return Started(fields[0], fields[1], bool(fields[2]), answer_id)
    if tag == "k":
        return Decided(fields[0], fields[1], fields[2], fields[3], bool(fields[4]))
    if tag == "c":
        state, events, actions = fields[2]
        usage = None if fields[4] is None else Usage(int(fields[4][0]), int(fields[4][1]))
        snapshot = ConversationSnapshot(state, tuple(events), tuple(actions))
        finish = str(fields[5]) if len(fields) > 5 else ""  # absent from older servers' logs
        calls = tuple(ToolCall(*map(str, c)) for c in fields[6]) if len(fields) > 6 else ()
        pending = tuple(PendingCall(*map(str, p)) for p in fields[7]) if len(fields) > 7 else ()
        return Completed(
            fields[0], fields[1], snapshot, int(fields[3]), usage, finish, calls, pending
        )
    if tag == "f":
        return Failed(fields[0], fields[1], bool(fields[2]), fields[3])
    raise ValueError("unknown event kind")
