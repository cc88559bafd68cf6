"""The listener itself: HTTP/2, request size, health while draining, a drain that lets a
turn finish and refuses new ones."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

from agentskit_chat.service import Limits
from agentskit_chat.transport import Authenticator, token_digest
from tests.transport.conftest import run
from tests.waiting import EVENT_WAIT, until_async

from .conftest import draining, web_live
from .wire import SERVICE, envelope, reason, stream, unary


def test_http2_with_prior_knowledge_streams_a_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, http2=True) as web:
            created = await unary(web.http, "CreateSession", {"definitionId": "probe"})
            assert created.http_version == "HTTP/2"
            sid = created.json()["session"]["sessionId"]
            result = await stream(
                web.http,
                "StreamTurn",
                {"sessionId": sid, "turnId": "t", "submit": {"content": "hi"}},
            )
            assert result.error is None
            assert (
                "".join(m["delta"]["text"] for m in result.messages if "delta" in m)
                == "model answer"
            )

    run(scenario())


def test_requests_over_the_size_limit_are_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, max_request_bytes=1024) as web:
            big = {"sessionId": "s", "turnId": "t", "submit": {"content": "x" * 4096}}
            response = await web.http.post(
                SERVICE + "StreamTurn",
                content=envelope(json.dumps(big).encode()),
                headers={"content-type": "application/connect+json"},
            )
            end = json.loads(response.content[5:])
            assert end["error"]["code"] == "resource_exhausted"

    run(scenario())


def test_the_input_limit_is_the_services(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, limits=Limits(max_input_bytes=16)) as web:
            created = await unary(web.http, "CreateSession", {"definitionId": "probe"})
            sid = created.json()["session"]["sessionId"]
            result = await stream(
                web.http,
                "StreamTurn",
                {"sessionId": sid, "turnId": "t", "submit": {"content": "y" * 64}},
            )
            assert result.error is not None
            assert reason(result.error) == "ERROR_REASON_LIMIT_EXCEEDED"

    run(scenario())


def test_a_drain_finishes_the_turn_in_flight_and_refuses_new_ones(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            created = await unary(web.http, "CreateSession", {"definitionId": "probe"})
            sid = created.json()["session"]["sessionId"]
            other = (await unary(web.http, "CreateSession", {"definitionId": "probe"})).json()
            in_flight = asyncio.create_task(
                stream(
                    web.http,
                    "StreamTurn",
                    {"sessionId": sid, "turnId": "a", "submit": {"content": "/slow"}},
                )
            )
            await web.env.probe.entered.wait()
            drain = asyncio.create_task(web.env.server.drain(10.0))
            await until_async(draining(web.http), "the drain's 503")
            health = await web.http.get("/healthz")
            assert (health.status_code, health.text) == (503, "NOT_SERVING\n")
            give_up = time.monotonic() + EVENT_WAIT
            while True:
                refused = await stream(
                    web.http,
                    "StreamTurn",
                    {
                        "sessionId": other["session"]["sessionId"],
                        "turnId": "b",
                        "submit": {"content": "x"},
                    },
                )
                if refused.error is not None:
                    break
                assert time.monotonic() < give_up, "turns were never refused"
                await asyncio.sleep(0.01)
            assert refused.error["code"] == "unavailable"
            assert reason(refused.error) == "ERROR_REASON_SHUTTING_DOWN"
            web.env.probe.gate.set()
            finished = await in_flight
            assert finished.error is None
            assert [m for m in finished.messages if "completed" in m]
            await drain

    run(scenario())


def test_a_refused_call_is_answered_after_its_body_and_keeps_the_connection(
    tmp_path: Path,
) -> None:
    """A token is refused before the body is read; the body is still read, so a client
    that writes slowly gets the answer, not a reset, and may send its next call."""
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - sha256: {token_digest('t')}\n    tenant: a\n", "utf-8")

    def slow_client(port: int) -> list[bytes]:
        body = b"{" + b" " * 300_000 + b"}"
        request = (
            b"POST /agentskit.chat.v1.ChatService/ListDefinitions HTTP/1.1\r\nHost: chat\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        statuses = []
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            for _ in range(2):
                sock.sendall(request)
                for start in range(0, len(body), 16_384):
                    sock.sendall(body[start : start + 16_384])
                    time.sleep(0.001)
                answer = b""
                while b"unauthenticated" not in answer:
                    chunk = sock.recv(65_536)
                    assert chunk, f"connection closed after {answer!r}"
                    answer += chunk
                statuses.append(answer.split(b"\r\n", 1)[0])
        return statuses

    async def scenario() -> None:
        async with web_live(tmp_path, authenticator=Authenticator(tokens)) as web:
            assert web.env.server.http is not None
            statuses = await asyncio.to_thread(slow_client, web.env.server.http.port)
            assert statuses == [b"HTTP/1.1 401 ", b"HTTP/1.1 401 "]

    run(scenario())
