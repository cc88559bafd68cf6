"""UI messages read into the contract's history.

A user or system UIMessage is one message: its id, role and the text of its text parts. An
assistant UIMessage holds every step of one answer (`step-start` parts between them, as
`useChat` keeps them), so it becomes one assistant message per step, each followed by a
`ROLE_TOOL` message for each of its calls that has an output: the text of the step as the
content, its tool parts as `tool_calls`. The first step keeps the UIMessage's id; a later
step is `{id}:{step}` and a tool message `{id}:r{n}`. A step with neither text nor calls
adds nothing (a message with none at all is one assistant message without content).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary.fields import unicode_text
from agentskit_chat.transport.web.boundary.fronts import bad_request

from ._tools import ToolPart, is_tool_part, tool_part

ROLES: Final = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT, "system": pb.ROLE_SYSTEM}


@dataclass(slots=True)
class _Step:
    texts: list[str] = field(default_factory=list)
    calls: list[ToolPart] = field(default_factory=list)

    def empty(self) -> bool:
        return not self.calls and not any(self.texts)


@dataclass(frozen=True, slots=True)
class UiMessage:
    """One UIMessage as contract messages, and the calls of its last step."""

    id: str
    role: int
    messages: tuple[pb.Message, ...] = field(repr=False)
    last_calls: tuple[ToolPart, ...] = field(default=(), repr=False)


def ui_message(item: Mapping[str, Any], where: str, message_id: str, last: bool) -> UiMessage:
    """The contract messages of the UIMessage `item` (`where` names it: `messages[i]`);
    `last` for the request's last message, whose last step leaves out the results of
    denied calls (the service holds those already: they are not answers it waits on)."""
    name = item.get("role")
    role = ROLES.get(name) if isinstance(name, str) else None
    if role is None:
        raise bad_request(f"{where}.role", f"{where}.role must be user, assistant or system")
    parts = item.get("parts")
    if not isinstance(parts, list):
        raise bad_request(f"{where}.parts", f"{where}.parts must be an array")
    steps = [_Step()]
    for number, part in enumerate(parts):
        at = f"{where}.parts[{number}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise bad_request(at, f"{at} must be an object with a string type")
        kind = part["type"]
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_request(f"{at}.text", f"{at}.text must be a string")
            if role == pb.ROLE_ASSISTANT and steps[-1].calls:  # text after calls: a new step
                steps.append(_Step())
            steps[-1].texts.append(unicode_text(f"{at}.text", text))
        elif kind == "step-start" and role == pb.ROLE_ASSISTANT:
            if not steps[-1].empty():
                steps.append(_Step())
        elif is_tool_part(kind):
            if role != pb.ROLE_ASSISTANT:
                raise bad_request(at, f"{at} is a tool part, which only assistant messages hold")
            call = tool_part(part, at)
            if call is not None:
                steps[-1].calls.append(call)
    if role != pb.ROLE_ASSISTANT:
        content = "".join(steps[0].texts)
        return UiMessage(message_id, role, (pb.Message(id=message_id, role=role, content=content),))
    return _assistant(message_id, [s for s in steps if not s.empty()], last)


def _assistant(message_id: str, steps: list[_Step], last: bool) -> UiMessage:
    if not steps:
        plain = pb.Message(id=message_id, role=pb.ROLE_ASSISTANT, content="")
        return UiMessage(message_id, pb.ROLE_ASSISTANT, (plain,))
    messages: list[pb.Message] = []
    results = 0
    for index, step in enumerate(steps):
        messages.append(
            pb.Message(
                id=message_id if index == 0 else f"{message_id}:{index}",
                role=pb.ROLE_ASSISTANT,
                content="".join(step.texts),
                tool_calls=[c.call for c in step.calls],
            )
        )
        final = last and index == len(steps) - 1
        for call in step.calls:
            if call.result is not None and not (final and call.denied):
                messages.append(
                    pb.Message(
                        id=f"{message_id}:r{results}",
                        role=pb.ROLE_TOOL,
                        content=call.result,
                        tool_call_id=call.call.id,
                    )
                )
                results += 1
    return UiMessage(message_id, pb.ROLE_ASSISTANT, tuple(messages), tuple(steps[-1].calls))


@dataclass(frozen=True, slots=True)
class Answers:
    """What a request's last assistant message answers of the calls of its last step: the
    results (for a server-held chat's tool_results) and the approval responses."""

    results: tuple[pb.ToolResult, ...] = field(repr=False)
    approvals: tuple[pb.ToolApproval, ...] = field(repr=False)
    held: frozenset[str] = frozenset()
    """The calls of the last step: the message holds their parts already."""

    @property
    def denied(self) -> tuple[str, ...]:
        """The calls this request denies."""
        return tuple(a.tool_call_id for a in self.approvals if not a.approved)


def answers(last: UiMessage) -> Answers | None:
    """The answers of the request's last message; None when it is not an assistant
    message whose last step has a result or an approval response (an ordinary request)."""
    if last.role != pb.ROLE_ASSISTANT:
        return None
    results = tuple(
        pb.ToolResult(tool_call_id=c.call.id, content=c.result)
        for c in last.last_calls
        if c.result is not None and not c.denied
    )
    approvals = tuple(c.approval for c in last.last_calls if c.approval is not None)
    if not results and not approvals:
        return None
    return Answers(results, approvals, frozenset(c.call.id for c in last.last_calls))
