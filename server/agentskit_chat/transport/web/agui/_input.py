"""An AG-UI `RunAgentInput`, checked by hand: each mistake is a 400 naming the field.

Only what the service uses is read: `threadId` (the session), `runId` (the turn),
`messages` (their ids, roles, text and tool data), `tools` and `resume` (see `_tools`); a
string of those that is not Unicode text (a lone surrogate, which has no UTF-8 form) is
refused naming its field. `state`, `forwardedProps` and `context` are accepted in any JSON
shape the protocol allows and ignored: the client's state is never the machine's. Messages
of roles the conversation does not hold (`activity`, `reasoning`) are skipped; `developer`
counts as `system`. A message's content is its text, or the concatenation of its text
parts; any other part is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary.fields import unicode_text
from agentskit_chat.transport.web.boundary.fronts import FrontError, bad_request

from . import _tools

ROLES: Final[Mapping[str, int]] = {
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "system": pb.ROLE_SYSTEM,
    "developer": pb.ROLE_SYSTEM,
    "tool": pb.ROLE_TOOL,
}
SKIPPED_ROLES: Final = frozenset({"activity", "reasoning"})
EVENT_ID: Final = re.compile(r"(\d{1,19})\.(\d)")
RESULT_FIELDS: Final[Mapping[str, str]] = {
    "tool_call_id": "toolCallId",
    "content": "content",
    "message_id": "id",
}


@dataclass(frozen=True, slots=True)
class InputMessage:
    """One message of the input, with its place in the request's `messages`."""

    index: int
    id: str
    role: int
    content: str
    calls: tuple[pb.ToolCall, ...] = ()
    """An assistant message's tool calls."""
    answers: str = ""
    """The call a tool message answers."""

    def proto(self) -> pb.Message:
        """The message as the contract's `Message`."""
        return pb.Message(
            id=self.id,
            role=self.role,  # type: ignore[arg-type]
            content=self.content,
            tool_calls=self.calls,
            tool_call_id=self.answers,
        )


@dataclass(frozen=True, slots=True)
class RunInput:
    """The parts of a `RunAgentInput` the front uses."""

    thread_id: str
    run_id: str
    messages: Sequence[InputMessage]
    tools: tuple[pb.ToolDeclaration, ...] = ()
    approvals: tuple[pb.ToolApproval, ...] = ()

    def proto_messages(self) -> list[pb.Message]:
        """The messages as the contract's `Message`s, for a dispatch."""
        return [m.proto() for m in self.messages]

    @property
    def asks(self) -> bool:
        """Whether the run runs a turn: the input ends with a user message, or with tool
        results or resume entries that continue the last answer."""
        return self.continues or (bool(self.messages) and self.messages[-1].role == pb.ROLE_USER)

    @property
    def continues(self) -> bool:
        """Whether the run continues the last answer (tool results or resume entries)."""
        return bool(self.approvals) or (
            bool(self.messages) and self.messages[-1].role == pb.ROLE_TOOL
        )

    def results(self) -> list[InputMessage]:
        """The tool messages that end the input (the results of the last answer's calls)."""
        start = len(self.messages)
        while start > 0 and self.messages[start - 1].role == pb.ROLE_TOOL:
            start -= 1
        return list(self.messages[start:])

    def held_calls(self) -> frozenset[str]:
        """The calls a continuing run's input holds unanswered (approved calls the answer
        sends back to run): their events are not sent again (empty for other runs)."""
        if not self.continues:
            return frozenset()
        made = {call.id for m in self.messages for call in m.calls}
        return frozenset(made - {m.answers for m in self.messages if m.answers})

    def field_of(self, service_field: str | None) -> str | None:
        """The request field a service error's field names (`session_id` -> `threadId`,
        `dispatch.messages[2].id` -> `messages[<its index here>].id`, ...)."""
        if service_field is None:
            return None
        if service_field == "session_id":
            return "threadId"
        if service_field == "turn_id":
            return "runId"
        approval = re.fullmatch(r"(?:dispatch|tool_results)\.approvals\[(\d+)\].*", service_field)
        if approval is not None:
            return f"resume[{approval.group(1)}].interruptId"
        result = re.fullmatch(r"tool_results\.results\[(\d+)\]\.?(.*)", service_field)
        results = self.results()
        if result is not None and int(result.group(1)) < len(results):
            name = RESULT_FIELDS.get(result.group(2), result.group(2))
            return f"messages[{results[int(result.group(1))].index}].{name}"
        if service_field.startswith("tools["):
            return _tools.request_field(service_field)
        last = self.messages[-1].index if self.messages else 0
        for prefix in ("submit.", "edit.", "retry.", "regenerate."):
            if service_field.startswith(prefix):
                name = service_field.removeprefix(prefix)
                return f"messages[{last}].{'id' if name == 'message_id' else name}"
        found = re.fullmatch(r"dispatch\.messages\[(\d+)\](.*)", service_field)
        if found is not None and int(found.group(1)) < len(self.messages):
            name = _tools.request_field(found.group(2))
            return f"messages[{self.messages[int(found.group(1))].index}]{name}"
        if service_field.startswith("dispatch.messages"):
            return "messages"
        return service_field


