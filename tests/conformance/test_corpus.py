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
    tokens = {
        "": env["AGENTSKIT_CHAT_CONFORMANCE_TOKEN"],
        "limited": env["AGENTSKIT_CHAT_CONFORMANCE_LIMITED_TOKEN"],
    }
    runner = Runner(env["AGENTSKIT_CHAT_CONFORMANCE_TARGET"], tokens, scenario)
    asyncio.run(runner.run())
