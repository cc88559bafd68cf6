"""The OpenAI front driven by the official `openai` npm package (6.49.0, which runs on the
Node the project requires, >= 20), unchanged, through a live `serve`: the scenarios of
tests/frameworks/openai/chat.mjs."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply, ToolCalls
from agentskit_chat_client import ChatClient
from tests.cli.conftest import Launcher
from tests.cli.conftest import launch as launch
from tests.cli.fixtures.serving import REPO, base_env
from tests.contract.tooling import require_toolchain
from tests.transport.web.openai.live import TOKEN, OpenAILive, start

SCRIPT = REPO / "tests" / "frameworks" / "openai" / "chat.mjs"
JOKE = Reply(chunks=("Why did ", "the stream ", "cross the road?"), usage=(5, 3))


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def live(launch: Launcher, model: FakeModelServer, tmp_path: Path) -> OpenAILive:
    require_toolchain("node", "node")
    if not (REPO / "node_modules" / "openai" / "package.json").exists():
        pytest.fail("the openai npm package is not installed: run `npm ci` at the repository root")
    return start(launch, model, tmp_path)


def node(live: OpenAILive, scenario: str) -> Any:
    env = base_env({"AGENTSKIT_OPENAI_BASE_URL": live.base_url, "AGENTSKIT_CHAT_TOKEN": TOKEN})
    done = subprocess.run(
        ["node", str(SCRIPT), scenario],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_node_runs_the_pinned_sdk() -> None:
    require_toolchain("node", "node")
    version = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    assert int(version.stdout.strip().lstrip("v").split(".")[0]) >= 20
    package = json.loads((REPO / "tests" / "frameworks" / "package.json").read_text())
    assert package["dependencies"]["openai"] == "6.49.0"


def test_a_deterministic_turn_and_its_decision(live: OpenAILive, model: FakeModelServer) -> None:
    seen = node(live, "deterministic")
    assert seen["content"] == "What is your name?"
    assert seen["finish"] == "stop"
    assert seen["kind"] == "deterministic"
    assert seen["decision"]["route"] == "start"
    assert (seen["decision"]["from"], seen["decision"]["to"]) == ("idle", "collecting")
    assert model.requests == []


def test_an_agentic_turn_streams(live: OpenAILive, model: FakeModelServer) -> None:
    model.enqueue(JOKE)
    seen = node(live, "agentic")
    assert seen["text"] == JOKE.text
    assert seen["decision"]["kind"] == "agentic"
    assert seen["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}


def test_a_keyed_retry_gets_the_whole_answer(live: OpenAILive) -> None:
    seen = node(live, "retry")
    assert seen["contents"] == ["What is your name?"] * 2
    assert seen["turns"] == ["node-turn"] * 2


def test_refusals(live: OpenAILive) -> None:
    seen = node(live, "refusals")
    assert seen["badToken"] == {"status": 401, "code": "invalid_api_key", "auth": True}
    assert seen["unknownModel"] == {"status": 404, "code": "model_not_found", "notFound": True}


def test_an_aborted_stream_stops_the_model_and_commits_nothing(
    live: OpenAILive, model: FakeModelServer
) -> None:
    model.enqueue(Reply(chunks=("first ", "second"), pause_after=1))
    seen = node(live, "cancel")
    assert seen == {"text": "first ", "aborted": True}
    assert model.wait_disconnect(timeout=30)
    model.resume()
    assert asyncio.run(_turns(live, "node-cancel")) == []


async def _turns(live: OpenAILive, session_id: str) -> list[Any]:
    async with ChatClient(live.server.target, token=TOKEN, timeout=30) as chat:
        return list((await chat.list_turns(session_id)).turns)


def test_a_tool_round_with_the_npm_sdk(live: OpenAILive, model: FakeModelServer) -> None:
    model.model.answers["What is the weather in Paris?"] = ToolCalls()
    seen = node(live, "tools")
    assert seen["finish"] == "tool_calls"
    assert [c["name"] for c in seen["calls"]] == ["get_weather"]
    assert isinstance(seen["calls"][0]["arguments"]["city"], str)
    assert seen["answer"].startswith("The fake model got 1 tool result")
    assert seen["kind"] == "agentic"
    assert model.requests[-1].tools is not None
