"""Helpers of the AI SDK front's tests: a chat on the fake model, UI message stream parsing,
and the AI SDK's own client (tests/frameworks/aisdk) run as a Node.js subprocess."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from agentskit_chat.conversation import (
    ChatDefinition,
    RouteContext,
    command_route,
    define_chat,
    load_definitions,
    pattern_route,
)
from agentskit_chat.fakemodel import FakeModelServer, Reply
from tests.contract.tooling import ROOT, SKIP_ENV, require_toolchain
from tests.transport.conftest import CANARY, EXAMPLES
from tests.transport.test_auth import TOKEN_A, authenticator
from tests.transport.web.conftest import WebLive, web_live

SCRIPT: Final = ROOT / "tests" / "frameworks" / "aisdk" / "chat.mjs"
NODE_TIMEOUT: Final = 60.0
DEFINITION: Final = "chat"


def chat_definition(model_url: str) -> ChatDefinition:
    """Two routes that collect a name, one whose code fails, and the fake model otherwise."""

    def boom(text: str, context: RouteContext) -> str:
        raise RuntimeError(f"{CANARY} {text}")

    return define_chat(
        id=DEFINITION,
        model={"adapter": "openai", "base_url": model_url, "model": "aisdk-model"},
        conversation={
            "initial": "idle",
            "states": {
                "idle": {"on": {"start": "collecting", "boom": "idle"}, "actions": ["start"]},
                "collecting": {"on": {"finish": "complete"}, "actions": ["cancel"]},
                "complete": {"actions": ["restart"]},
            },
            "routes": [
                command_route(id="start", command="/start", event="start", response="What?"),
                pattern_route(
                    id="name",
                    pattern=r"^/name (?P<name>\S.*)$",
                    event="finish",
                    states=["collecting"],
                    response="Welcome, {name}.",
                ),
                command_route(id="boom", command="/boom", event="boom", response=boom),
            ],
        },
    )


def chunks(text: str) -> list[Any]:
    """The chunks of a UI message stream body: each `data:` line's JSON, `[DONE]` as is."""
    found: list[Any] = []
    for line in text.split("\n"):
        if line.startswith("data: "):
            data = line[len("data: ") :]
            found.append(data if data == "[DONE]" else json.loads(data))
    return found


def user(message_id: str, text: str) -> dict[str, Any]:
    """A user UIMessage with one text part."""
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def assistant(message_id: str, text: str) -> dict[str, Any]:
    """An assistant UIMessage with one text part."""
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": text}]}


async def post(
    http: httpx.AsyncClient, body: Any, definition: str = DEFINITION, **headers: str
) -> httpx.Response:
    """POST `body` (JSON) to the chat endpoint of `definition`."""
    return await http.post(f"/ai-sdk/{definition}", json=body, headers=headers)


def require_node() -> None:
    """Fail (or skip, by CONTRACT_SKIP_TOOLCHAINS=node) without Node.js and the `ai` package
    the workspaces install (`npm ci` at the repository root)."""
    require_toolchain("node", "node")
    if (ROOT / "node_modules" / "ai" / "package.json").is_file():
        return
    skipped = os.environ.get(SKIP_ENV, "").replace(",", " ").split()
    message = "the AI SDK (npm package ai) is missing: run `npm ci` at the repository root"
    if "node" in skipped:
        pytest.skip(f"{message}; skipped by {SKIP_ENV}")
    pytest.fail(f"{message}; set {SKIP_ENV}=node to skip on purpose", pytrace=False)


@dataclass
class NodeRun:
    """One run of the script: its JSON lines as they come, and a way to answer them."""

    process: asyncio.subprocess.Process
    events: list[dict[str, Any]] = field(default_factory=list)

    async def next_event(self) -> dict[str, Any]:
        """The next JSON line of the script (fails when it ends first)."""
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), NODE_TIMEOUT)
        if not line:
            raise AssertionError(f"the script ended early: {await self._stderr()}")
        value: dict[str, Any] = json.loads(line)
        self.events.append(value)
        if "failure" in value:
            raise AssertionError(value["failure"])
        return value

    async def answer(self) -> None:
        """Let a waiting script go on."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        await self.process.stdin.drain()

    async def result(self, on_wait: Callable[[dict[str, Any]], Any] | None = None) -> Any:
        """The script's result; `on_wait` (awaited when it returns an awaitable) is called
        for each waiting line before the script is let go on."""
        while True:
            event = await self.next_event()
            if "result" in event:
                return event["result"]
            if event.get("event") == "waiting":
                if on_wait is not None:
                    done = on_wait(event)
                    if asyncio.iscoroutine(done):
                        await done
                await self.answer()

    async def _stderr(self) -> str:
        assert self.process.stderr is not None
        return (await self.process.stderr.read()).decode(errors="replace")


@asynccontextmanager
async def node(
    scenario: str, api: str, token: str | None = None, **env: str
) -> AsyncIterator[NodeRun]:
    """Run the AI SDK client script's `scenario` against `api` (…/ai-sdk/DEFINITION)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AISDK_")}
    environment["AISDK_API"] = api
    if token is not None:
        environment["AISDK_TOKEN"] = token
    environment.update({f"AISDK_{k.upper()}": v for k, v in env.items()})
    process = await asyncio.create_subprocess_exec(
        "node",
        str(SCRIPT),
        scenario,
        cwd=str(Path(SCRIPT).parent),
        env=environment,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield NodeRun(process)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


AUTH_A = {"authorization": f"Bearer {TOKEN_A}"}
ORIGIN = "https://chat.example.com"
SLOW = Reply(chunks=("one ", "two"), pause_after=1)
SLOW_TEXT = "slowly"


@asynccontextmanager
async def served(tmp_path: Path, model: FakeModelServer, **options: Any) -> AsyncIterator[WebLive]:
    definitions = [chat_definition(model.url), load_definitions(EXAMPLES)["support"]]
    async with web_live(
        tmp_path,
        definitions=definitions,
        authenticator=authenticator(tmp_path),
        token=TOKEN_A,
        cors=frozenset({ORIGIN}),
        **options,
    ) as web:
        web.http.headers.update(AUTH_A)
        yield web


def decision(found: list[Any]) -> dict[str, Any]:
    (data,) = [c["data"] for c in found if c != "[DONE]" and c["type"].endswith("-decision")]
    return data  # type: ignore[no-any-return]


def answer(found: list[Any]) -> str:
    return "".join(c["delta"] for c in found if c != "[DONE]" and c["type"] == "text-delta")


GOOD = {"id": "chat-1", "trigger": "submit-message", "messages": [user("u1", "/start")]}


def with_(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}
