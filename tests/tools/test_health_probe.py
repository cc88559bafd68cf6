"""grpc-health-probe, the tool orchestrators run, against a live `serve`."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import grpc
import pytest

from agentskit_chat_client import ChatClient, ChatError
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import health_status
from tests.tools.conftest import tool

CHAT_SERVICE = "agentskit.chat.v1.ChatService"


def test_a_serving_server_and_its_chat_service_probe_healthy(
    launch: Launcher, health_probe: Path, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state")
    for service in ("", CHAT_SERVICE):
        probed = tool(health_probe, f"-addr={server.target}", f"-service={service}")
        assert probed.returncode == 0, probed.stderr
        assert "status: SERVING" in probed.stdout + probed.stderr


def test_an_unknown_service_is_not_healthy(
    launch: Launcher, health_probe: Path, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state")
    probed = tool(health_probe, f"-addr={server.target}", "-service=agentskit.chat.v1.Unknown")
    assert probed.returncode == 3  # the probe's "RPC failed": the server answers NOT_FOUND
    assert "code = NotFound" in probed.stderr


def test_a_draining_server_probes_not_serving(
    launch: Launcher, health_probe: Path, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", "--drain-delay", "60")
    assert tool(health_probe, f"-addr={server.target}").returncode == 0
    server.send(signal.SIGTERM)

    async def drained() -> None:
        while await health_status(server.target) == 1:  # SERVING until the signal lands
            await asyncio.sleep(0.02)

    asyncio.run(asyncio.wait_for(drained(), 20))
    probed = tool(health_probe, f"-addr={server.target}")
    assert probed.returncode == 4  # the probe's "unhealthy"
    assert "NOT_SERVING" in probed.stderr + probed.stdout
    assert server.process.poll() is None  # still draining, not gone


def test_health_needs_no_token_where_every_other_call_does(
    launch: Launcher, health_probe: Path, tokens: Path, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", "--auth-tokens", str(tokens))
    probed = tool(health_probe, f"-addr={server.target}")
    assert probed.returncode == 0, probed.stderr
    assert "status: SERVING" in probed.stdout + probed.stderr

    async def without_token() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            with pytest.raises(ChatError) as refused:
                await client.list_definitions()
        assert refused.value.code == grpc.StatusCode.UNAUTHENTICATED

    asyncio.run(without_token())
