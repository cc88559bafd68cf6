"""Every RPC of ChatService, called with raw request bytes: the contract's full surface."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from agentskit.chat.v1 import chat_pb2 as pb

CHAT = pb.DESCRIPTOR.services_by_name["ChatService"]


@dataclass(frozen=True)
class Rpc:
    name: str
    path: str
    streaming: bool


RPCS = [Rpc(m.name, f"/{CHAT.full_name}/{m.name}", m.server_streaming) for m in CHAT.methods]


async def call_raw(
    channel: grpc.aio.Channel,
    rpc: Rpc,
    data: bytes,
    metadata: tuple[tuple[str, str], ...] = (),
    timeout: float = 10,
) -> tuple[grpc.StatusCode, str, list[bytes]]:
    """The status code, details and raw responses of one call with `data` as its request."""
    responses: list[bytes] = []
    try:
        if rpc.streaming:
            stream: Any = channel.unary_stream(rpc.path)
            async for item in stream(data, metadata=metadata, timeout=timeout):
                responses.append(item)
        else:
            unary: Any = channel.unary_unary(rpc.path)
            responses.append(await unary(data, metadata=metadata, timeout=timeout))
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or "", responses
    return grpc.StatusCode.OK, "", responses
