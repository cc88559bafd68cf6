"""The listener itself: HTTP/2, request size, health while draining, a drain that lets a
turn finish and refuses new ones."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agentskit_chat.service import Limits
from tests.transport.conftest import run

from .conftest import web_live
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
            for _ in range(200):
                health = await web.http.get("/healthz")
                if health.status_code == 503:
                    break
                await asyncio.sleep(0.01)
            assert (health.status_code, health.text) == (503, "NOT_SERVING\n")
            for _ in range(200):
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
                await asyncio.sleep(0.01)
            assert refused.error is not None
            assert refused.error["code"] == "unavailable"
            assert reason(refused.error) == "ERROR_REASON_SHUTTING_DOWN"
            web.env.probe.gate.set()
            finished = await in_flight
            assert finished.error is None
            assert [m for m in finished.messages if "completed" in m]
            await drain

    run(scenario())
