"""Which turn an AG-UI run runs, and what its stream opens with (see `_front`'s docs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Dispatch, Limits, Reason, ServiceError
from agentskit_chat.transport._convert import operation, tool_options
from agentskit_chat.transport._rpcs import ChatRpcs
from agentskit_chat.transport.web.boundary.fronts import FrontError

from ._calls import outcome
from ._events import (
    Slotted,
    messages_snapshot,
    run_finished,
    run_started,
    state_document,
    state_snapshot,
)
from ._input import RunInput

_TURNS_READ = 8
"""How many of a thread's newest turns a reopening run reads for the last completed one
(failed and running turns come before it)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """A run's opening events; the turn to run (None: the run runs none) and the state
    document before it; the cursor of the session the run created for the thread (None
    when it created none)."""

    opening: list[Slotted]
    request: pb.StreamTurnRequest | None
    document: dict[str, Any]
    definition: pb.Definition
    """The revision the thread's session runs (the URL's newest for a thread not created)."""
    created: int | None = None


async def plan_run(
    rpcs: ChatRpcs, run: RunInput, definition: pb.Definition, on_disconnect: int
) -> Plan:
    """What `run` does to its thread (creating a client-held session for a new thread
    that asks something)."""
    session = await _session(rpcs, run.thread_id)
    if session is not None and session.session.definition_id != definition.id:
        raise FrontError(409, "conflict", "the thread is of another definition", "threadId")
    if session is not None:
        definition = await of_revision(rpcs, definition, session.session.definition_revision)
    opening = [run_started(run.thread_id, run.run_id)]
    if not run.asks:
        state = definition.initial_state if session is None else session.session.snapshot.state
        document = state_document(definition, state)
        opening.append(state_snapshot(document))
        if session is not None and session.session.history_mode != pb.HISTORY_MODE_CLIENT:
            opening.append(messages_snapshot(session.messages))
        pending = () if session is None else await _waiting(rpcs, session)
        ended = outcome(pending) if pending else None
        opening.append(("0.4", run_finished(run.thread_id, run.run_id, ended=ended)))
        return Plan(opening, None, document, definition)
    request = pb.StreamTurnRequest(
        session_id=run.thread_id,
        turn_id=run.run_id,
        on_disconnect=on_disconnect,  # type: ignore[arg-type]
        tools=run.tools,
    )
    created = None
    if session is None:
        request.dispatch.messages.extend(run.proto_messages())
        _check_dispatch(rpcs.service.limits, run, request)  # refused before anything is stored
        state, created, revision = await _create(rpcs, run, definition.id)
        definition = await of_revision(rpcs, definition, revision)
    else:
        state = session.session.snapshot.state
        if session.session.history_mode == pb.HISTORY_MODE_CLIENT:
            request.dispatch.messages.extend(run.proto_messages())
            request.dispatch.approvals.extend(run.approvals)
        elif run.continues:
            _tool_results(request, run, session.messages)
        else:
            _operation(request, run, session.messages)
    document = state_document(definition, state)
    opening.append(state_snapshot(document))
    return Plan(opening, request, document, definition, created)


async def of_revision(rpcs: ChatRpcs, definition: pb.Definition, revision: int) -> pb.Definition:
    """`definition` as of `revision`, the one a thread's session runs (REVISION_MISMATCH
    when it is not served)."""
    if revision == definition.revision:
        return definition
    request = pb.GetDefinitionRequest(definition_id=definition.id, revision=revision)
    return (await rpcs.get_definition(request)).definition


def _check_dispatch(limits: Limits, run: RunInput, request: pb.StreamTurnRequest) -> None:
    """Raise what the service would refuse of the run's dispatch (the turn id, the
    messages' ids and sizes, the last user message's text, the tools; tool results or
    decisions, which a new thread has no answer for), so a thread is not created for a
    turn that cannot run."""
    limits.check_id("turn_id", run.run_id)
    if run.continues:
        raise ServiceError(
            Reason.NO_PENDING_TOOL_CALLS, "the thread's last answer waits on no tool call"
        )
    dispatch = operation(request)
    assert isinstance(dispatch, Dispatch)
    messages = dispatch.messages
    limits.check_dispatch(messages)
    last = len(messages) - 1
    limits.check_text(f"dispatch.messages[{last}].content", messages[last].content)
    tool_options(request, limits)


