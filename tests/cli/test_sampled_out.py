"""A turn the sampler drops is counted in every metric and exports no span, over real OTLP."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from agentskit_chat_client import ChatClient, Submit, TurnCompleted
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import EXAMPLES
from tests.telemetry.receiver import OtlpReceiver

TURNS = 6
STREAM_TURN = "agentskit.chat.v1.ChatService/StreamTurn"
QUIET = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "60000"}


def counted(receiver: OtlpReceiver, metric: str, method: str | None = None) -> int:
    """The cumulative count of `metric` (a counter's value, a histogram's count) over its
    attribute sets (only those of RPC `method`, if given)."""
    latest: dict[str, int] = {}
    for point in receiver.metric_points(metric):
        if method is not None and point.attributes.get("rpc.method") != method:
            continue
        key = repr(sorted(point.attributes.items()))
        value = int(point.value if point.count is None else point.count)
        latest[key] = max(latest.get(key, 0), value)
    return sum(latest.values())


def test_a_sampler_that_drops_every_trace_exports_no_span_but_counts_every_turn(
    launch: Launcher, tmp_path: Path
) -> None:
    with OtlpReceiver() as receiver:
        env = receiver.env(**QUIET, OTEL_TRACES_SAMPLER="always_off")
        server = launch(tmp_path / "state", "--definitions", str(EXAMPLES), env=env)

        async def scenario() -> None:
            async with ChatClient(server.target, timeout=30) as client:
                session = (await client.create_session("orders")).session_id
                for number in range(TURNS):
                    text = "/return" if number % 2 == 0 else "/help"
                    events = client.stream_turn(session, Submit(text), turn_id=f"t{number}")
                    assert isinstance([e async for e in events][-1], TurnCompleted)

        asyncio.run(scenario())
        server.send(signal.SIGTERM)
        assert server.wait() == 0  # the drain flushes the metrics
        receiver.wait_for_metric("agentskit.chat.turns")
        assert counted(receiver, "agentskit.chat.turns") == TURNS
        assert counted(receiver, "agentskit.chat.turn.duration") == TURNS
        assert counted(receiver, "rpc.server.call.duration", STREAM_TURN) == TURNS
        assert receiver.spans() == []
        assert receiver.attempts("traces") == 0