def run_input(body: Mapping[str, Any]) -> RunInput:
    """The input of a run; `bad_request` naming the first malformed field."""
    thread_id = _text(body, "threadId")
    run_id = _text(body, "runId")
    if body.get("context") is not None and not isinstance(body["context"], list):
        raise bad_request("context", "context must be an array")
    tools = _tools.declarations(body.get("tools"))
    raw = body.get("messages", [])
    if not isinstance(raw, list):
        raise bad_request("messages", "messages must be an array")
    messages = []
    for index, item in enumerate(raw):
        message = _message(index, item)
        if message is not None:
            messages.append(message)
    approvals = _tools.approvals(body.get("resume"))
    return RunInput(thread_id, run_id, tuple(messages), tools, approvals)


def last_event_id(value: str | None) -> tuple[int, int] | None:
    """The `(sequence, slot)` a `Last-Event-ID` header names; None when absent."""
    if value is None:
        return None
    found = EVENT_ID.fullmatch(value.strip())
    if found is None or int(found.group(1)) >= 2**63:
        raise bad_request("Last-Event-ID", "Last-Event-ID must be an event id this server sent")
    return int(found.group(1)), int(found.group(2))


def _text(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise bad_request(name, f"{name} must be a non-empty string")
    return unicode_text(name, value)


def _message(index: int, item: Any) -> InputMessage | None:
    at = f"messages[{index}]"
    if not isinstance(item, dict):
        raise bad_request(at, f"{at} must be an object")
    role = item.get("role")
    if not isinstance(role, str) or (role not in ROLES and role not in SKIPPED_ROLES):
        raise bad_request(f"{at}.role", f"{at}.role must be one of {', '.join(ROLES)}")
    message_id = item.get("id")
    if not isinstance(message_id, str) or not message_id:
        raise bad_request(f"{at}.id", f"{at}.id must be a non-empty string")
    unicode_text(f"{at}.id", message_id)
    if role in SKIPPED_ROLES:
        return None
    content = _content(at, item.get("content"))
    if role == "assistant":
        calls = tuple(_tools.assistant_calls(item, at))
        return InputMessage(index, message_id, ROLES[role], content, calls)
    if role == "tool":
        answers = _tools.answered_call(item, at)
        return InputMessage(index, message_id, ROLES[role], content, (), answers)
    return InputMessage(index, message_id, ROLES[role], content)


def _content(at: str, content: Any) -> str:
    if content is None or isinstance(content, str):
        return unicode_text(f"{at}.content", content or "")
    if not isinstance(content, list):
        raise bad_request(f"{at}.content", f"{at}.content must be a string or an array of parts")
    texts = []
    for part_index, part in enumerate(content):
        where = f"{at}.content[{part_index}]"
        if not isinstance(part, dict) or part.get("type") != "text":
            raise bad_request(where, f"{where} must be a text part: other parts are not supported")
        text = part.get("text")
        if not isinstance(text, str):
            raise bad_request(f"{where}.text", f"{where}.text must be a string")
        texts.append(unicode_text(f"{where}.text", text))
    return "".join(texts)


def refusal(error: FrontError, run: RunInput) -> FrontError:
    """`error` with its field named as the request names it (in its message too), and
    its code as the listener's own refusals spell it (`invalid_argument`, not
    `error_reason_...`)."""
    named = run.field_of(error.field)
    if error.field and named and error.field != named:
        error.message = error.message.replace(error.field, named)
    error.field = named
    error.code = error.code.removeprefix("error_reason_")
    return error
