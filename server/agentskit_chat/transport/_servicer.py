"""The grpc.aio servicer: decodes requests, calls the application service, encodes results."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import TypeVar

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.service import ChatService, Completed, Failed, ServiceError, TurnRequest

from . import _convert as convert
from ._stall import StallWatch
from ._status import abort, abort_internal

log = logging.getLogger(__name__)
T = TypeVar("T")
Context = grpc.aio.ServicerContext[object, object]


class ChatServicer(chat_pb2_grpc.ChatServiceServicer):
    """Every RPC of agentskit.chat.v1.ChatService over one ChatService."""

    def __init__(self, service: ChatService) -> None:
        self.service = service

    async def ListDefinitions(
        self, request: pb.ListDefinitionsRequest, context: Context
    ) -> pb.ListDefinitionsResponse:
        """Every hosted definition."""
        definitions = [convert.definition(d) for d in self.service.definitions()]
        return pb.ListDefinitionsResponse(definitions=definitions)

    async def GetDefinition(
        self, request: pb.GetDefinitionRequest, context: Context
    ) -> pb.GetDefinitionResponse:
        """One definition by id."""

        async def get() -> pb.GetDefinitionResponse:
            definition = self.service.definition(request.definition_id)
            return pb.GetDefinitionResponse(definition=convert.definition(definition))

        return await _call(context, get)

    async def CreateSession(
        self, request: pb.CreateSessionRequest, context: Context
    ) -> pb.CreateSessionResponse:
        """A new session at the definition's initial state."""

        async def create() -> pb.CreateSessionResponse:
            view = await self.service.create_session(
                request.definition_id,
                request.session_id or None,
                convert.history_mode(request.history_mode),
            )
            return pb.CreateSessionResponse(session=convert.session(view))

        return await _call(context, create)

    async def GetSession(
        self, request: pb.GetSessionRequest, context: Context
    ) -> pb.GetSessionResponse:
        """The session and its server-held history."""

        async def get() -> pb.GetSessionResponse:
            history = await self.service.get_session(request.session_id)
            return pb.GetSessionResponse(
                session=convert.session(history.session), messages=convert.messages(history)
            )

        return await _call(context, get)

    async def DeleteSession(
        self, request: pb.DeleteSessionRequest, context: Context
    ) -> pb.DeleteSessionResponse:
        """Remove the session and its history."""

        async def delete() -> pb.DeleteSessionResponse:
            await self.service.delete_session(request.session_id, _expected_cursor(request))
            return pb.DeleteSessionResponse()

        return await _call(context, delete)

    async def TruncateHistory(
        self, request: pb.TruncateHistoryRequest, context: Context
    ) -> pb.TruncateHistoryResponse:
        """Drop the newest messages without a turn."""

        async def truncate() -> pb.TruncateHistoryResponse:
            history = await self.service.truncate_history(
                request.session_id,
                request.last_kept_message_id or None,
                _expected_cursor(request),
            )
            return pb.TruncateHistoryResponse(
                session=convert.session(history.session), messages=convert.messages(history)
            )

        return await _call(context, truncate)

    async def GetTurn(self, request: pb.GetTurnRequest, context: Context) -> pb.GetTurnResponse:
        """The status of one retained turn; runs nothing."""

        async def get() -> pb.GetTurnResponse:
            view = await self.service.get_turn(request.session_id, request.turn_id)
            return pb.GetTurnResponse(turn=convert.turn(view))

        return await _call(context, get)

    async def ListTurns(
        self, request: pb.ListTurnsRequest, context: Context
    ) -> pb.ListTurnsResponse:
        """A page of the session's retained turns, newest first."""

        async def page() -> pb.ListTurnsResponse:
            found = await self.service.list_turns(
                request.session_id, request.page_size, request.page_token or None
            )
            return pb.ListTurnsResponse(
                turns=[convert.turn(view) for view in found.turns],
                next_page_token=found.next_page_token or "",
            )

        return await _call(context, page)

    async def StreamTurn(
        self, request: pb.StreamTurnRequest, context: Context
    ) -> AsyncIterator[pb.StreamTurnResponse]:
        """Run one turn and stream its events."""
        stamp = convert.EventStamper(request.session_id, request.turn_id)
        deadline = asyncio.get_running_loop().time() + self.service.limits.turn_timeout
        try:
            turn = TurnRequest(
                request.session_id,
                request.turn_id,
                convert.operation(request),
                _expected_cursor(request),
            )
            async with aclosing(self.service.run_turn(turn)) as events:
                with StallWatch(events, deadline) as watch:
                    async for event in events:
                        watch.sending(terminal=isinstance(event, Completed | Failed))
                        yield stamp(event)
                        watch.sent()
        except ServiceError as error:
            await abort(context, error)
        except (grpc.aio.AbortError, GeneratorExit):
            raise
        except Exception as exc:
            log.error("turn failed unexpectedly: %s", type(exc).__name__)
            await abort_internal(context)


def _expected_cursor(
    request: pb.StreamTurnRequest | pb.TruncateHistoryRequest | pb.DeleteSessionRequest,
) -> int | None:
    return request.expected_cursor if request.HasField("expected_cursor") else None


async def _call(context: Context, call: Callable[[], Awaitable[T]]) -> T:
    try:
        return await call()
    except ServiceError as error:
        await abort(context, error)
    except grpc.aio.AbortError:
        raise
    except Exception as exc:
        log.error("request failed unexpectedly: %s", type(exc).__name__)
        await abort_internal(context)
