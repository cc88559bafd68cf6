"""The grpc.aio servicer: `ChatRpcs` with service errors ended as gRPC statuses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from contextlib import aclosing
from typing import Final, TypeVar

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.service import ChatService, Reason, ServiceError

from ._rpcs import ChatRpcs
from ._status import abort, abort_internal

log = logging.getLogger(__name__)
T = TypeVar("T")
Context = grpc.aio.ServicerContext[object, object]

STALLED: Final = ServiceError(
    Reason.DEADLINE_EXCEEDED,
    "the turn timed out while the client was not reading its stream; the turn was closed",
)
_ending: set[asyncio.Task[None]] = set()


class ChatServicer(chat_pb2_grpc.ChatServiceServicer):
    """Every RPC of agentskit.chat.v1.ChatService over one ChatService."""

    def __init__(self, service: ChatService) -> None:
        self.service = service
        self.rpcs = ChatRpcs(service)

    async def ListDefinitions(
        self, request: pb.ListDefinitionsRequest, context: Context
    ) -> pb.ListDefinitionsResponse:
        """Every hosted definition."""
        return await _call(context, self.rpcs.list_definitions(request))

    async def GetDefinition(
        self, request: pb.GetDefinitionRequest, context: Context
    ) -> pb.GetDefinitionResponse:
        """One definition by id."""
        return await _call(context, self.rpcs.get_definition(request))

    async def CreateSession(
        self, request: pb.CreateSessionRequest, context: Context
    ) -> pb.CreateSessionResponse:
        """A new session at the definition's initial state."""
        return await _call(context, self.rpcs.create_session(request))

    async def GetSession(
        self, request: pb.GetSessionRequest, context: Context
    ) -> pb.GetSessionResponse:
        """The session and its server-held history."""
        return await _call(context, self.rpcs.get_session(request))

    async def DeleteSession(
        self, request: pb.DeleteSessionRequest, context: Context
    ) -> pb.DeleteSessionResponse:
        """Remove the session and its history."""
        return await _call(context, self.rpcs.delete_session(request))

    async def TruncateHistory(
        self, request: pb.TruncateHistoryRequest, context: Context
    ) -> pb.TruncateHistoryResponse:
        """Drop the newest messages without a turn."""
        return await _call(context, self.rpcs.truncate_history(request))

    async def GetTurn(self, request: pb.GetTurnRequest, context: Context) -> pb.GetTurnResponse:
        """The status of one retained turn; runs nothing."""
        return await _call(context, self.rpcs.get_turn(request))

    async def ListTurns(
        self, request: pb.ListTurnsRequest, context: Context
    ) -> pb.ListTurnsResponse:
        """A page of the session's retained turns, newest first."""
        return await _call(context, self.rpcs.list_turns(request))

    async def StreamTurn(
        self, request: pb.StreamTurnRequest, context: Context
    ) -> AsyncIterator[pb.StreamTurnResponse]:
        """Run one turn and stream its events."""
        stream = self.rpcs.stream_turn(request, stalled=lambda: _end_stalled(context))
        async with aclosing(_streamed(context, stream, "turn")) as events:
            async for event in events:
                yield event

    async def WatchTurn(
        self, request: pb.WatchTurnRequest, context: Context
    ) -> AsyncIterator[pb.StreamTurnResponse]:
        """Stream one turn's events after a sequence the caller has."""
        await _start_response(context)
        stream = self.rpcs.watch_turn(request, stalled=lambda: _end_stalled(context))
        async with aclosing(_streamed(context, stream, "turn watch")) as events:
            async for event in events:
                yield event

    async def CancelTurn(
        self, request: pb.CancelTurnRequest, context: Context
    ) -> pb.CancelTurnResponse:
        """Stop a running turn; idempotent."""
        return await _call(context, self.rpcs.cancel_turn(request))

    async def WatchSession(
        self, request: pb.WatchSessionRequest, context: Context
    ) -> AsyncIterator[pb.WatchSessionResponse]:
        """Stream the session's turns and changes as they happen."""
        await _start_response(context)
        stream = self.rpcs.watch_session(request)
        async with aclosing(_streamed(context, stream, "session watch")) as items:
            async for item in items:
                yield item


async def _streamed(
    context: Context, stream: AsyncGenerator[T, None], what: str
) -> AsyncGenerator[T, None]:
    """The items of `stream`, closed when the call ends; a ServiceError ends the call with
    its status, anything unexpected with a bare INTERNAL that names only its type (`what`
    says which call failed, in the log)."""
    try:
        async with aclosing(stream) as items:
            async for item in items:
                yield item
    except ServiceError as error:
        await abort(context, error)
    except (grpc.aio.AbortError, GeneratorExit):
        raise
    except Exception as exc:
        log.error("%s failed unexpectedly: %s", what, type(exc).__name__)
        await abort_internal(context)


async def _start_response(context: Context) -> None:
    """Send the response headers at once, before the first item.

    A watch may be quiet for long (a model pause, a turn waiting for its lease to lapse);
    a proxy waits for the response headers at most its read timeout, and HTTP/2 pings do
    not count, so they must not wait for the first item.
    """
    await context.send_initial_metadata(())


def _end_stalled(context: Context) -> None:
    """End a call whose client stopped reading with DEADLINE_EXCEEDED.

    The status waits behind the events the client has not read, so it is sent from a task
    of its own, which ends when the client reads them or the call ends otherwise.
    """
    task = asyncio.ensure_future(_abort_stalled(context))
    _ending.add(task)
    task.add_done_callback(_ending.discard)


async def _abort_stalled(context: Context) -> None:
    try:
        await abort(context, STALLED)
    except grpc.aio.AbortError:
        pass  # The status was sent.
    except Exception as exc:  # The call ended before it could be: nothing left to tell.
        log.debug("a stalled call ended before its status: %s", type(exc).__name__)


async def _call(context: Context, call: Awaitable[T]) -> T:
    try:
        return await call
    except ServiceError as error:
        await abort(context, error)
    except grpc.aio.AbortError:
        raise
    except Exception as exc:
        log.error("request failed unexpectedly: %s", type(exc).__name__)
        await abort_internal(context)
