"""The AG-UI front: `POST /agui/{definition_id}` runs an AG-UI agent run as one turn.

The body is a `RunAgentInput` (`_input`); the answer is AG-UI events over SSE, or the
protocol's binary encoding when `Accept` asks for it (`_encoding`), translated from
the turn's events (`_events`, which also says how events are identified).

Which turn runs:

- `threadId` is the session, `runId` the turn id (its idempotency key: a repeated `runId`
  repeats the recorded outcome, and a `runId` still running is reattached to).
- A thread naming a server-held session of this definition takes only the input's last
  message: a user message with a new id is submitted; one the history already has is
  edited (other text), else its answer is regenerated (or the message retried when it has
  no answer). An input that does not end with a user message runs no turn: it reopens the
  thread, answered with `MESSAGES_SNAPSHOT` of the stored history.
- A thread that does not exist is created client-held on the URL's definition, and a
  client-held thread takes the messages as the whole history (`DispatchOperation`). An
  input ending with no user message runs no turn there either (and creates nothing).
- The client's `state` is never taken: `STATE_SNAPSHOT` always says the machine's.

Resume (this server's extension): every SSE event has an `id:`. The same `POST` (same
body) with `Last-Event-ID` runs nothing: it follows the turn `runId` names (WatchTurn,
from its first event) and sends every event after that id. A turn outlives its
connection only when the request says `AgentsKit-On-Disconnect: continue` (else the
turn is cancelled when the client goes away, as `HttpAgent.abortRun` means it to be).

Refusals before the stream opens are HTTP errors with a JSON body
`{"error": {"code", "message", "field"}}` (`field` naming the request field at fault,
e.g. `messages[2].role`), never repeating request content; after it opens, `RUN_ERROR`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from contextlib import aclosing
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.transport.web.boundary.asgi import Receive, Scope, Send, respond
from agentskit_chat.transport.web.boundary.fronts import (
    SSE_HEADERS,
    ClientGoneError,
    EventStream,
    FrontCall,
    FrontContext,
    FrontError,
    bad_request,
    forget_created,
    internal,
    json_bytes,
)
from agentskit_chat.transport.web.boundary.logbound import refused
from agentskit_chat.transport.web.boundary.streams import current_flow

from ._encoding import PROTO_MEDIA_TYPE, proto_event, sse_event, wants_proto
from ._events import (
    Slotted,
    TurnEvents,
    run_started,
    state_document,
    state_snapshot,
)
from ._input import RunInput, last_event_id, refusal, run_input
from ._plan import of_revision, plan_run

PREFIX: Final = "/agui/"
ROUTE: Final = "/agui/{definition}"
DISCONNECT_HEADER: Final = "agentskit-on-disconnect"
DISCONNECT_MODES: Final = {
    "cancel": pb.DISCONNECT_MODE_CANCEL,
    "continue": pb.DISCONNECT_MODE_CONTINUE,
}
PROTO_HEADERS: Final = [
    (b"content-type", PROTO_MEDIA_TYPE.encode()),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class AguiFront:
    """Answers `POST /agui/{definition_id}` with an AG-UI run (see the module docs)."""

    prefix = PREFIX

    def __init__(self, context: FrontContext) -> None:
        self.context = context
        self.rpcs = context.rpcs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request under `/agui/`."""
        call = FrontCall(self.context, scope, receive)
        end = call.traced(ROUTE)
        status = 500
        stream = EventStream(receive, send)
        try:
            status = await self._answer(call, stream)
        except FrontError as error:
            status = error.status
            await _refuse(send, error, stream)
        except ClientGoneError:
            status = 499
        except Exception as exc:
            refused(f"agui run failed unexpectedly: {type(exc).__name__}", level=logging.ERROR)
            await _refuse(send, internal(), stream)
        finally:
            if stream.opened:
                await stream.close()
            end(status)

    async def _answer(self, call: FrontCall, stream: EventStream) -> int:
        definition_id = call.path.removeprefix(PREFIX)
        if not definition_id or "/" in definition_id:
            raise FrontError(404, "not_found", "no such AG-UI endpoint", "path")
        if call.method != "POST":
            raise FrontError(405, "method_not_allowed", "AG-UI runs are POSTed", "method")
        call.authenticate()
        run = run_input(await call.json_object())
        resume = last_event_id(call.header("last-event-id"))
        proto = wants_proto(call.header("accept"))
        mode = (call.header(DISCONNECT_HEADER) or "cancel").strip().lower()
        if mode not in DISCONNECT_MODES:
            raise bad_request("AgentsKit-On-Disconnect", "must be cancel or continue")
        turn: _Turn | None
        try:
            definition = await self._definition(definition_id)
            if resume is not None:
                opening, turn = await self._resume(run, definition, resume)
            else:
                call.refuse_when_draining()
                opening, turn = await self._start(run, definition, DISCONNECT_MODES[mode])
        except ServiceError as error:
            raise refusal(FrontError.of(error), run) from None
        try:
            await stream.open(200, PROTO_HEADERS if proto else SSE_HEADERS)
            async with stream.cancelled_when_gone():
                await self._send(stream, proto, opening, resume)
                if turn is not None:
                    await self._stream_turn(stream, proto, run, turn, resume)
        finally:
            if turn is not None:  # However the run ended: a cancelling turn stops here.
                await turn.events.aclose()
        return 200

    async def _definition(self, definition_id: str) -> pb.Definition:
        got = await self.rpcs.get_definition(pb.GetDefinitionRequest(definition_id=definition_id))
        return got.definition

    async def _start(
        self, run: RunInput, definition: pb.Definition, on_disconnect: int
    ) -> tuple[list[Slotted], _Turn | None]:
        """The run's opening events and its turn (None when it runs none)."""
        plan = await plan_run(self.rpcs, run, definition, on_disconnect)
        if plan.request is None:
            return plan.opening, None
        try:
            return plan.opening, await self._run(plan.request, plan.document, plan.definition)
        except Exception as error:
            if plan.created is not None:  # The thread this run created goes with its turn.
                await forget_created(self.rpcs, run.thread_id, plan.created, error)
            raise

    async def _run(
        self, request: pb.StreamTurnRequest, document: dict[str, Any], definition: pb.Definition
    ) -> _Turn:
        """The turn's events, its first one already there (so a refusal is an HTTP error);
        a turn id still running is followed instead."""
        flow = current_flow()
        stalled = None if flow is None else flow.stall
        events = self.rpcs.stream_turn(request, stalled)
        try:
            first = await anext(events)
        except ServiceError as error:
            await events.aclose()
            if error.reason is not Reason.TURN_IN_PROGRESS:
                raise
            watch = pb.WatchTurnRequest(session_id=request.session_id, turn_id=request.turn_id)
            events = self.rpcs.watch_turn(watch, stalled)
            first = await anext(events)
        return _Turn(first, events, document, definition)

    async def _resume(
        self, run: RunInput, definition: pb.Definition, after: tuple[int, int]
    ) -> tuple[list[Slotted], _Turn]:
        """The opening events the client misses, and the turn followed from its start
        (a thread of another definition is refused as a run of it is)."""
        got = await self.rpcs.get_session(pb.GetSessionRequest(session_id=run.thread_id))
        if got.session.definition_id != definition.id:
            raise FrontError(409, "conflict", "the thread is of another definition", "threadId")
        definition = await of_revision(self.rpcs, definition, got.session.definition_revision)
        flow = current_flow()
        stalled = None if flow is None else flow.stall
        watch = pb.WatchTurnRequest(session_id=run.thread_id, turn_id=run.run_id)
        events = self.rpcs.watch_turn(watch, stalled)
        first = await anext(events)
        opening = [run_started(run.thread_id, run.run_id)]
        if after < (0, 1):
            opening.append(state_snapshot(state_document(definition, got.session.snapshot.state)))
        return opening, _Turn(first, events, None, definition)

    async def _stream_turn(
        self,
        stream: EventStream,
        proto: bool,
        run: RunInput,
        turn: _Turn,
        after: tuple[int, int] | None,
    ) -> None:
        translator = TurnEvents(
            run.thread_id, run.run_id, turn.definition, turn.baseline, held=run.held_calls()
        )
        last = after or (0, 0)  # the last event the client has (or was sent)
        async with aclosing(turn.events) as rest:
            try:
                async for event in _chain(turn.first, rest):
                    if after is not None and event.started.duplicate:
                        after = None  # No longer kept: the recorded outcome, renumbered.
                    slotted = list(translator.translate(event))
                    await self._send(stream, proto, slotted, after)
                    last = max([last, *(_position(event_id) for event_id, _ in slotted)])
            except ServiceError as error:
                failed = {"type": "RUN_ERROR", "message": error.message}
                failed["code"] = str(error.reason).lower().removeprefix("error_reason_")
                await self._send(stream, proto, [(_after(last), failed)], None)
            except Exception as exc:
                refused(f"agui run failed unexpectedly: {type(exc).__name__}", level=logging.ERROR)
                failed = {"type": "RUN_ERROR", "message": "internal error", "code": "internal"}
                await self._send(stream, proto, [(_after(last), failed)], None)

    async def _send(
        self,
        stream: EventStream,
        proto: bool,
        events: Iterable[Slotted],
        after: tuple[int, int] | None,
    ) -> None:
        chunks = []
        for event_id, event in events:
            if after is not None and _position(event_id) <= after:
                continue
            chunks.append(proto_event(event) if proto else sse_event(event, event_id))
        if chunks:
            await stream.send(b"".join(chunks))


