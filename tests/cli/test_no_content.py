"""No prompt content, and no API key, leaves the request path of a real `serve` process.

A unique canary string is planted in inputs, edits, a route response made by code, a
template filled from the input and the model's output. It must be absent from every
exported span (names, attributes, events, status), every metric attribute, the Prometheus
scrape endpoint, every log line (DEBUG level), every error message (gRPC, and Connect over
the HTTP listener), every stored session record, and the model request's headers (which
carry only the trace context beside the key).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import signal
import sqlite3
import struct
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from agentskit_chat.fakemodel import Call, FakeModelServer, Reply, ToolCalls
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Dispatch,
    Edit,
    HistoryMode,
    Message,
    Retry,
    Submit,
    ToolDeclaration,
    ToolResult,
    ToolResults,
)
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import EXAMPLES, run_cli
from tests.postgres import Cluster
from tests.telemetry.receiver import OtlpReceiver

CANARY = "canary-5d1e-never-leaves"
API_KEY = "sk-canary-key-0b7f3e"
CODE_CHAT = "tests.cli.fixtures.code_chat"
LOOKUP = ToolDeclaration("lookup", "Looks a thing up", {"type": "object"})
TOOL_ROUND = "look it up"
"""The fake model calls `lookup` with the canary in its arguments for this input."""


def definitions(directory: Path, base_url: str) -> Path:
    directory.mkdir()
    for source in EXAMPLES.glob("*.yaml"):
        (directory / source.name).write_text(source.read_text(encoding="utf-8"), "utf-8")
    (directory / "assistant.yaml").write_text(
        "id: assistant\nrevision: 1\n"
        f"model: {{adapter: openai, base_url: '{base_url}', model: fake-1, "
        "api_key_env: CANARY_MODEL_KEY}\n"
        "conversation:\n  initial: open\n  states: {open: {on: {hello: open}}}\n"
        "  routes: [{id: hello, command: /hello, event: hello, response: Hi.}]\n",
        encoding="utf-8",
    )
    return directory


async def talk(target: str) -> None:
    async with ChatClient(target, timeout=30) as client:
        model = (await client.create_session("assistant")).session_id
        answered = await client.run_turn(model, Submit(f"tell me about {CANARY}"))
        assert CANARY in answered.text  # the model's output carries the canary
        first = (await client.get_session(model)).messages[0].id
        await client.run_turn(model, Edit(first, f"edited {CANARY}"))

        support = (await client.create_session("support")).session_id
        await client.run_turn(support, Submit("/start"))
        named = await client.run_turn(support, Submit(f"/name {CANARY}"))
        assert named.text == f"Welcome, {CANARY}."

        await tool_rounds(client)

        code = (await client.create_session("code")).session_id
        made = await client.run_turn(code, Submit(f"/echo {CANARY}"))
        assert made.text == f"You wrote: /echo {CANARY}"
        again = await client.run_turn(code, Retry())  # replays the stored, sealed response
        assert again.text == made.text

        held = await client.create_session("support", history_mode=HistoryMode.CLIENT)
        history = (Message("u1", "user", "/start"), Message("u2", "user", f"/x {CANARY}"))
        await client.run_turn(held.session_id, Dispatch(history))

        refusals = [
            client.run_turn(model, Submit("x"), turn_id=f"bad {CANARY}"),
            client.run_turn(model, Submit("x", message_id=f"bad {CANARY}")),
            client.run_turn(model, Submit(CANARY * 5000)),
            client.run_turn(model, Edit("no-such-message", CANARY)),
            client.get_session(f"{CANARY} no such session"),
        ]
        for refusal in refusals:
            with pytest.raises(ChatError) as refused:
                await refusal
            assert CANARY not in str(refused.value)
            assert all(CANARY not in value for value in refused.value.metadata.values())

        # A request that does not decode (the canary, then a byte that is not UTF-8).
        field = CANARY.encode() + b"\xff"
        undecodable = bytes([0x0A, len(field)]) + field
        get: Any = client.channel.unary_unary("/agentskit.chat.v1.ChatService/GetSession")
        with pytest.raises(grpc.aio.AioRpcError) as malformed:
            await get(undecodable, timeout=10)
        assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert CANARY not in str(malformed.value.details())


async def tool_rounds(client: ChatClient) -> None:
    """A tool round with the canary in the call's arguments and in its result, in a
    server-held session and a client-held one."""
    held = (await client.create_session("assistant")).session_id
    asked = await client.run_turn(held, Submit(TOOL_ROUND), tools=[LOOKUP])
    assert asked.completed is not None
    assert CANARY in asked.completed.tool_calls[0].arguments
    results = [ToolResult(p.tool_call_id, f"found {CANARY}") for p in asked.pending_tool_calls]
    assert (await client.run_turn(held, ToolResults(results), tools=[LOOKUP])).ok

    kept = await client.create_session("assistant", history_mode=HistoryMode.CLIENT)
    user = Message("u1", "user", TOOL_ROUND)
    first = await client.run_turn(kept.session_id, Dispatch([user]), tools=[LOOKUP])
    assert first.completed is not None
    answer = Message(
        first.completed.assistant_message_id, "assistant", "", tool_calls=first.completed.tool_calls
    )
    result = Message("r1", "tool", f"found {CANARY}", tool_call_id=first.completed.tool_calls[0].id)
    again = await client.run_turn(kept.session_id, Dispatch([user, answer, result]), tools=[LOOKUP])
    assert again.ok


def over_http(base: str) -> None:
    """Canary turns and refusals through the HTTP listener (Connect JSON)."""
    rpc = f"{base}/agentskit.chat.v1.ChatService/"
    json_type = {"content-type": "application/json"}
    with httpx.Client(timeout=30) as http:
        created = http.post(rpc + "CreateSession", json={"definitionId": "support"})
        sid = created.json()["session"]["sessionId"]
        for content in ("/start", f"/name {CANARY}"):
            turn = {
                "sessionId": sid,
                "turnId": secrets.token_hex(4),
                "submit": {"content": content},
            }
            body = json.dumps(turn).encode()
            answered = http.post(
                rpc + "StreamTurn",
                content=struct.pack(">BI", 0, len(body)) + body,
                headers={"content-type": "application/connect+json"},
            )
            assert answered.status_code == 200
        assert CANARY in answered.text  # the route's answer carries it back to the caller
        refusals = [
            http.post(
                rpc + "GetSession", content=f'{{"sessionId": "{CANARY}'.encode(), headers=json_type
            ),
            http.post(rpc + "GetSession", json={"sessionId": {"x": CANARY}}),
            http.post(rpc + "GetSession", json={"sessionId": f"{CANARY} no such session"}),
        ]
        for refused in refusals:
            assert refused.status_code in (400, 404)
            assert CANARY not in refused.text


def through_the_tools(target: str, tmp_path: Path) -> str:
    """Canary turns through `agentskit-chat test` and `chat`: the server must not leak it,
    and neither tool logs it (stderr); the chat shows it and the test report names its step."""
    tests = tmp_path / "canary.test.yaml"
    tests.write_text(
        "definition: support\ncases:\n  - name: canary\n    steps:\n"
        f"      - submit: /start\n      - submit: /name {CANARY}\n"
        "        expect: {state: idle}\n",
        encoding="utf-8",
    )
    tested = run_cli("test", str(tests), "--target", target)
    assert tested.returncode == 1
    assert "expected 'idle'" in tested.stdout
    chatted = run_cli("chat", "--target", target, "--definition", "support", input=CANARY)
    assert chatted.returncode == 0
    assert CANARY in chatted.stdout
    return tested.stderr + chatted.stderr


def test_no_content_or_key_reaches_spans_metrics_logs_errors_or_records(
    launch: Launcher, tmp_path: Path
) -> None:
    reply = Reply(chunks=("The answer ", f"mentions {CANARY} ", "twice: ", CANARY))
    calls = ToolCalls((Call("lookup", json.dumps({"q": CANARY})),))
    with (
        FakeModelServer(default=reply, answers={TOOL_ROUND: calls}) as model,
        OtlpReceiver() as receiver,
    ):
        state = tmp_path / "state"
        server = launch(
            state,
            "--definitions",
            str(definitions(tmp_path / "definitions", model.url)),
            "--definitions-module",
            CODE_CHAT,
            "--metrics-listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            env=receiver.env(CANARY_MODEL_KEY=API_KEY),
            log_level="DEBUG",
        )
        server.wait_output("agentskit-chat metrics at ")
        scrape = re.search(r"metrics at (http://\S+/metrics)", server.stdout)
        assert scrape is not None
        asyncio.run(talk(server.target))
        http_port = re.search(r"http listening on 127\.0\.0\.1:(\d+)", server.stdout)
        assert http_port is not None
        over_http(f"http://127.0.0.1:{http_port.group(1)}")
        tools = through_the_tools(server.target, tmp_path)
        spans = receiver.wait_for_spans(lambda s: s.name.startswith("chat.turn "), count=10)
        receiver.wait_for_metric("gen_ai.client.token.usage")
        with urllib.request.urlopen(scrape.group(1), timeout=10) as answer:
            scraped = answer.read().decode()
        server.send(signal.SIGTERM)
        assert server.wait() == 0
        exported = [
            json.dumps([s.name, s.attributes, s.events, s.status_message], default=str)
            for s in receiver.spans()
        ]
        points = [json.dumps(p.attributes) for p in receiver.metric_points()]
        authorization = model.requests[0].headers.get("authorization")
        headers = [json.dumps(dict(r.headers)).replace(API_KEY, "") for r in model.requests]

    assert authorization == f"Bearer {API_KEY}"  # the key did reach the model
    assert "agentskit_chat_turns_total" in scraped
    assert 'gen_ai_tool_name="lookup"' in scraped  # tool calls are counted by name
    assert any('"gen_ai.tool.name": "lookup"' in line for line in exported)
    assert all("traceparent" in line for line in headers)
    assert {s.attributes["agentskit.chat.definition.id"] for s in spans} >= {
        "assistant",
        "support",
        "code",
    }
    output = server.stdout + server.stderr
    assert '"event": "turn"' in output  # turn lines were logged
    assert "malformed request refused" in output  # and the undecodable request
    with sqlite3.connect(state / "sessions.db") as db:
        records = b"".join(
            row[0] for row in db.execute("SELECT CAST(record AS BLOB) FROM sessions")
        )
        stored = [row[0] for row in db.execute("SELECT content FROM messages")]
        kept_tools = [row[0] for row in db.execute("SELECT tools FROM messages")]
    db.close()
    assert records
    assert any(CANARY in content for content in stored)  # server-held history keeps its text
    assert any(CANARY in tools for tools in kept_tools)  # and its tool calls' arguments
    for secret in (CANARY, API_KEY):
        assert secret not in output
        assert secret not in tools
        assert not [line for line in exported if secret in line]
        assert not [line for line in points if secret in line]
        assert secret not in scraped
        assert not [line for line in headers if secret in line]
        assert secret.encode() not in records


def test_no_content_reaches_logs_or_records_on_postgresql(
    launch: Launcher, postgres: Cluster, tmp_path: Path
) -> None:
    name = f"canary_{secrets.token_hex(4)}"
    url = postgres.create_database(name)
    try:
        reply = Reply(chunks=("The answer ", f"mentions {CANARY}"))
        calls = ToolCalls((Call("lookup", json.dumps({"q": CANARY})),))
        with FakeModelServer(default=reply, answers={TOOL_ROUND: calls}) as model:
            server = launch(
                tmp_path / "state",
                "--definitions",
                str(definitions(tmp_path / "definitions", model.url)),
                "--definitions-module",
                CODE_CHAT,
                "--store",
                url,
                "--migrate",
                env={
                    "CANARY_MODEL_KEY": API_KEY,
                    "AGENTSKIT_CHAT_STORE_PASSWORD": postgres.password,
                    "AGENTSKIT_CHAT_DIGEST_KEY": "7b" * 32,
                },
                log_level="DEBUG",
            )
            asyncio.run(talk(server.target))
            server.send(signal.SIGTERM)
            assert server.wait() == 0
        with postgres.connect(name) as db:
            records = b"".join(row[0] for row in db.execute("SELECT record FROM sessions"))
            stored = [bytes(row[0]).decode() for row in db.execute("SELECT content FROM messages")]
    finally:
        postgres.drop_database(name)
    output = server.stdout + server.stderr
    assert '"event": "turn"' in output
    assert records
    assert any(CANARY in content for content in stored)  # server-held history keeps its text
    for secret in (CANARY, API_KEY, postgres.password):
        assert secret not in output
        assert secret.encode() not in records
