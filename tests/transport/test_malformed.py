"""Requests that do not decode: INVALID_ARGUMENT with ErrorInfo, one short log line each."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat_client._errors import from_rpc_error

from .conftest import live, run
from .rpcs import CHAT, RPCS, Rpc


def invalid_utf8(rpc: Rpc) -> bytes | None:
    """A request whose first string field holds bytes that are not UTF-8."""
    method = CHAT.methods_by_name[rpc.name]
    for field in method.input_type.fields:
        if field.type == FieldDescriptor.TYPE_STRING:
            return bytes([(field.number << 3) | 2, 2, 0xC3, 0x28])
    return None


MALFORMED = {
    "truncated": b"\x0a\x05ab",
    "bad-wire-type": b"\x0f\x01",
    "huge-length": b"\x0a\xff\xff\xff\xff\x0f",
}


def cases() -> list[tuple[Rpc, str, bytes]]:
    found = [(rpc, name, data) for rpc in RPCS for name, data in MALFORMED.items()]
    for rpc in RPCS:
        data = invalid_utf8(rpc)
        if data is not None:
            found.append((rpc, "invalid-utf8", data))
    return found


async def refusal(channel: grpc.aio.Channel, rpc: Rpc, data: bytes) -> Any:
    try:
        if rpc.streaming:
            stream: Any = channel.unary_stream(rpc.path)
            async for _ in stream(data, timeout=10):
                pass
        else:
            unary: Any = channel.unary_unary(rpc.path)
            await unary(data, timeout=10)
    except grpc.aio.AioRpcError as error:
        return from_rpc_error(error)
    raise AssertionError("the call succeeded")


def test_every_rpc_refuses_undecodable_requests_as_invalid(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    checked = cases()
    assert {rpc.name for rpc, kind, _ in checked if kind == "invalid-utf8"} >= {
        "GetSession",
        "CreateSession",
        "StreamTurn",
        "DeleteSession",
        "TruncateHistory",
        "GetDefinition",
    }

    async def scenario() -> None:
        async with live(tmp_path) as env:
            await env.client.create_session("support", session_id="kept")
            before = env.dump()
            caplog.clear()
            for rpc, kind, data in checked:
                error = await refusal(env.client.channel, rpc, data)
                assert error.code == grpc.StatusCode.INVALID_ARGUMENT, (rpc.name, kind)
                assert error.reason == "ERROR_REASON_INVALID_ARGUMENT"
                assert error.domain == "chat.agentskit.dev"
                assert error.metadata["field"] == "request"
            assert env.dump() == before

    run(scenario())
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) == len(checked)
    for record in records:
        assert record.exc_info is None
        assert record.getMessage().startswith("malformed request refused: /agentskit.chat.v1.")
        assert len(record.getMessage()) < 120


def test_a_well_formed_request_with_unknown_fields_still_works(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            request = pb.CreateSessionRequest(definition_id="support").SerializeToString()
            unary: Any = env.client.channel.unary_unary(
                f"/{CHAT.full_name}/CreateSession",
                response_deserializer=pb.CreateSessionResponse.FromString,
            )
            reply = await unary(request + b"\xf8\x3f\x01", timeout=10)  # field 1023, varint
            assert reply.session.definition_id == "support"

    run(scenario())
