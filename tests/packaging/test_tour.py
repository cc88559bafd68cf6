"""`make tour`: the example definitions served with the fake model server, so an agentic turn
streams a model's answer in several deltas without an account; Ctrl-C stops both."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
from pathlib import Path

from agentskit_chat_client import (
    ChatClient,
    TextDelta,
    ToolCallResult,
    TurnCompleted,
    TurnDecision,
)
from tests.cli.fixtures.serving import Server
from tests.docs.pages import ROOT
from tests.postgres import free_port


def _default_sigint() -> None:
    """As in a terminal, Ctrl-C must reach `make` even when the tests run with SIGINT ignored
    (`make test &`, nohup): a process inherits an ignored SIGINT, and neither make nor the
    shell of its recipe can then handle it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


async def _turn(target: str, definition: str = "coffee", text: str = "Strongest?") -> list[object]:
    async with ChatClient(target, timeout=30) as client:
        session = await client.create_session(definition)
        return [event async for event in client.submit(session.session_id, text)]


def test_the_tour_streams_an_agentic_answer_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    grpc, http, model = free_port(), free_port(), free_port()
    stderr_path = tmp_path / "tour.stderr"
    stderr = stderr_path.open("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSKIT_CHAT_")}
    env["AGENTSKIT_CHAT_DRAIN_DELAY"] = "0"
    process = subprocess.Popen(
        [
            "make",
            "--no-print-directory",
            "tour",
            f"TOUR_LISTEN=127.0.0.1:{grpc}",
            f"TOUR_HTTP_LISTEN=127.0.0.1:{http}",
            f"TOUR_MODEL_LISTEN=127.0.0.1:{model}",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches
        preexec_fn=_default_sigint,
    )
    server = Server(process, stderr, stderr_path)
    try:
        assert server.wait_listening(timeout=120) == grpc
        events = asyncio.run(_turn(server.target))
        (decision,) = (e for e in events if isinstance(e, TurnDecision))
        assert decision.kind == "agentic"
        deltas = [e.text for e in events if isinstance(e, TextDelta)]
        assert len(deltas) == 8  # the tour's --chunks, each its own delta
        assert "".join(deltas).startswith("This reply comes from the fake model server")
        assert isinstance(events[-1], TurnCompleted)
        # The shop chat's model looks an order up on the example MCP server.
        looked = asyncio.run(_turn(server.target, "shop", "Where is my order?"))
        (ran,) = (e for e in looked if isinstance(e, ToolCallResult))
        assert ran.content == "There is no order example."  # the fake model's example id
        assert isinstance(looked[-1], TurnCompleted)
        assert looked[-1].content.startswith("The fake model got 1 tool result")
        routed = asyncio.run(_turn(server.target, "shop", "/order A-17"))
        assert isinstance(routed[-1], TurnCompleted)
        assert routed[-1].content.startswith("Order A-17: 2 items, shipped")
        assert not _refused(model)
        os.killpg(process.pid, signal.SIGINT)
        assert server.wait() == -signal.SIGINT  # make passes the interrupt on, as in a terminal
        assert _refused(model)
        assert _refused(grpc)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        server.close()
