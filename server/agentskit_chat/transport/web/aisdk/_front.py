"""The AI SDK front: `useChat`'s default transport over the service, as a UI message stream.

- `POST /ai-sdk/{definition_id}`: the body `DefaultChatTransport` sends (`id` = chat id,
  `messages`, `trigger`, `messageId`), answered with the UI message stream (SSE, header
  `x-vercel-ai-ui-message-stream: v1`). The chat id is the session id. A chat the server
  does not know is created client-held on the URL's definition, and every request
  dispatches its messages (ids and text parts) as the history; `regenerate-message`
  dispatches it without the answers after its last user message, so the service's
  reconciliation replays a recorded route decision. A chat id naming a server-held session
  (created with CreateSession) submits only the last user message: a new one is submitted,
  one the server holds already is edited (`submit-message`) or retried
  (`regenerate-message`).
- Tools: the body's `tools` (and `toolChoice`, `parallelToolCalls`) are the turn's
  declarations. A request whose last message is an assistant message with tool outputs or
  approval responses in its last step continues that answer: a client-held chat dispatches
  the history (tool parts as calls and tool messages) with the approvals, a server-held one
  sends a `tool_results` operation. The stream adds the answer's step to that message.
- `GET /ai-sdk/{definition_id}/{chat_id}/stream` (the transport's reconnect request):
  the chat's running turn from its first event, in the same shape, or 204 when none runs.
- `POST /ai-sdk/{definition_id}/{chat_id}/cancel`: cancel the chat's running turn (a
  resumable turn outlives its connection, so the AI SDK's `stop()` alone does not end it);
  204 whether or not one ran.

Turn ids: each POST is a new turn with a fresh server-chosen id (`ai-` and 24 hex digits),
since the AI SDK never posts a request again by itself (it reconnects with GET); a client
that re-posts after a network error and wants the turn run once sends the same `turnId` in
the body. A retry after a failure is a new POST, so a new turn. Disconnects: a turn is
cancelled when its client goes away (so `stop()` works), unless the body asks for
`"resumable": true`; it then continues, and the reconnect request reattaches to it.
"""

from __future__ import annotations

import logging
import secrets
from typing import Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.transport.web.boundary.asgi import Receive, Scope, Send, respond
from agentskit_chat.transport.web.boundary.fronts import (
    ClientGoneError,
    FrontCall,
    FrontContext,
    FrontError,
    forget_created,
    internal,
)
from agentskit_chat.transport.web.boundary.streams import current_flow

from ._chunks import Chunks, Commands
from ._parts import REGENERATE, ChatRequest, checked_id, refusal
from ._stream import not_allowed, refuse, stream_turn

log = logging.getLogger("agentskit_chat.transport")

PREFIX: Final = "/ai-sdk/"
CHAT_ROUTE: Final = "/ai-sdk/{definition_id}"
STREAM_ROUTE: Final = "/ai-sdk/{definition_id}/{chat_id}/stream"
CANCEL_ROUTE: Final = "/ai-sdk/{definition_id}/{chat_id}/cancel"
MAX_DEFINITIONS: Final = 256
"""Definitions (by revision) whose commands are kept; the cache starts over past it."""


