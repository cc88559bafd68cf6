"""The AI SDK's chat request and UI message stream, as the `/ai-sdk/` front reads and writes them.

`ChatRequest.parse` reads the body `DefaultChatTransport` posts (`id` = chat id, `messages`
as UIMessages with `parts`, `trigger`, `messageId`, plus this server's optional `turnId`
and `resumable`), checking each field and naming the one at fault, never its value (text
that is not Unicode, a lone surrogate, is refused there too).
`Chunks` turns a turn's events into UI message stream chunks (`start`, data parts,
`text-start` / `text-delta` / `text-end`, `finish`, `error`); `chunk` frames one as the
server-sent event the AI SDK's parser reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.conversation import Message, Role
from agentskit_chat.service import Limits, ServiceError
from agentskit_chat.transport.web.boundary.fronts import FrontError, bad_request, json_bytes

SUBMIT: Final = "submit-message"
REGENERATE: Final = "regenerate-message"
ROLES: Final = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT, "system": pb.ROLE_SYSTEM}
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
_SERVICE_FIELD: Final = re.compile(r"dispatch\.messages\[(\d+)\]\.(id|content)")
_FIELDS: Final = {"turn_id": "turnId", "session_id": "id", "dispatch.messages": "messages"}


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One request of `useChat`'s default transport, checked."""

    chat_id: str
    messages: tuple[pb.Message, ...]
    """Every UIMessage: its id, role and the text of its text parts, in order."""
    trigger: str
    message_id: str | None
    turn_id: str | None
    resumable: bool

    @classmethod
    def parse(cls, body: dict[str, Any], limits: Limits) -> ChatRequest:
        """The request in `body`; `bad_request` naming the first malformed field."""
        chat_id = checked_id(body.get("id"), "id", limits)
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise bad_request("messages", "messages must be a non-empty array of UI messages")
        messages = tuple(_message(item, index, limits) for index, item in enumerate(raw))
        trigger = body.get("trigger", SUBMIT)
        if trigger not in (SUBMIT, REGENERATE):
            raise bad_request("trigger", "trigger must be submit-message or regenerate-message")
        message_id = body.get("messageId")
        if message_id is not None:
            message_id = checked_id(message_id, "messageId", limits)
        turn_id = body.get("turnId")
        if turn_id is not None:
            turn_id = checked_id(turn_id, "turnId", limits)
        resumable = body.get("resumable", False)
        if not isinstance(resumable, bool):
            raise bad_request("resumable", "resumable must be a boolean")
        request = cls(chat_id, messages, trigger, message_id, turn_id, resumable)
        request.check(limits)
        return request

    def check(self, limits: Limits) -> None:
        """Refuse, before anything is stored, what the service would refuse of the history:
        repeated ids, sizes, and a last user message without text."""
        try:
            limits.check_dispatch([_plain(m) for m in self.messages])
            index = self.last_user()
            limits.check_text(f"dispatch.messages[{index}].content", self.messages[index].content)
        except ServiceError as error:
            raise refusal(error) from None

    def last_user(self) -> int:
        """The index of the last user message; `bad_request` when there is none."""
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].role == pb.ROLE_USER:
                return index
        raise bad_request("messages", "messages holds no user message to answer")

    def history(self) -> list[pb.Message]:
        """The client-held history to dispatch: every message, less the answers after the
        last user message when the answer is regenerated."""
        keep = len(self.messages)
        if self.trigger == REGENERATE:
            keep = self.last_user() + 1
        return list(self.messages[:keep])


def refusal(error: ServiceError) -> FrontError:
    """The front's refusal of `error`, the fields it names named as the AI SDK request
    names them (`dispatch.messages[2].content` is `messages[2].parts`)."""
    refused = FrontError.of(error)
    refused.code = error.reason.name.lower()  # as the front's own refusals name theirs
    refused.message = _SERVICE_FIELD.sub(_field, refused.message)
    if refused.field is not None:
        refused.field = _SERVICE_FIELD.sub(_field, refused.field)
        refused.field = _FIELDS.get(refused.field, refused.field)
    else:  # a size limit names the message in its text only
        found = _SERVICE_FIELD.search(error.message)
        refused.field = None if found is None else _field(found)
    return refused


