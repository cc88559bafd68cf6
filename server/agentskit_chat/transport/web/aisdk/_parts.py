"""The AI SDK's chat request, as the `/ai-sdk/` front reads it.

`ChatRequest.parse` reads the body `DefaultChatTransport` posts (`id` = chat id, `messages`
as UIMessages with `parts`, `trigger`, `messageId`, plus this server's optional `turnId`,
`resumable` and the tool declarations `tools`, `toolChoice`, `parallelToolCalls`),
checking each field and naming the one at fault, never its value (text that is not
Unicode, a lone surrogate, is refused there too). A request whose last message is an
assistant message with tool outputs or approval responses in its last step continues that
answer (see `_messages`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.conversation import Message, Role
from agentskit_chat.service import Limits, ServiceError
from agentskit_chat.transport.web.boundary.fronts import FrontError, bad_request
from agentskit_chat.transport.web.boundary.tools import NO_TOOLS, TurnTools

from ._messages import Answers, answers, ui_message
from ._tools import tool_setup

SUBMIT: Final = "submit-message"
REGENERATE: Final = "regenerate-message"
_SERVICE_FIELD: Final = re.compile(r"dispatch\.messages\[(\d+)\]\.(\w+)[\w.\[\]]*")
_CONTINUATION_FIELD: Final = re.compile(
    r"(tool_results\.(results|approvals)|dispatch\.approvals)\[\d+\][\w.]*|tool_call:\S+"
)
_FIELDS: Final = {"turn_id": "turnId", "session_id": "id", "dispatch.messages": "messages"}
_ROLES: Final = {
    pb.ROLE_USER: Role.USER,
    pb.ROLE_ASSISTANT: Role.ASSISTANT,
    pb.ROLE_TOOL: Role.TOOL,
}


@dataclass(frozen=True, slots=True)
class Fields:
    """How the service's fields name the request's: the UIMessage each contract message
    came from."""

    origins: tuple[int, ...] = ()

    def message(self, index: int) -> int:
        return self.origins[index] if index < len(self.origins) else index

    def last(self) -> str:
        return f"messages[{self.origins[-1] if self.origins else 0}].parts"


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One request of `useChat`'s default transport, checked."""

    chat_id: str
    messages: tuple[pb.Message, ...] = field(repr=False)
    """The history the UIMessages make (see `_messages`), in order."""
    trigger: str
    message_id: str | None
    turn_id: str | None
    resumable: bool
    tools: TurnTools = NO_TOOLS
    fields: Fields = field(default_factory=Fields)
    answers: Answers | None = None
    """What the last message answers of the pending calls, when it continues an answer."""
    continues: str | None = None
    """The id of the assistant UIMessage the request continues."""

    @classmethod
    def parse(cls, body: dict[str, Any], limits: Limits) -> ChatRequest:
        """The request in `body`; `bad_request` naming the first malformed field."""
        chat_id = checked_id(body.get("id"), "id", limits)
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise bad_request("messages", "messages must be a non-empty array of UI messages")
        messages: list[pb.Message] = []
        origins: list[int] = []
        last = None
        for index, item in enumerate(raw):
            where = f"messages[{index}]"
            if not isinstance(item, dict):
                raise bad_request(where, f"{where} must be a UI message object")
            message_id = checked_id(item.get("id"), f"{where}.id", limits)
            last = ui_message(item, where, message_id, index == len(raw) - 1)
            messages.extend(last.messages)
            origins.extend([index] * len(last.messages))
        assert last is not None
        trigger = body.get("trigger", SUBMIT)
        if trigger not in (SUBMIT, REGENERATE):
            raise bad_request("trigger", "trigger must be submit-message or regenerate-message")
        asked_id = body.get("messageId")
        if asked_id is not None:
            asked_id = checked_id(asked_id, "messageId", limits)
        turn_id = body.get("turnId")
        if turn_id is not None:
            turn_id = checked_id(turn_id, "turnId", limits)
        resumable = body.get("resumable", False)
        if not isinstance(resumable, bool):
            raise bad_request("resumable", "resumable must be a boolean")
        answered = None if trigger == REGENERATE else answers(last)
        request = cls(
            chat_id,
            tuple(messages),
            trigger,
            asked_id,
            turn_id,
            resumable,
            tool_setup(body),
            Fields(tuple(origins)),
            answered,
            None if answered is None else last.id,
        )
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
            raise refusal(error, self.fields) from None

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


def refusal(error: ServiceError, fields: Fields | None = None) -> FrontError:
    """The front's refusal of `error`, the fields it names named as the AI SDK request
    names them (`dispatch.messages[2].content` is `messages[i].parts` of the UIMessage it
    came from; a tool result or approval is `messages[last].parts`)."""
    fields = fields or Fields()
    refused = FrontError.of(error)
    refused.code = error.reason.name.lower()  # as the front's own refusals name theirs
    refused.message = _named(refused.message, fields)
    if refused.field is not None:
        refused.field = _FIELDS.get(refused.field) or _named(refused.field, fields)
    else:  # a size limit names the message in its text only
        found = _SERVICE_FIELD.search(error.message)
        refused.field = None if found is None else _field(found, fields)
    return refused


def _named(text: str, fields: Fields) -> str:
    text = _SERVICE_FIELD.sub(lambda found: _field(found, fields), text)
    return _CONTINUATION_FIELD.sub(lambda found: fields.last(), text)


def _field(found: re.Match[str], fields: Fields) -> str:
    index, part = found.groups()
    return f"messages[{fields.message(int(index))}].{'id' if part == 'id' else 'parts'}"


def checked_id(value: object, field: str, limits: Limits) -> str:
    """`value` when it is a well-formed id; `bad_request` naming `field` otherwise."""
    if not isinstance(value, str):
        raise bad_request(field, f"{field} must be a string")
    try:
        return limits.check_id(field, value)
    except ServiceError as error:
        raise refusal(error) from None


def _plain(message: pb.Message) -> Message:
    return Message(message.id, _ROLES.get(message.role, Role.SYSTEM), message.content)
