"""ChatService for the HTTP listener: `ChatRpcs` under Connect's generated interface.

Connect and gRPC-Web requests reach the same `ChatRpcs` (and so the same service, store,
leases and limits) as gRPC calls; a `ServiceError` becomes the Connect error with the same
code and details, and anything unexpected a bare INTERNAL that names nothing of it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from contextlib import aclosing
from typing import Any, TypeVar

from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import ANONYMOUS, ServiceError, act_as
from agentskit_chat.transport._auth import Authenticator
from agentskit_chat.transport._guard import UNAUTHENTICATED
from agentskit_chat.transport._rpcs import ChatRpcs
from agentskit_chat.transport.web.boundary.errors import connect_error, internal_error
from agentskit_chat.transport.web.boundary.streams import current_flow

log = logging.getLogger("agentskit_chat.transport")
T = TypeVar("T")
Context = RequestContext[Any, Any]


class Authentication:
    """A leading metadata interceptor: refuses a call without a valid bearer token before
    its body is read, and runs an accepted call as its principal."""

    def __init__(self, authenticator: Authenticator | None) -> None:
        self.authenticator = authenticator

    async def on_start(self, ctx: Context) -> None:
        """Authenticate the call from its `authorization` header."""
        if self.authenticator is None:
            act_as(ANONYMOUS)
            return
        principal = self.authenticator.authenticate(ctx.request_headers.items())
        if principal is None:
            raise connect_error(UNAUTHENTICATED)
        act_as(principal)

    async def on_end(self, token: None, ctx: Context, error: Exception | None, /) -> None:
        """Nothing to do at the end of a call."""


class ConnectChatService:
    """Every RPC of agentskit.chat.v1.ChatService, as the Connect ASGI application calls them."""

    def __init__(self, rpcs: ChatRpcs) -> None:
        self.rpcs = rpcs

    async def list_definitions(
        self, request: pb.ListDefinitionsRequest, ctx: Context, /
    ) -> pb.ListDefinitionsResponse:
        """Every hosted definition."""
        return await _call(self.rpcs.list_definitions(request))

    async def get_definition(
        self, request: pb.GetDefinitionRequest, ctx: Context, /
    ) -> pb.GetDefinitionResponse:
        """One definition by id."""
        return await _call(self.rpcs.get_definition(request))

    async def create_session(
        self, request: pb.CreateSessionRequest, ctx: Context, /
    ) -> pb.CreateSessionResponse:
        """A new session at the definition's initial state."""
        return await _call(self.rpcs.create_session(request))

    async def get_session(
        self, request: pb.GetSessionRequest, ctx: Context, /
    ) -> pb.GetSessionResponse:
        """The session and its server-held history."""
        return await _call(self.rpcs.get_session(request))

    async def delete_session(
        self, request: pb.DeleteSessionRequest, ctx: Context, /
    ) -> pb.DeleteSessionResponse:
        """Remove the session and its history."""
        return await _call(self.rpcs.delete_session(request))

    async def truncate_history(
        self, request: pb.TruncateHistoryRequest, ctx: Context, /
    ) -> pb.TruncateHistoryResponse:
        """Drop the newest messages without a turn."""
        return await _call(self.rpcs.truncate_history(request))

    async def get_turn(self, request: pb.GetTurnRequest, ctx: Context, /) -> pb.GetTurnResponse:
        """The status of one retained turn; runs nothing."""
        return await _call(self.rpcs.get_turn(request))

    async def list_turns(
        self, request: pb.ListTurnsRequest, ctx: Context, /
    ) -> pb.ListTurnsResponse:
        """A page of the session's retained turns, newest first."""
        return await _call(self.rpcs.list_turns(request))

    async def stream_turn(
        self, request: pb.StreamTurnRequest, ctx: Context, /
    ) -> AsyncIterator[pb.StreamTurnResponse]:
        """Run one turn and stream its events; a browser that goes away cancels the turn
        (the Connect application cancels this call), which releases its lease. A client
        that stops reading loses the turn at its deadline and the call ends on the wire
        (see `Flow`)."""
        flow = current_flow()
        stalled = None if flow is None else flow.stall
        async with aclosing(_streamed(self.rpcs.stream_turn(request, stalled), "turn")) as events:
            async for event in events:
                yield event

    async def watch_turn(
        self, request: pb.WatchTurnRequest, ctx: Context, /
    ) -> AsyncIterator[pb.StreamTurnResponse]:
        """Stream one turn's events after a sequence the caller has; a browser that goes
        away only ends its watch."""
        flow = current_flow()
        stalled = None if flow is None else flow.stall
        stream = self.rpcs.watch_turn(request, stalled)
        async with aclosing(_streamed(stream, "turn watch")) as events:
            async for event in events:
                yield event

    async def cancel_turn(
        self, request: pb.CancelTurnRequest, ctx: Context, /
    ) -> pb.CancelTurnResponse:
        """Stop a running turn; idempotent."""
        return await _call(self.rpcs.cancel_turn(request))

    async def watch_session(
        self, request: pb.WatchSessionRequest, ctx: Context, /
    ) -> AsyncIterator[pb.WatchSessionResponse]:
        """Stream the session's turns and changes as they happen; a browser that goes away
        only ends its watch."""
        async with aclosing(_streamed(self.rpcs.watch_session(request), "session watch")) as items:
            async for item in items:
                yield item


async def _streamed(stream: AsyncGenerator[T, None], what: str) -> AsyncGenerator[T, None]:
    """The items of `stream`, closed when the call ends; a ServiceError ends the call with
    its Connect error, anything unexpected with a bare INTERNAL that names only its type
    (`what` says which call failed, in the log)."""
    try:
        async with aclosing(stream) as items:
            async for item in items:
                yield item
    except ServiceError as error:
        raise connect_error(error) from None
    except (ConnectError, GeneratorExit):
        raise
    except Exception as exc:
        log.error("%s failed unexpectedly: %s", what, type(exc).__name__)
        raise internal_error() from None


async def _call(call: Awaitable[T]) -> T:
    try:
        return await call
    except ServiceError as error:
        raise connect_error(error) from None
    except ConnectError:
        raise
    except Exception as exc:
        log.error("request failed unexpectedly: %s", type(exc).__name__)
        raise internal_error() from None
