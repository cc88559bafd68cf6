"""`agentskit-chat chat --tools`: the person at the terminal runs the model's tools, in a
pipe (a transcript) against a live `serve` and the fake model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from agentskit_chat.fakemodel import Call, FakeModelServer, ToolCalls
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import REPO, base_env, command

TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
    {"name": "cancel_order", "description": "Cancel an order"},
]
DEFINITION = """\
id: assistant
revision: 1
model: {{adapter: openai, base_url: '{url}', model: fake-1}}
tools:
  cancel_order: {{approval: true}}
conversation:
  initial: open
  states: {{open: {{}}}}
"""


def chat(launch: Launcher, tmp_path: Path, model: FakeModelServer, text: str) -> str:
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    (definitions / "assistant.yaml").write_text(DEFINITION.format(url=model.url), "utf-8")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS), encoding="utf-8")
    server = launch(None, "--store", "memory://", "--definitions", str(definitions))
    done = subprocess.run(
        command(
            "chat", "--target", server.target, "--definition", "assistant", "--tools", str(tools)
        ),
        input=text,
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_tool_calls_are_shown_and_their_results_typed_in(launch: Launcher, tmp_path: Path) -> None:
    with FakeModelServer() as model:
        model.model.answers["weather?"] = ToolCalls(
            (Call("get_weather", '{"city":"Paris"}', id="w1"),)
        )
        out = chat(launch, tmp_path, model, "weather?\nsunny\n")
        lines = out.splitlines()
        assert '[tool call] get_weather {"city":"Paris"}' in lines
        assert 'result of get_weather {"city":"Paris"}: sunny' in lines
        assert any(line.startswith("The fake model got 1 tool result") for line in lines)
        assert [c["role"] for c in model.requests[-1].body["messages"]][-1] == "tool"
        assert model.requests[-1].body["messages"][-1]["content"] == "sunny"


def test_an_approval_is_asked_y_n_and_a_denial_reaches_the_model(
    launch: Launcher, tmp_path: Path
) -> None:
    with FakeModelServer() as model:
        model.model.answers["cancel it"] = ToolCalls((Call("cancel_order", '{"id":7}', id="c1"),))
        out = chat(launch, tmp_path, model, "cancel it\nn\nnot today\n")
        lines = out.splitlines()
        assert 'approve cancel_order {"id":7}? [y/n] n' in lines
        assert "reason (optional): not today" in lines
        denied = model.requests[-1].body["messages"][-1]
        assert denied["role"] == "tool"
        assert "denied" in denied["content"]
        assert "not today" in denied["content"]
