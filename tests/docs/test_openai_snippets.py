"""The OpenAI page's programs and curl commands run as written against a live
`serve --http-listen`: the Python program with the `openai` package, the JavaScript one with
the `openai` npm package of the tests/frameworks workspace, the curl lines through `sh`. Each
streams the `/start` turn of `support` and prints its answer and decision."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from agentskit_chat.fakemodel import FakeModelServer
from tests.cli.conftest import Launcher
from tests.cli.conftest import launch as launch
from tests.cli.fixtures.serving import REPO, base_env
from tests.contract.tooling import require_toolchain
from tests.docs.pages import DOCS, Block, Kind, marked
from tests.transport.web.openai.live import TOKEN, OpenAILive, start

PAGE = DOCS / "openai.md"
ANSWER = "What is your name?"
DECISION = "deterministic turn, route start"
NODE_MODULES = REPO / "node_modules"
"""Where `npm ci` installs the tests/frameworks workspace's packages, `openai` among them."""
RUN_TIMEOUT = 60.0


def block(kind: Kind, name: str) -> Block:
    """The one block of the page marked `kind` with `name`."""
    (found,) = (b for b in marked(kind, where=[PAGE]) if b.name == name)
    return found


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def live(launch: Launcher, model: FakeModelServer, tmp_path: Path) -> OpenAILive:
    return start(launch, model, tmp_path)


def environment(live: OpenAILive, token: str | None = TOKEN) -> dict[str, str]:
    """The reader's environment: the server's address and token, no OpenAI settings."""
    env = {k: v for k, v in base_env().items() if not k.startswith("OPENAI_")}
    env["AGENTSKIT_CHAT_URL"] = live.base_url.removesuffix("/v1")
    if token is not None:
        env["AGENTSKIT_CHAT_TOKEN"] = token
    return env


def run(argv: list[str], cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def check_printed(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert done.stdout.splitlines() == [ANSWER, DECISION], done.stdout


def test_the_python_program(live: OpenAILive, model: FakeModelServer, tmp_path: Path) -> None:
    program = block("file", "openai_chat.py")
    (tmp_path / "openai_chat.py").write_text(program.code, encoding="utf-8")
    check_printed(run([sys.executable, "openai_chat.py"], tmp_path, environment(live)))
    refused = run([sys.executable, "openai_chat.py"], tmp_path, environment(live, None))
    assert refused.returncode != 0
    assert "AuthenticationError" in refused.stderr, refused.stderr
    assert model.requests == []


def test_the_javascript_program(live: OpenAILive, model: FakeModelServer, tmp_path: Path) -> None:
    require_toolchain("node", "node")
    if not (NODE_MODULES / "openai" / "package.json").exists():
        pytest.fail("the openai npm package is not installed: run `npm ci` at the repository root")
    program = block("file", "openai_chat.mjs")
    (tmp_path / "openai_chat.mjs").write_text(program.code, encoding="utf-8")
    (tmp_path / "node_modules").symlink_to(NODE_MODULES, target_is_directory=True)
    check_printed(run(["node", "openai_chat.mjs"], tmp_path, environment(live)))
    refused = run(["node", "openai_chat.mjs"], tmp_path, environment(live, None))
    assert refused.returncode != 0
    assert "401" in refused.stderr, refused.stderr
    assert model.requests == []


def test_the_curl_commands(live: OpenAILive, model: FakeModelServer, tmp_path: Path) -> None:
    assert shutil.which("curl") is not None, "curl is missing: `make tools` installs it"
    models, completion = block("commands", "openai-curl").code.splitlines()
    listed = run(["sh", "-c", models], tmp_path, environment(live))
    assert listed.returncode == 0, listed.stderr
    assert "support" in {m["id"] for m in json.loads(listed.stdout)["data"]}

    streamed = run(["sh", "-c", completion], tmp_path, environment(live))
    assert streamed.returncode == 0, streamed.stderr
    head, _, body = streamed.stdout.partition("\n\n")  # text mode reads CRLF as LF
    status, *fields = head.splitlines()
    assert re.fullmatch(r"HTTP/[\d.]+ 200 ?.*", status), head
    headers = {name.lower(): value for name, _, value in (f.partition(": ") for f in fields)}
    assert (headers["x-agentskit-kind"], headers["x-agentskit-route"]) == (
        "deterministic",
        "start",
    )
    events = re.findall(r"^data: (.*)$", body, re.M)
    assert events[-1] == "[DONE]", body
    chunks = [json.loads(event) for event in events[:-1]]
    assert chunks[0]["agentskit"]["kind"] == "deterministic"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == ANSWER

    refused = run(["sh", "-c", models], tmp_path, environment(live, None))
    assert json.loads(refused.stdout)["error"]["code"] == "invalid_api_key"
    assert model.requests == []