class _Turn:
    """A started turn's events: the first, the rest, and the state document before it."""

    def __init__(
        self,
        first: pb.StreamTurnResponse,
        events: AsyncGenerator[pb.StreamTurnResponse, None],
        baseline: dict[str, Any] | None,
        definition: pb.Definition,
    ) -> None:
        self.first = first
        self.events = events
        self.baseline = baseline
        self.definition = definition
        """The revision the thread's session runs."""


async def _chain(
    first: pb.StreamTurnResponse, rest: AsyncIterator[pb.StreamTurnResponse]
) -> AsyncIterator[pb.StreamTurnResponse]:
    yield first
    async for event in rest:
        yield event


def _position(event_id: str) -> tuple[int, int]:
    sequence, _, slot = event_id.partition(".")
    return int(sequence), int(slot)


def _after(last: tuple[int, int]) -> str:
    """The id of a `RUN_ERROR` the stream ends with when the service fails mid-turn: past
    every slot of the last event's sequence, so ids never go backwards and a resume from
    it does not replay what the client has."""
    return f"{last[0]}.9"


async def _refuse(send: Send, error: FrontError, stream: EventStream) -> None:
    """The refusal as an HTTP error (nothing more once the stream is open), and one
    bounded log line naming its status, code and field."""
    level = logging.ERROR if error.status >= 500 else logging.INFO
    refused(f"agui run refused: {error.status} {error.code} {error.field or ''}"[:120], level=level)
    if stream.opened:
        return
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.field is not None:
        body["field"] = error.field
    headers = error.headers()
    if error.status == 405:
        headers.append((b"allow", b"POST"))
    await respond(
        send,
        error.status,
        json_bytes({"error": body}),
        content_type="application/json",
        headers=headers,
    )
