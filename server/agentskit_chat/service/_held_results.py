"""Server tool results a client-held history cannot carry back, kept with the turn.

An answer may call server tools and the client's tools at once: the service runs its own
calls, and the turn completes waiting for the client's. A server-held history stores the
server's results after the answer. A client-held one is the renderer's to keep, and not
every renderer can: the OpenAI front shows no server tool calls at all, so its client sends
the answer back with only its own calls. The turn's record therefore keeps the answer's
calls and the server's results (sealed, as `TerminalTurn.rounds` under HELD), and the turn
that continues it gives the model the ones the client's history lacks, where they belong:
the answer with all its calls, then the server's results, then the client's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from agentskit_chat.conversation import Message, RecordedRounds, Role, SessionRecord

HELD: Final = "held"
"""The `RecordedRounds.of` of a completed turn's held results (never a request digest,
which is hex: a retry never resumes after them)."""


def held_results(answer: Message, results: tuple[Message, ...]) -> RecordedRounds:
    """What a turn waiting on the client keeps: its answer (all its calls) and the server
    tools' results."""
    return RecordedRounds(HELD, (answer, *results))


def _kept(record: SessionRecord) -> RecordedRounds | None:
    """The held results of the newest turn, when it completed waiting with some."""
    if not record.recent_turns:
        return None
    last = record.recent_turns[-1]
    kept = last.rounds
    if last.outcome != "completed" or kept is None or kept.of != HELD or not kept.messages:
        return None
    return kept


def held_call_ids(record: SessionRecord) -> frozenset[str]:
    """The calls whose results the newest turn keeps (a client may send them too)."""
    kept = _kept(record)
    if kept is None:
        return frozenset()
    return frozenset(m.tool_call_id for m in kept.messages[1:] if m.tool_call_id is not None)


def with_held_results(record: SessionRecord, messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """`messages` of a turn continuing the newest turn with the server's results that
    turn kept and `messages` lack: the answer that waits on the client gets every call the
    model made, and the missing results follow it. Unchanged when there is nothing to add,
    or the answer is not among `messages`."""
    kept = _kept(record)
    if kept is None:
        return messages
    answer, *results = kept.messages
    have = {m.tool_call_id for m in messages if m.tool_call_id is not None}
    missing = tuple(r for r in results if r.tool_call_id not in have)
    if not missing:
        return messages
    ours = {call.id for call in answer.tool_calls}
    for index, message in enumerate(messages):
        if message.role == Role.ASSISTANT and any(c.id in ours for c in message.tool_calls):
            theirs = {call.id for call in message.tool_calls}
            calls = (
                *message.tool_calls,
                *(call for call in answer.tool_calls if call.id not in theirs),
            )
            whole = replace(message, tool_calls=calls)
            return (*messages[:index], whole, *missing, *messages[index + 1 :])
    return messages