def _tool_results(
    request: pb.StreamTurnRequest, run: RunInput, history: Iterable[pb.Message]
) -> None:
    """A server-held thread's tool results (the tool messages that end the input, but
    those the history already has) and decisions (the resume entries), continuing the
    last answer."""
    request.tool_results.SetInParent()
    stored = {m.id for m in history}
    for message in run.results():
        if message.id in stored:
            continue
        request.tool_results.results.append(
            pb.ToolResult(
                tool_call_id=message.answers, content=message.content, message_id=message.id
            )
        )
    request.tool_results.approvals.extend(run.approvals)


async def _waiting(rpcs: ChatRpcs, session: pb.GetSessionResponse) -> Sequence[pb.PendingToolCall]:
    """The calls the thread's last answer still waits on, so a page reopening the thread
    is told of them as the run that made them told it: the pending calls of the newest
    completed turn, unless a later message of a server-held history left that answer."""
    request = pb.ListTurnsRequest(session_id=session.session.session_id, page_size=_TURNS_READ)
    turns = (await rpcs.list_turns(request)).turns
    last = next((t for t in turns if t.outcome == pb.TURN_OUTCOME_COMPLETED), None)
    if last is None or not last.pending_tool_calls:
        return ()
    if session.session.history_mode != pb.HISTORY_MODE_CLIENT:
        ids = [m.id for m in session.messages]
        if last.assistant_message_id not in ids:
            return ()
        later = session.messages[ids.index(last.assistant_message_id) + 1 :]
        if any(m.role != pb.ROLE_TOOL for m in later):
            return ()
    return last.pending_tool_calls


async def _session(rpcs: ChatRpcs, thread_id: str) -> pb.GetSessionResponse | None:
    try:
        return await rpcs.get_session(pb.GetSessionRequest(session_id=thread_id))
    except ServiceError as error:
        if error.reason is Reason.SESSION_NOT_FOUND:
            return None
        raise


async def _create(rpcs: ChatRpcs, run: RunInput, definition_id: str) -> tuple[str, int | None, int]:
    """Create the client-held session the thread names: its state, and its cursor when
    this run created it (None when another run of the thread did, meanwhile)."""
    request = pb.CreateSessionRequest(
        definition_id=definition_id,
        session_id=run.thread_id,
        history_mode=pb.HISTORY_MODE_CLIENT,
    )
    try:
        created = await rpcs.create_session(request)
    except ServiceError as error:
        if error.reason is not Reason.SESSION_EXISTS:
            raise
        got = await rpcs.get_session(pb.GetSessionRequest(session_id=run.thread_id))
        if got.session.definition_id != definition_id:
            raise FrontError(
                409, "conflict", "the thread is of another definition", "threadId"
            ) from None
        return got.session.snapshot.state, None, got.session.definition_revision
    session = created.session
    return session.snapshot.state, session.cursor, session.definition_revision


def _operation(request: pb.StreamTurnRequest, run: RunInput, history: Iterable[pb.Message]) -> None:
    """What a server-held thread does with the input's last (user) message: submit a new
    one, edit one whose text changed, else regenerate its answer (retry it unanswered)."""
    last = run.messages[-1]
    stored = list(history)
    index = next((i for i, m in enumerate(stored) if m.id == last.id), None)
    if index is None:
        request.submit.content = last.content
        request.submit.message_id = last.id
    elif stored[index].content != last.content:
        request.edit.message_id = last.id
        request.edit.content = last.content
    else:
        answer = next((m for m in stored[index + 1 :] if m.role == pb.ROLE_ASSISTANT), None)
        if answer is None:
            request.retry.message_id = last.id
        else:
            request.regenerate.message_id = answer.id