class AiSdkFront:
    """The `/ai-sdk/` front of the HTTP listener."""

    prefix = PREFIX

    def __init__(self, context: FrontContext) -> None:
        self.context = context
        self.rpcs = context.rpcs
        self._commands: dict[tuple[str, int], Commands] = {}

    async def chunks(
        self, chat_id: str, session: pb.Session, asked: ChatRequest | None = None
    ) -> Chunks:
        """The stream's chunk maker for a turn of `session` (that `asked` asked for)."""
        key = (session.definition_id, session.definition_revision)
        commands = self._commands.get(key)
        if commands is None:
            request = pb.GetDefinitionRequest(
                definition_id=session.definition_id, revision=session.definition_revision
            )
            try:
                definition = (await self.rpcs.get_definition(request)).definition
            except ServiceError as error:
                raise refusal(error) from None
            commands = Commands(definition)
            if len(self._commands) >= MAX_DEFINITIONS:
                self._commands.clear()
            self._commands[key] = commands
        if asked is None or asked.answers is None:
            return Chunks(chat_id, session.snapshot, commands)
        answers = asked.answers
        return Chunks(
            chat_id, session.snapshot, commands, asked.continues, answers.denied, answers.held
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request under `/ai-sdk/`."""
        call = FrontCall(self.context, scope, receive)
        parts = call.path[len(PREFIX) :].split("/")
        route, method = _route(parts)
        end = call.traced(route or CHAT_ROUTE)
        status = 500
        try:
            call.authenticate()
            if route is None:
                status = await refuse(send, FrontError(404, "not_found", "no such path"))
            elif call.method != method:
                allow = [(b"allow", method.encode())]
                status = await refuse(send, not_allowed(), allow)
            elif route == CHAT_ROUTE:
                status = await self._chat(call, parts[0], send)
            else:
                status = await self._running_turn(call, parts[0], parts[1], send)
        except FrontError as error:
            status = await refuse(send, error)
        except ClientGoneError:
            status = 499
        except Exception as exc:
            log.error("ai-sdk request failed unexpectedly: %s", type(exc).__name__)
            status = await refuse(send, internal())
        finally:
            end(status)

    async def _chat(self, call: FrontCall, definition_id: str, send: Send) -> int:
        call.refuse_when_draining()
        request = ChatRequest.parse(await call.json_object(), self.rpcs.service.limits)
        session, stored, created = await self._session(request, definition_id)
        turn = pb.StreamTurnRequest(
            session_id=request.chat_id,
            turn_id=request.turn_id or f"ai-{secrets.token_hex(12)}",
            on_disconnect=pb.DISCONNECT_MODE_CONTINUE
            if request.resumable
            else pb.DISCONNECT_MODE_CANCEL,
        )
        request.tools.apply(turn)
        if session.history_mode == pb.HISTORY_MODE_CLIENT:
            turn.dispatch.messages.extend(request.history())
            if request.answers is not None:
                turn.dispatch.approvals.extend(request.answers.approvals)
        elif request.answers is not None:
            results = pb.ToolResultsOperation(  # less the results the server holds
                results=[
                    r
                    for r in request.answers.results
                    if r.tool_call_id not in {m.tool_call_id for m in stored}
                ],
                approvals=request.answers.approvals,
            )
            turn.tool_results.CopyFrom(results)
        else:
            _server_held(turn, request, stored)
        try:
            chunks = await self.chunks(request.chat_id, session, request)
            flow = current_flow()
            events = self.rpcs.stream_turn(turn, None if flow is None else flow.stall)
            return await stream_turn(call, send, events, chunks, request.fields)
        except FrontError as error:  # refused before its stream began
            if created is not None:  # the chat this request created goes with its turn
                await forget_created(self.rpcs, request.chat_id, created, error)
            raise

    async def _session(
        self, request: ChatRequest, definition_id: str
    ) -> tuple[pb.Session, tuple[pb.Message, ...], int | None]:
        """The chat's session (created client-held when absent), the messages the server
        holds for it, and the cursor it was created at by this request (None when it
        existed)."""
        try:
            found = await self.rpcs.get_session(pb.GetSessionRequest(session_id=request.chat_id))
        except ServiceError as error:
            if error.reason != Reason.SESSION_NOT_FOUND:
                raise refusal(error) from None
            return await self._create(request.chat_id, definition_id)
        if found.session.definition_id != definition_id:
            raise FrontError(409, "conflict", "id names a chat of another definition", "id")
        return found.session, tuple(found.messages), None

    async def _create(
        self, chat_id: str, definition_id: str
    ) -> tuple[pb.Session, tuple[pb.Message, ...], int | None]:
        create = pb.CreateSessionRequest(
            definition_id=definition_id, session_id=chat_id, history_mode=pb.HISTORY_MODE_CLIENT
        )
        try:
            session = (await self.rpcs.create_session(create)).session
            return session, (), session.cursor
        except ServiceError as error:
            if error.reason != Reason.SESSION_EXISTS:  # created meanwhile: use it
                raise refusal(error) from None
        get = pb.GetSessionRequest(session_id=chat_id)
        try:
            session = (await self.rpcs.get_session(get)).session
        except ServiceError as error:
            raise refusal(error) from None
        if session.definition_id != definition_id:
            raise FrontError(409, "conflict", "id names a chat of another definition", "id")
        return session, (), None

    async def _running_turn(
        self, call: FrontCall, definition_id: str, chat_id: str, send: Send
    ) -> int:
        """Stream the chat's running turn from its start, or cancel it; 204 when none runs."""
        checked_id(chat_id, "chat_id", self.rpcs.service.limits)
        running = await self._running(chat_id, definition_id)
        if running is None:
            await respond(send, 204, head=True)
            return 204
        session, turn_id = running
        if call.method == "POST":  # the cancel route
            try:
                await self.rpcs.cancel_turn(
                    pb.CancelTurnRequest(session_id=chat_id, turn_id=turn_id)
                )
            except ServiceError as error:
                raise refusal(error) from None
            await respond(send, 204, head=True)
            return 204
        chunks = await self.chunks(chat_id, session)
        flow = current_flow()
        watch = pb.WatchTurnRequest(session_id=chat_id, turn_id=turn_id, after_sequence=0)
        events = self.rpcs.watch_turn(watch, None if flow is None else flow.stall)
        return await stream_turn(call, send, events, chunks)

    async def _running(self, chat_id: str, definition_id: str) -> tuple[pb.Session, str] | None:
        """The chat's session and running turn id; None when the chat (of this definition)
        runs no turn or does not exist."""
        try:
            page = await self.rpcs.list_turns(pb.ListTurnsRequest(session_id=chat_id, page_size=1))
            if not page.turns or page.turns[0].outcome != pb.TURN_OUTCOME_RUNNING:
                return None
            found = await self.rpcs.get_session(pb.GetSessionRequest(session_id=chat_id))
        except ServiceError as error:
            if error.reason == Reason.SESSION_NOT_FOUND:
                return None
            raise refusal(error) from None
        if found.session.definition_id != definition_id:
            return None
        return found.session, page.turns[0].turn_id


def _route(parts: list[str]) -> tuple[str | None, str]:
    """The route template of a path (split after the prefix) and the method it takes;
    None for a path that names no route."""
    if "" in parts:
        return None, ""
    if len(parts) == 1:
        return CHAT_ROUTE, "POST"
    if len(parts) == 3 and parts[2] == "stream":
        return STREAM_ROUTE, "GET"
    if len(parts) == 3 and parts[2] == "cancel":
        return CANCEL_ROUTE, "POST"
    return None, ""


def _server_held(
    turn: pb.StreamTurnRequest, request: ChatRequest, stored: tuple[pb.Message, ...]
) -> None:
    """The operation on a server-held history: only the last user message is taken."""
    index = request.last_user()
    last = request.messages[index]
    if last.id not in {m.id for m in stored}:
        turn.submit.CopyFrom(pb.SubmitOperation(content=last.content, message_id=last.id))
    elif request.trigger == REGENERATE:
        turn.retry.CopyFrom(pb.RetryOperation(message_id=last.id))
    else:
        turn.edit.CopyFrom(pb.EditOperation(message_id=last.id, content=last.content))
