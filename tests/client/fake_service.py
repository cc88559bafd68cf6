"""A scripted, in-process test double of the chat service and a server that hosts it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import grpc.aio
from google.protobuf import message as pb_message
from google.protobuf import timestamp_pb2
from google.rpc import error_details_pb2, status_pb2

from agentskit.chat.v1 import chat_pb2, chat_pb2_grpc

DOMAIN = "chat.agentskit.dev"
EPOCH = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)

_RESPONSES: dict[str, type[pb_message.Message]] = {
    "ListDefinitions": chat_pb2.ListDefinitionsResponse,
    "GetDefinition": chat_pb2.GetDefinitionResponse,
    "CreateSession": chat_pb2.CreateSessionResponse,
    "GetSession": chat_pb2.GetSessionResponse,
    "DeleteSession": chat_pb2.DeleteSessionResponse,
    "TruncateHistory": chat_pb2.TruncateHistoryResponse,
    "GetTurn": chat_pb2.GetTurnResponse,
    "ListTurns": chat_pb2.ListTurnsResponse,
    "CancelTurn": chat_pb2.CancelTurnResponse,
}


@dataclass
class Abort:
    """A status the fake aborts a call with, optionally carrying a google.rpc.ErrorInfo."""

    code: grpc.StatusCode
    message: str
    reason: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    domain: str = DOMAIN

    def trailing_metadata(self) -> tuple[tuple[str, bytes], ...]:
        if self.reason is None:
            return ()
        status = status_pb2.Status(code=self.code.value[0], message=self.message)
        info = error_details_pb2.ErrorInfo(
            reason=self.reason, domain=self.domain, metadata=self.metadata
        )
        status.details.add().Pack(info)
        return (("grpc-status-details-bin", status.SerializeToString()),)


def event(sequence: int, turn_id: str = "t1", session_id: str = "s1", **variant: Any):
    """A StreamTurnResponse whose time is EPOCH plus ``sequence`` milliseconds."""
    time = timestamp_pb2.Timestamp()
    time.FromDatetime(EPOCH + timedelta(milliseconds=sequence))
    return chat_pb2.StreamTurnResponse(
        session_id=session_id, turn_id=turn_id, sequence=sequence, time=time, **variant
    )


class FakeChatService(chat_pb2_grpc.ChatServiceServicer):
    """Records every request and answers with scripted replies, events and aborts.

    ``replies`` and ``aborts`` script the unary methods by name. A turn stream first pops
    one of ``stream_rejections`` (aborting before any event), else sends ``events``, then
    aborts with ``stream_abort`` or, with ``stream_hold``, waits until the client cancels,
    which sets ``stream_cancelled``.

    WatchTurn follows ``turn``, the whole turn's events: each call first pops one of
    ``watch_rejections`` (aborting before any event), then sends the events of ``turn``
    after the request's ``after_sequence``; when ``watch_cuts`` holds a number for this
    call (popped), it aborts with UNAVAILABLE after that many events, as a stream cut by
    the network ends. With ``watch_outcome`` set, WatchTurn answers with it instead, as a
    server that no longer keeps the events does: numbered from ``after_sequence + 1``.
    WatchSession sends ``session_items``, then aborts with
    ``stream_abort`` or holds like a turn stream.
    """

    def __init__(self) -> None:
        self.requests: list[pb_message.Message] = []
        self.metadata: list[dict[str, str | bytes]] = []
        self.replies: dict[str, pb_message.Message] = {}
        self.aborts: dict[str, Abort] = {}
        self.events: list[chat_pb2.StreamTurnResponse] = []
        self.stream_rejections: list[Abort] = []
        self.stream_abort: Abort | None = None
        self.stream_hold = False
        self.stream_sent = asyncio.Event()
        self.stream_cancelled = asyncio.Event()
        self.turn: list[chat_pb2.StreamTurnResponse] = []
        self.watch_rejections: list[Abort] = []
        self.watch_cuts: list[int] = []
        self.watch_outcome: list[chat_pb2.StreamTurnResponse] = []
        self.session_items: list[chat_pb2.WatchSessionResponse] = []

    def _record(self, request: pb_message.Message, context) -> None:
        self.requests.append(request)
        self.metadata.append(dict(context.invocation_metadata() or ()))

    async def _unary(self, name: str, request, context):
        self._record(request, context)
        abort = self.aborts.get(name)
        if abort is not None:
            await context.abort(abort.code, abort.message, abort.trailing_metadata())
        return self.replies.get(name) or _RESPONSES[name]()

    async def ListDefinitions(self, request, context):
        return await self._unary("ListDefinitions", request, context)

    async def GetDefinition(self, request, context):
        return await self._unary("GetDefinition", request, context)

    async def CreateSession(self, request, context):
        return await self._unary("CreateSession", request, context)

    async def GetSession(self, request, context):
        return await self._unary("GetSession", request, context)

    async def DeleteSession(self, request, context):
        return await self._unary("DeleteSession", request, context)

    async def TruncateHistory(self, request, context):
        return await self._unary("TruncateHistory", request, context)

    async def GetTurn(self, request, context):
        return await self._unary("GetTurn", request, context)

    async def ListTurns(self, request, context):
        return await self._unary("ListTurns", request, context)

    async def StreamTurn(self, request, context) -> AsyncIterator[chat_pb2.StreamTurnResponse]:
        self._record(request, context)
        if self.stream_rejections:
            rejection = self.stream_rejections.pop(0)
            await context.abort(rejection.code, rejection.message, rejection.trailing_metadata())
        try:
            for response in self.events:
                yield response
            self.stream_sent.set()
            if self.stream_abort is not None:
                abort = self.stream_abort
                await context.abort(abort.code, abort.message, abort.trailing_metadata())
            if self.stream_hold:
                await asyncio.Event().wait()
        except (asyncio.CancelledError, GeneratorExit):
            # The client cancelled: while the handler waits, its task is cancelled; while
            # an event waits to be sent, grpc.aio closes the generator instead.
            self.stream_cancelled.set()
            raise

    async def CancelTurn(self, request, context):
        return await self._unary("CancelTurn", request, context)

    async def WatchTurn(self, request, context) -> AsyncIterator[chat_pb2.StreamTurnResponse]:
        self._record(request, context)
        if self.watch_rejections:
            rejection = self.watch_rejections.pop(0)
            await context.abort(rejection.code, rejection.message, rejection.trailing_metadata())
        cut = self.watch_cuts.pop(0) if self.watch_cuts else None
        missed = [e for e in self.turn if e.sequence > request.after_sequence]
        if self.watch_outcome:  # a recorded outcome: numbered from after_sequence + 1
            missed = []
            for offset, recorded in enumerate(self.watch_outcome, request.after_sequence + 1):
                response = chat_pb2.StreamTurnResponse()
                response.CopyFrom(recorded)
                response.sequence = offset
                missed.append(response)
        for index, response in enumerate(missed):
            if index == cut:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "connection cut")
            yield response

    async def WatchSession(self, request, context) -> AsyncIterator[chat_pb2.WatchSessionResponse]:
        self._record(request, context)
        try:
            for item in self.session_items:
                yield item
            if self.stream_abort is not None:
                abort = self.stream_abort
                await context.abort(abort.code, abort.message, abort.trailing_metadata())
            if self.stream_hold:
                await asyncio.Event().wait()
        except (asyncio.CancelledError, GeneratorExit):
            # The client cancelled: while the handler waits, its task is cancelled; while
            # an event waits to be sent, grpc.aio closes the generator instead.
            self.stream_cancelled.set()
            raise


@asynccontextmanager
async def serving(service: FakeChatService) -> AsyncIterator[str]:
    """Run ``service`` on an ephemeral 127.0.0.1 port and yield its target."""
    server = grpc.aio.server()
    chat_pb2_grpc.add_ChatServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)
