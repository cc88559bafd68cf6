"""The echo baseline streams what a deterministic turn streams: as many messages, of about
the same sizes."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from bench import _echo
from bench._servers import running
from bench._turns import DEFINITION_ID, DEFINITIONS, ROOT, TURN_TEXT


async def _turn_sizes(state: Path) -> list[int]:
    argv = [sys.executable, "-m", "agentskit_chat.cli", "serve", "--listen", "127.0.0.1:0"]
    argv += ["--definitions", str(DEFINITIONS), "--drain-delay", "0", "--state-dir", str(state)]
    argv += ["--store", f"sqlite:{state / 'sessions.db'}"]
    async with (
        running("sqlite", argv, cwd=ROOT) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        stub = chat_pb2_grpc.ChatServiceStub(channel)
        created = await stub.CreateSession(pb.CreateSessionRequest(definition_id=DEFINITION_ID))
        request = pb.StreamTurnRequest(
            session_id=created.session.session_id,
            turn_id="t1",
            submit=pb.SubmitOperation(content=TURN_TEXT),
        )
        return [event.ByteSize() async for event in stub.StreamTurn(request)]


async def _echo_sizes(*options: str) -> list[int]:
    argv = [sys.executable, "-m", "bench._echo", "--listen", "127.0.0.1:0", *options]
    async with (
        running("echo", argv, cwd=ROOT) as server,
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        call: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(_echo.PATH)
        return [len(reply) async for reply in call(b"ping")]


def test_the_echo_streams_as_many_messages_as_a_turn_of_the_same_sizes(tmp_path: Path) -> None:
    turn = asyncio.run(_turn_sizes(tmp_path))
    echo = asyncio.run(_echo_sizes())
    assert echo == list(_echo.TURN_SIZES)
    assert len(echo) == len(turn) == 4
    # A turn's sizes vary by a byte or two with its timestamps' encoded lengths.
    assert all(abs(mine - theirs) <= 4 for mine, theirs in zip(echo, turn, strict=True))


def test_two_replies_remain_on_request() -> None:
    assert asyncio.run(_echo_sizes("--replies", "2")) == [len(b"pong-1"), len(b"pong-2")]
