"""The server tool rounds a failed agentic turn completed, kept sealed with its record.

When an agentic turn fails after the service ran server tools in it (the model fails in a
later round, the turn's deadline passes, the rounds run out), the record of the failed
turn keeps those rounds: each answer with its calls, and each call's result. A retry of
the same request (a turn whose model would be asked with the same messages) resumes after
them instead of running the calls again.

The rounds are content: they are stored only sealed (AES-SIV under the deployment key, as
route responses are), bound to the session and the turn. A record written without a sealer
keeps no rounds, so such a retry asks the model afresh.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._errors import MalformedRecordError, SealedResponseError
from ._sealing import ResponseSealer
from ._types import Message, Role, ToolCall


@dataclass(frozen=True, slots=True)
class RecordedRounds:
    """Server tool rounds a failed turn completed, and the request they belong to."""

    of: str
    """Keyed digest of the messages the turn's model was first asked with (see
    `rounds_digest`): a retry resumes only the same request."""
    messages: tuple[Message, ...]
    """Each round's answer (its server tool calls) and its calls' results, in order; the
    last answer may lack the results of calls that did not run."""
    errors: tuple[tuple[str, str], ...] = ()
    """`(call id, error type)` of the recorded results that are errors."""

    def error_of(self, call_id: str) -> str | None:
        """The error type of the recorded result of `call_id`; None for a plain result."""
        return next((error for call, error in self.errors if call == call_id), None)


def rounds_digest(digest: Callable[[str], str], messages: tuple[Message, ...]) -> str:
    """The keyed digest (`digest`: text to hex digest) of what a model is asked with:
    roles, contents, calls and call ids of `messages`, without the messages' ids (a message
    sent again has a new id)."""
    shape = [[m.role.value, m.content, _calls(m.tool_calls), m.tool_call_id] for m in messages]
    text = json.dumps(shape, ensure_ascii=False, separators=(",", ":"))
    return digest(text)


def seal_rounds(
    rounds: RecordedRounds, sealer: ResponseSealer, *, session_id: str, turn_id: str
) -> dict[str, str]:
    """The stored form of `rounds`: sealed for this turn of this session."""
    errors = dict(rounds.errors)
    body = {
        "of": rounds.of,
        "messages": [
            [
                m.id,
                m.role.value,
                m.content,
                _calls(m.tool_calls),
                m.tool_call_id,
                None if m.tool_call_id is None else errors.get(m.tool_call_id),
            ]
            for m in rounds.messages
        ],
    }
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return {"sealed": sealer.seal(text, session_id=session_id, message_id=_place(turn_id))}


def open_rounds(
    raw: Any, sealer: ResponseSealer | None, *, session_id: str, turn_id: str, where: str
) -> RecordedRounds:
    """The rounds `seal_rounds` stored; MalformedRecordError when they are not well formed,
    SealedResponseError when they do not open (or no sealer is given)."""
    if not isinstance(raw, dict) or set(raw) != {"sealed"} or not isinstance(raw["sealed"], str):
        raise MalformedRecordError(f"{where} must be an object holding sealed rounds")
    if sealer is None:
        raise SealedResponseError("the record holds sealed rounds and no key was given")
    text = sealer.open(raw["sealed"], session_id=session_id, message_id=_place(turn_id))
    try:
        body = json.loads(text)
        messages: list[Message] = []
        errors: list[tuple[str, str]] = []
        for item in body["messages"]:
            message_id, role, content, calls, call_id, error = item
            messages.append(
                Message(
                    str(message_id),
                    Role(role),
                    str(content),
                    tuple(ToolCall(str(c[0]), str(c[1]), str(c[2])) for c in calls),
                    None if call_id is None else str(call_id),
                )
            )
            if call_id is not None and error is not None:
                errors.append((str(call_id), str(error)))
        return RecordedRounds(str(body["of"]), tuple(messages), tuple(errors))
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedRecordError(f"{where} holds malformed rounds") from exc


def _calls(calls: tuple[ToolCall, ...]) -> list[list[str]]:
    return [[c.id, c.name, c.arguments] for c in calls]


def _place(turn_id: str) -> str:
    """What sealed rounds are bound to besides the session (never a message id)."""
    return f"turn-rounds:{turn_id}"
