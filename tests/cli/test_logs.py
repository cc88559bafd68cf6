"""`serve`'s turn log lines: the caller's trace id without tracing on, and never a turn held
up by a stdout nobody reads."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from agentskit_chat_client import ChatClient, Submit, TurnCompleted
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import EXAMPLES, Server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
STALL_TURNS = 800
"""Turn lines enough to fill the pipe (64 kB) and the handler's backlog (256 kB)."""


def log_lines(server: Server) -> list[dict[str, Any]]:
    parsed = []
    for line in server.stdout.splitlines():
        if line.startswith("{"):
            try:
                parsed.append(json.loads(line))
            except ValueError:
                raise AssertionError(repr(line)) from None
    return parsed


def test_with_spans_off_the_turn_line_carries_the_callers_trace_id(
    launch: Launcher, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", "--definitions", str(EXAMPLES), log_level="INFO")

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = (await client.create_session("orders")).session_id
            traced = client.stream_turn(
                session,
                Submit("/return"),
                turn_id="traced",
                metadata=[("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-01")],
            )
            assert isinstance([e async for e in traced][-1], TurnCompleted)
            await client.run_turn(session, Submit("/help"), turn_id="untraced")

    asyncio.run(scenario())
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    turns = {line["turn_id"]: line for line in log_lines(server) if line["event"] == "turn"}
    assert turns["traced"]["trace_id"] == TRACE_ID
    assert "span_id" not in turns["traced"]  # no span of ours was recorded
    assert "trace_id" not in turns["untraced"]


def test_turns_go_on_while_stdout_is_not_read_and_drops_are_reported(
    launch: Launcher, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", "--definitions", str(EXAMPLES), log_level="INFO")

    async def turns(client: ChatClient, count: int) -> None:
        session = (await client.create_session("orders")).session_id
        for _ in range(count):
            result = await client.run_turn(session, Submit("/help"))
            assert result.completed is not None

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            # Nothing reads the server's stdout meanwhile: a blocking write would stall it.
            await asyncio.gather(*(turns(client, STALL_TURNS // 4) for _ in range(4)))

    asyncio.run(scenario())
    server.wait_output('"event": "turn"')  # the reader is back: the backlog goes out
    asyncio.run(after_the_stall(server.target))
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    lines = log_lines(server)  # every line whole: each parses
    dropped = [line for line in lines if "log lines were dropped" in line["event"]]
    assert dropped, "no drop was reported"
    count = sum(int(line["event"].split()[0]) for line in dropped)
    written = [line for line in lines if line["event"] == "turn"]
    assert count > 0
    assert len(written) + count == STALL_TURNS + 1


async def after_the_stall(target: str) -> None:
    async with ChatClient(target, timeout=30) as client:
        session = (await client.create_session("orders")).session_id
        assert (await client.run_turn(session, Submit("/help"))).completed is not None
