"""The grpc.aio servicer: `ChatRpcs` with service errors ended as gRPC statuses."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import aclosing
from typing import TypeVar

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.service import ChatService, ServiceError

from ._rpcs import ChatRpcs
from ._status import abort, abort_internal

log = logging.getLogger(__name__)
T = TypeVar("T")
Context = grpc.aio.ServicerContext[object, object]


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
        try:
            async with aclosing(self.rpcs.stream_turn(request)) as events:
                async for event in events:
                    yield event
        except ServiceError as error:
            await abort(context, error)
        except (grpc.aio.AbortError, GeneratorExit):
            raise
        except Exception as exc:
            log.error("turn failed unexpectedly: %s", type(exc).__name__)
            await abort_internal(context)


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
