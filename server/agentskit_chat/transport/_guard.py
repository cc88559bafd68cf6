"""The server's first interceptor: authentication, the caller's principal, malformed requests.

It runs before any other interceptor or handler. A call without a valid bearer token (when
tokens are configured) is refused with UNAUTHENTICATED before its request is even decoded,
and before the method is looked up: an unknown method is refused alike, not answered
UNIMPLEMENTED; the health service stays open. An accepted call runs as its principal (see
`agentskit_chat.service.act_as`). A request that does not decode (bad protobuf, invalid
UTF-8 in a string) is refused with INVALID_ARGUMENT and one short log line, instead of
gRPC's UNKNOWN and a logged traceback.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, NoReturn, TypeAlias

import grpc
from google.protobuf.message import DecodeError

from agentskit_chat.service import ANONYMOUS, Principal, Reason, ServiceError, act_as

from ._auth import Authenticator
from ._status import abort

log = logging.getLogger("agentskit_chat.transport")

OPEN_PREFIXES: Final = ("/grpc.health.v1.Health/",)
"""Methods anyone may call: load balancers and orchestrators probe health unauthenticated."""
UNAUTHENTICATED: Final = ServiceError(Reason.UNAUTHENTICATED, "missing or invalid credentials")

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


@dataclass(frozen=True, slots=True)
class _Malformed:
    """What the request deserializer hands on instead of raising."""

    size: int


class Guard(grpc.aio.ServerInterceptor):
    """Authenticates every call (when an Authenticator is given) and decodes defensively."""

    def __init__(self, authenticator: Authenticator | None = None) -> None:
        self.authenticator = authenticator
        self._guarded: dict[tuple[str, Principal], tuple[Handler, Handler]] = {}
        """The guarded handler of each method and principal, made once (there are as many
        as methods times the tokens file's principals)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        """The handler to run: a refusal, or the real one under the caller's principal."""
        method = handler_call_details.method
        principal: Principal | None = ANONYMOUS
        if self.authenticator is not None and not method.startswith(OPEN_PREFIXES):
            principal = self.authenticator.authenticate(handler_call_details.invocation_metadata)
        handler = await continuation(handler_call_details)
        if principal is None:
            # Refused before anything else: an unknown method says no more than a known one.
            return _refusal(handler)
        if handler is None:
            return handler  # UNIMPLEMENTED, for callers the server accepts
        known = self._guarded.get((method, principal))
        if known is not None and known[0] is handler:
            return known[1]
        guarded = _guarded(handler, principal, method)
        self._guarded[method, principal] = (handler, guarded)
        return guarded


def _tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def decode(data: bytes) -> Any:
        try:
            return deserialize(data)
        except (DecodeError, UnicodeDecodeError, ValueError):
            return _Malformed(len(data))

    return decode


async def _refuse_malformed(context: Context, method: str, request: _Malformed) -> NoReturn:
    log.warning("malformed request refused: %s, %d bytes", method, request.size)
    await abort(
        context,
        ServiceError(
            Reason.INVALID_ARGUMENT,
            "the request is not a valid message of this method (malformed protobuf or "
            "invalid UTF-8)",
            field="request",
        ),
    )


def _guarded(handler: Handler, principal: Principal, method: str) -> Handler:
    """`handler` running as `principal`, refusing requests that did not decode."""
    decode = _tolerant(handler.request_deserializer)
    serialize = handler.response_serializer

    async def checked(request: Any, context: Context) -> Any:
        act_as(principal)  # The call's own task: nothing else sees it.
        if isinstance(request, _Malformed):
            await _refuse_malformed(context, method, request)
        return request

    async def checked_stream(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
        async for request in requests:
            yield await checked(request, context)

    if not handler.request_streaming and not handler.response_streaming:
        unary_unary: Any = handler.unary_unary

        async def guarded_unary_unary(request: Any, context: Context) -> Any:
            return await unary_unary(await checked(request, context), context)

        return grpc.unary_unary_rpc_method_handler(guarded_unary_unary, decode, serialize)
    if not handler.request_streaming:
        unary_stream: Any = handler.unary_stream
        if inspect.isasyncgenfunction(unary_stream):

            async def guarded_unary_stream(request: Any, context: Context) -> AsyncIterator[Any]:
                async for response in unary_stream(await checked(request, context), context):
                    yield response

            return grpc.unary_stream_rpc_method_handler(guarded_unary_stream, decode, serialize)

        async def guarded_unary_write(request: Any, context: Context) -> None:
            await unary_stream(await checked(request, context), context)

        return grpc.unary_stream_rpc_method_handler(guarded_unary_write, decode, serialize)
    if not handler.response_streaming:
        stream_unary: Any = handler.stream_unary

        async def guarded_stream_unary(requests: AsyncIterator[Any], context: Context) -> Any:
            act_as(principal)
            return await stream_unary(checked_stream(requests, context), context)

        return grpc.stream_unary_rpc_method_handler(guarded_stream_unary, decode, serialize)
    stream_stream: Any = handler.stream_stream

    async def guarded_stream_stream(
        requests: AsyncIterator[Any], context: Context
    ) -> AsyncIterator[Any]:
        act_as(principal)
        async for response in stream_stream(checked_stream(requests, context), context):
            yield response

    return grpc.stream_stream_rpc_method_handler(guarded_stream_stream, decode, serialize)


def _refusal(handler: Handler | None) -> Handler:
    """A handler of the same shape that refuses the call without decoding its request (of
    any shape for an unknown method: the refusal comes before the request is read)."""

    async def refuse(request: Any, context: Context) -> None:
        await abort(context, UNAUTHENTICATED)

    if handler is None:
        return grpc.stream_stream_rpc_method_handler(refuse)
    if not handler.request_streaming and not handler.response_streaming:
        return grpc.unary_unary_rpc_method_handler(refuse)
    if not handler.request_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse)
    if not handler.response_streaming:
        return grpc.stream_unary_rpc_method_handler(refuse)
    return grpc.stream_stream_rpc_method_handler(refuse)
