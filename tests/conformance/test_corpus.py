"""The corpus through the Python client: one test per scenario."""

from __future__ import annotations

import asyncio

import pytest

from .harness import LiveServer, Scenario, load_scenarios
from .runner import Runner

SCENARIOS = load_scenarios()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(conformance_server: LiveServer, scenario: Scenario) -> None:
    env = conformance_server.env("python")
    runner = Runner(
        env["AGENTSKIT_CHAT_CONFORMANCE_TARGET"], env["AGENTSKIT_CHAT_CONFORMANCE_TOKEN"], scenario
    )
    asyncio.run(runner.run())
