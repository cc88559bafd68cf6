"""One chat completion as one turn of the service: which session it runs in, and its events.

- A session header (`X-AgentsKit-Session`) names a server-held session: the last user
  message is submitted to it.
- A conversation header (`X-AgentsKit-Conversation`, or the chat id Open WebUI and
  LibreChat can send: `X-OpenWebUI-Chat-Id`, `X-Conversation-Id`) names a client-held
  session, created at its first request: the request's messages are dispatched to it,
  named stably by position, role and content (`_history`), so the same history sent
  again keeps its decisions. A request that does not continue that conversation (a title
  or follow-up generation, or another model) is answered statelessly, leaving it as it is.
  A conversation made here whose first turn ended without a commit (the client left, the
  model failed) goes on only with a history holding that turn's user message (remembered
  by this process), so a title request sent next does not take it over. An id that exists
  but that the token may not use is refused with 409 naming the header.
- Otherwise the completion is stateless: it runs in a client-held session made for it and
  deleted when it ends, so the store keeps nothing of it.

`Idempotency-Key` is the turn id. A repeated turn id of a client-held conversation is
answered in full, never with the empty repeat the service gives (it keeps no content of
such sessions): from the turn's event log while the service still keeps it, else by
running the history again under a fresh turn id (a deterministic route's recorded answer
is then replayed; an agentic turn asks the model again).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import replace
from typing import Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.transport._rpcs import ChatRpcs
from agentskit_chat.transport.web.boundary.fronts import FrontError, bad_request, forget_created
from agentskit_chat.transport.web.boundary.streams import current_flow

from ._history import continues, message_ids, pb_messages
from ._items import (
    CallIndexes,
    Decision,
    Finished,
    Item,
    decision_of,
    failure_of,
    finished_of,
)
from ._wire import ChatRequest

log = logging.getLogger("agentskit_chat.transport")
SESSION_HEADER: Final = "x-agentskit-session"
CONVERSATION_HEADERS: Final = (
    "x-agentskit-conversation",
    "x-openwebui-chat-id",
    "x-conversation-id",
)
IDEMPOTENCY_HEADER: Final = "idempotency-key"
STATELESS_PREFIX: Final = "openai-"
DELETE_ATTEMPTS: Final = 20
REMEMBERED: Final = 10_000
"""Conversations whose first turn ended without a commit that are remembered."""
RETAINED_TURNS: Final = 100
"""A page of ListTurns at its largest: more than a session retains."""


class Completion:
    """Runs chat completions over the service's RPCs."""

    def __init__(self, rpcs: ChatRpcs) -> None:
        self.rpcs = rpcs
        self._first: OrderedDict[str, str] = OrderedDict()
        """The user message id of each conversation this made whose first turn ended
        without a commit: it goes on only with a history holding that message."""

    async def run(
        self, request: ChatRequest, header: Callable[[str], str | None]
    ) -> AsyncGenerator[Item, None]:
        """The completion's items; FrontError for a refusal or a failed turn.
        `header(name)` reads a request header."""
        key = header(IDEMPOTENCY_HEADER)
        turn_id = key or secrets.token_hex(16)
        session = header(SESSION_HEADER)
        if session is not None:
            turn, revision = await self._server_held(request, session, turn_id)
            async with aclosing(self._turn(request, turn, "server", revision)) as items:
                async for item in items:
                    yield item
            return
        conversation = next((v for n in CONVERSATION_HEADERS if (v := header(n)) is not None), None)
        named = () if conversation is None else message_ids(self.rpcs.service, request.messages)
        goes_on, created, revision = False, None, 0
        if conversation is not None:  # Built before the session is: nothing fails after.
            dispatch = pb.DispatchOperation(messages=pb_messages(request.messages, named))
            goes_on, created, revision = await self._continues(request, conversation, named)
        if conversation is not None and goes_on:
            turn = pb.StreamTurnRequest(session_id=conversation, turn_id=turn_id, dispatch=dispatch)
            began = finished = False
            try:
                async with aclosing(self._turn(request, turn, "client", revision)) as items:
                    async for item in items:
                        began = True
                        finished = finished or isinstance(item, Finished)
                        yield item
            except Exception as error:  # A conversation made for a refused turn goes again.
                if created is not None and not began:
                    forget = forget_created(self.rpcs, conversation, created, error)
                    await asyncio.shield(asyncio.ensure_future(forget))
                raise
            finally:
                if finished:
                    self._first.pop(conversation, None)
                elif created is not None:  # Cancelled or failed: what it began with is kept.
                    self._remember(conversation, named[-1])
            return
        async with aclosing(self._stateless(request, turn_id)) as items:
            async for item in items:
                yield item

    async def _server_held(
        self, request: ChatRequest, session_id: str, turn_id: str
    ) -> tuple[pb.StreamTurnRequest, int]:
        """The turn of a request naming a server-held session: its last user message
        submitted, or the tool messages that end it sent as the results of the calls the
        last answer waits on; and the session's revision. The model must name the
        session's definition (409)."""
        await self.rpcs.get_definition(pb.GetDefinitionRequest(definition_id=request.model))
        found = await self.rpcs.get_session(pb.GetSessionRequest(session_id=session_id))
        if found.session.definition_id != request.model:
            raise FrontError(409, "conflict", "the session is of another definition", "model")
        results = request.results()
        revision = found.session.definition_revision
        if not results:
            submit = pb.SubmitOperation(content=request.messages[-1].text)
            turn = pb.StreamTurnRequest(session_id=session_id, turn_id=turn_id, submit=submit)
            return turn, revision
        answers = pb.ToolResultsOperation(
            results=[pb.ToolResult(tool_call_id=m.answers, content=m.text) for m in results]
        )
        turn = pb.StreamTurnRequest(session_id=session_id, turn_id=turn_id, tool_results=answers)
        return turn, revision

    async def _continues(
        self,
        request: ChatRequest,
        session_id: str,
        named: tuple[str, ...],
        *,
        retried: bool = False,
    ) -> tuple[bool, int | None, int]:
        """Whether the request continues the client-held session `session_id` (False for a
        request that must leave it alone), the cursor of the session when this made it
        (it did not exist), and the session's revision."""
        try:
            found = await self.rpcs.get_session(pb.GetSessionRequest(session_id=session_id))
        except ServiceError as error:
            if error.reason == Reason.INVALID_ARGUMENT:
                raise bad_request(
                    "x-agentskit-conversation", "the conversation id is malformed"
                ) from None
            if error.reason != Reason.SESSION_NOT_FOUND:
                raise
            try:
                made = await self.rpcs.create_session(
                    pb.CreateSessionRequest(
                        definition_id=request.model,
                        session_id=session_id,
                        history_mode=pb.HISTORY_MODE_CLIENT,
                    )
                )
            except ServiceError as again:
                if again.reason != Reason.SESSION_EXISTS:
                    raise
                if retried:  # It exists, yet this token may not see it.
                    raise FrontError(
                        409,
                        "conversation_in_use",
                        "the conversation id is in use",
                        "x-agentskit-conversation",
                    ) from None
                return await self._continues(request, session_id, named, retried=True)
            self._first.pop(session_id, None)
            return True, made.session.cursor, made.session.definition_revision
        session = found.session
        revision = session.definition_revision
        if session.history_mode != pb.HISTORY_MODE_CLIENT:
            raise FrontError(
                409,
                "history_mismatch",
                "the conversation names a server-held session",
                "x-agentskit-conversation",
            )
        if session.definition_id != request.model:
            return False, None, revision
        for size in (1, RETAINED_TURNS):  # The newest turn's message is usually still there.
            page = pb.ListTurnsRequest(session_id=session_id, page_size=size)
            turns = (await self.rpcs.list_turns(page)).turns
            if not turns:
                first = self._first.get(session_id)
                return first is None or first in named, None, revision
            if continues([t.user_message_id for t in turns], named):
                return True, None, revision
            if len(turns) < size:
                return False, None, revision
        return False, None, revision

    def _remember(self, session_id: str, message_id: str) -> None:
        self._first[session_id] = message_id
        self._first.move_to_end(session_id)
        while len(self._first) > REMEMBERED:
            self._first.popitem(last=False)

    async def _stateless(self, request: ChatRequest, turn_id: str) -> AsyncGenerator[Item, None]:
        session_id = STATELESS_PREFIX + secrets.token_hex(16)
        made = await self.rpcs.create_session(
            pb.CreateSessionRequest(
                definition_id=request.model,
                session_id=session_id,
                history_mode=pb.HISTORY_MODE_CLIENT,
            )
        )
        try:
            ids = tuple(f"m{i}" for i in range(len(request.messages)))
            dispatch = pb.DispatchOperation(messages=pb_messages(request.messages, ids))
            turn = pb.StreamTurnRequest(session_id=session_id, turn_id=turn_id, dispatch=dispatch)
            revision = made.session.definition_revision
            async with aclosing(self._turn(request, turn, "stateless", revision)) as items:
                async for item in items:
                    yield item
        finally:
            forget = asyncio.ensure_future(self._forget(session_id))
            await asyncio.shield(forget)

    async def _forget(self, session_id: str) -> None:
        """Delete a stateless completion's session, once its turn has let go of it. A
        failure is logged (one line, no content), never raised: the answer stands."""
        request = pb.DeleteSessionRequest(session_id=session_id)
        failure = "SessionBusy"
        for _ in range(DELETE_ATTEMPTS):
            try:
                await self.rpcs.delete_session(request)
                return
            except ServiceError as error:
                if error.reason == Reason.SESSION_NOT_FOUND:
                    return
                if error.reason not in (Reason.SESSION_BUSY, Reason.CONFLICT):
                    failure = str(error.reason)
                    break
            except Exception as error:
                failure = type(error).__name__
                break
            await asyncio.sleep(0.05)
        log.warning("openai front: a stateless completion's session was not deleted: %s", failure)

    async def _turn(
        self,
        request: ChatRequest,
        turn: pb.StreamTurnRequest,
        history: str,
        revision: int,
        *,
        again: bool = True,
    ) -> AsyncGenerator[Item, None]:
        """The items of one StreamTurn; a repeat of a client-held turn is answered in full."""
        flow = current_flow()
        stalled = None if flow is None else flow.stall
        session_id = None if history == "stateless" else turn.session_id
        request.tools.apply(turn)
        events = self.rpcs.stream_turn(turn, stalled, request.sampling)
        calls = CallIndexes()
        async with aclosing(events) as stream:
            async for event in stream:
                which = event.WhichOneof("event")
                if which == "started":
                    if event.started.duplicate and history == "client":
                        break
                elif which == "decision":
                    yield decision_of(event.decision, turn, session_id, history, revision)
                elif which == "delta":
                    yield event.delta.text
                elif (call := calls.item(event)) is not None:
                    yield call
                elif which == "completed":
                    yield finished_of(event.completed)
                    return
                elif which == "failed":
                    raise failure_of(event.failed)
            else:
                return
        async with aclosing(self._repeat(request, turn, again, revision)) as items:
            async for item in items:
                yield item

    async def _repeat(
        self, request: ChatRequest, turn: pb.StreamTurnRequest, again: bool, revision: int
    ) -> AsyncGenerator[Item, None]:
        """A finished turn of a client-held conversation in full: from its event log while
        kept, else by running it again under a fresh turn id."""
        watch = pb.WatchTurnRequest(session_id=turn.session_id, turn_id=turn.turn_id)
        kept: list[Item] = []
        text = False
        calls = CallIndexes()
        async with aclosing(self.rpcs.watch_turn(watch)) as events:
            async for event in events:
                which = event.WhichOneof("event")
                if which == "decision":
                    kept.append(
                        decision_of(event.decision, turn, turn.session_id, "client", revision)
                    )
                elif which == "delta" and event.delta.text:
                    text = True
                    kept.append(event.delta.text)
                elif (call := calls.item(event)) is not None:
                    text = True
                    kept.append(call)
                elif which == "completed":
                    kept.append(finished_of(event.completed))
                elif which == "failed":
                    raise failure_of(event.failed)
        if text or not again:
            for item in kept:
                yield item
            return
        fresh = pb.StreamTurnRequest()
        fresh.CopyFrom(turn)
        fresh.turn_id = f"{turn.turn_id[:96]}.{secrets.token_hex(8)}"
        async with aclosing(self._turn(request, fresh, "client", revision, again=False)) as items:
            async for item in items:
                if isinstance(item, Decision):
                    item = replace(item, turn_id=turn.turn_id)
                yield item