def _field(found: re.Match[str]) -> str:
    index, part = found.groups()
    return f"messages[{index}].{'id' if part == 'id' else 'parts'}"


def checked_id(value: object, field: str, limits: Limits) -> str:
    """`value` when it is a well-formed id; `bad_request` naming `field` otherwise."""
    if not isinstance(value, str):
        raise bad_request(field, f"{field} must be a string")
    try:
        return limits.check_id(field, value)
    except ServiceError as error:
        raise refusal(error) from None


def _message(item: object, index: int, limits: Limits) -> pb.Message:
    where = f"messages[{index}]"
    if not isinstance(item, dict):
        raise bad_request(where, f"{where} must be a UI message object")
    message_id = checked_id(item.get("id"), f"{where}.id", limits)
    name = item.get("role")
    role = ROLES.get(name) if isinstance(name, str) else None
    if role is None:
        raise bad_request(f"{where}.role", f"{where}.role must be user, assistant or system")
    parts = item.get("parts")
    if not isinstance(parts, list):
        raise bad_request(f"{where}.parts", f"{where}.parts must be an array")
    texts: list[str] = []
    for number, part in enumerate(parts):
        field = f"{where}.parts[{number}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise bad_request(field, f"{field} must be an object with a string type")
        if part["type"] == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_request(f"{field}.text", f"{field}.text must be a string")
            texts.append(_unicode(f"{field}.text", text))
    return pb.Message(id=message_id, role=role, content="".join(texts))


def _unicode(field: str, value: str) -> str:
    """`value` when it has a UTF-8 form (no lone surrogate); `bad_request` naming `field`."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise bad_request(field, f"{field} must be Unicode text (no lone surrogates)") from None
    return value


def _plain(message: pb.Message) -> Message:
    role = {pb.ROLE_USER: Role.USER, pb.ROLE_ASSISTANT: Role.ASSISTANT}.get(
        message.role, Role.SYSTEM
    )
    return Message(message.id, role, message.content)


def chunk(value: dict[str, Any]) -> bytes:
    """One UI message stream chunk as the server-sent event the AI SDK parses."""
    return b"data: " + json_bytes(value) + b"\n\n"


class Commands:
    """The commands a renderer may offer as buttons in a state: the input text of each
    route that is eligible there (its event allowed, the state among its states)."""

    def __init__(self, definition: pb.Definition) -> None:
        self.routes = [r for r in definition.routes if r.input_text]

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
    """The UI message stream chunks of one turn's events, in order."""

    def __init__(self, chat_id: str, before: pb.Snapshot, commands: Commands) -> None:
        self.chat_id = chat_id
        self.before = before
        self.commands = commands
        self.text_open = False
        self.ended = False

    def of(self, event: pb.StreamTurnResponse) -> list[dict[str, Any]]:
        """The chunks of `event` (none for an event the stream does not show)."""
        which = event.WhichOneof("event")
        if which == "delta":
            return [
                *self._open_text(),
                {"type": "text-delta", "id": TEXT_ID, "delta": event.delta.text},
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
        if event.started.assistant_message_id:
            start["messageId"] = event.started.assistant_message_id
        start["messageMetadata"] = {"chatId": self.chat_id, "turnId": event.turn_id}
        found = [start]
        found.append(snapshot_part(self.before, self.commands))
        return found

    def _open_text(self) -> list[dict[str, Any]]:
        if self.text_open:
            return []
        self.text_open = True
        return [{"type": "text-start", "id": TEXT_ID}]

    def _close_text(self) -> list[dict[str, Any]]:
        return [{"type": "text-end", "id": TEXT_ID}] if self.text_open else []

    def _completed(self, completed: pb.TurnCompleted) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        if not self.text_open and completed.content:  # a repeated turn: its answer at once
            found += [*self._open_text()]
            found.append({"type": "text-delta", "id": TEXT_ID, "delta": completed.content})
        found += self._close_text()
        found.append(snapshot_part(completed.snapshot, self.commands))
        finish: dict[str, Any] = {"type": "finish", "finishReason": "stop"}
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
