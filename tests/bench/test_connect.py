"""The benchmark's Connect client: envelopes, and calls against a live HTTP listener."""

from __future__ import annotations

import asyncio
import json
import os
import struct
from pathlib import Path

import httpx
import pytest

from bench._connect import END_STREAM, ConnectError, EnvelopeReader, envelope, server_stream, unary
from bench._servers import running
from bench._turns import ROOT
from bench.service import SERVICE_PATH, ConnectWorker, server_commands


def test_an_envelope_is_flags_then_big_endian_length_then_json() -> None:
    data = envelope({"sessionId": "s-1", "submit": {"content": "/ping"}})
    body = b'{"sessionId":"s-1","submit":{"content":"/ping"}}'
    assert data == bytes([0]) + struct.pack(">I", len(body)) + body
    assert envelope({}, END_STREAM)[:5] == bytes([2, 0, 0, 0, 2])


def test_the_reader_joins_pieces_and_splits_envelopes() -> None:
    stream = envelope({"a": 1}) + envelope({"b": 2}) + envelope({}, END_STREAM)
    reader = EnvelopeReader()
    found = []
    for index in range(len(stream)):  # one byte at a time: every boundary is crossed
        found += reader.feed(stream[index : index + 1])
    assert [(flags, json.loads(body)) for flags, body in found] == [
        (0, {"a": 1}),
        (0, {"b": 2}),
        (END_STREAM, {}),
    ]
    assert reader.pending == 0


def test_the_reader_keeps_an_incomplete_envelope() -> None:
    reader = EnvelopeReader()
    whole = envelope({"a": 1})
    assert reader.feed(whole + whole[:7]) == [(0, b'{"a":1}')]
    assert reader.pending == 7
    assert reader.feed(whole[7:]) == [(0, b'{"a":1}')]
    assert reader.pending == 0


def test_turns_and_errors_over_a_live_http_listener(tmp_path: Path) -> None:
    async def scenario() -> None:
        argv = server_commands(tmp_path)["memory"]
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("AGENTSKIT_CHAT_", "OTEL_"))
        }
        async with running("memory", argv, cwd=ROOT, env=env) as server:
            assert server.http_address is not None
            base_url = f"http://{server.http_address}"
            async with httpx.AsyncClient(base_url=base_url) as client:
                worker = ConnectWorker(client, "t")
                await worker.prepare(2)
                for _ in range(2):
                    await worker.next()
                    assert await worker.call() is None
                missing = {
                    "sessionId": "s-missing",
                    "turnId": "t-1",
                    "submit": {"content": "/ping"},
                }
                with pytest.raises(ConnectError) as stream_error:
                    await server_stream(client, f"{SERVICE_PATH}/StreamTurn", missing)
                with pytest.raises(ConnectError) as unary_error:
                    await unary(client, f"{SERVICE_PATH}/CreateSession", {"definitionId": "nope"})
        assert stream_error.value.code == "not_found"
        assert unary_error.value.code == "not_found"

    asyncio.run(scenario())
