"""grpcurl through reflection against a live `serve`: the README's commands, as written."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

from tests.cli.conftest import Launcher
from tests.docs.pages import marked
from tests.tools.conftest import TOKEN, tool

README_TARGET = "127.0.0.1:50051"
"""Where the README's commands look for `make serve`; the tests substitute a live server."""
SESSION_PLACEHOLDER = "SESSION_ID"


def readme_commands() -> list[list[str]]:
    """The README's grpcurl block, one argv per line."""
    (block,) = (b for b in marked("commands") if b.name == "grpcurl")
    return [shlex.split(line) for line in block.code.splitlines() if line.strip()]


def json_objects(text: str) -> list[dict[str, Any]]:
    """grpcurl's output: JSON objects one after the other."""
    decoder = json.JSONDecoder()
    found, position = [], 0
    while position < len(text := text.strip()):
        value, position = decoder.raw_decode(text, position)
        found.append(value)
        while position < len(text) and text[position].isspace():
            position += 1
    return found


def replay(
    argv: list[str], target: str, session: str, tools: dict[str, Path], header: list[str]
) -> subprocess.CompletedProcess[str]:
    """One README line with the live target, the session id, and `header` after grpcurl."""
    binary, *args = argv
    args = [
        arg.replace(README_TARGET, target).replace(SESSION_PLACEHOLDER, session) for arg in args
    ]
    if binary == "grpcurl":
        args = [*header, *args]
    return tool(tools[binary], *args)


def walk_the_readme(
    target: str, tools: dict[str, Path], header: list[str]
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run every README line in order, the session CreateSession made going into the next
    ones; the results by the line's last word (`list`, `.../StreamTurn`...)."""
    results: dict[str, subprocess.CompletedProcess[str]] = {}
    session = SESSION_PLACEHOLDER
    for argv in readme_commands():
        done = replay(argv, target, session, tools, header)
        assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stdout}\n{done.stderr}"
        results[argv[-1]] = done
        if argv[-1].endswith("/CreateSession"):
            session = json_objects(done.stdout)[0]["session"]["session_id"]
    return results


def check_the_walk(results: dict[str, subprocess.CompletedProcess[str]]) -> None:
    assert set(results) >= {
        "list",
        "agentskit.chat.v1.ChatService",
        "agentskit.chat.v1.ChatService/CreateSession",
        "agentskit.chat.v1.ChatService/StreamTurn",
    }, results
    assert "status: SERVING" in "".join(r.stdout + r.stderr for r in results.values())
    services = results["list"].stdout.split()
    assert {"agentskit.chat.v1.ChatService", "grpc.health.v1.Health"} <= set(services)
    described = results["agentskit.chat.v1.ChatService"].stdout
    assert "agentskit.chat.v1.ChatService is a service:" in described
    for rpc in ("CreateSession", "GetSession", "StreamTurn", "GetTurn", "ListTurns"):
        assert f"rpc {rpc} (" in described
    assert (
        "rpc StreamTurn ( .agentskit.chat.v1.StreamTurnRequest )"
        " returns ( stream .agentskit.chat.v1.StreamTurnResponse )" in described
    )

    (created,) = json_objects(results["agentskit.chat.v1.ChatService/CreateSession"].stdout)
    session = created["session"]
    assert (session["definition_id"], session["snapshot"]["state"]) == ("support", "idle")
    events = json_objects(results["agentskit.chat.v1.ChatService/StreamTurn"].stdout)
    kinds = [
        next(k for k in ("started", "decision", "delta", "completed") if k in e) for e in events
    ]
    assert kinds == ["started", "decision", "delta", "completed"], events
    assert [e["sequence"] for e in events] == ["1", "2", "3", "4"]  # int64 as JSON strings
    assert {e["session_id"] for e in events} == {session["session_id"]}
    assert events[1]["decision"] == {
        "kind": "TURN_KIND_DETERMINISTIC",
        "route_id": "start",
        "from_state": "idle",
        "to_state": "collecting",
    }
    assert events[2]["delta"]["text"] == "What is your name?"
    assert events[3]["completed"]["content"] == "What is your name?"
    assert events[3]["completed"]["snapshot"]["state"] == "collecting"


def test_the_readme_commands_run_as_written(
    launch: Launcher, grpcurl: Path, health_probe: Path, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state")
    tools = {"grpcurl": grpcurl, "grpc-health-probe": health_probe}
    results = walk_the_readme(server.target, tools, [])
    check_the_walk(results)

    (stream_line,) = (a for a in readme_commands() if a[-1].endswith("/StreamTurn"))
    (created,) = json_objects(results["agentskit.chat.v1.ChatService/CreateSession"].stdout)
    again = replay(stream_line, server.target, created["session"]["session_id"], tools, [])
    events = json_objects(again.stdout)
    assert events[0]["started"]["duplicate"] is True  # the same turn id runs nothing again
    assert events[-1]["completed"]["content"] == "What is your name?"


def test_the_readme_commands_with_a_token(
    launch: Launcher, grpcurl: Path, health_probe: Path, tokens: Path, tmp_path: Path
) -> None:
    server = launch(tmp_path / "state", "--auth-tokens", str(tokens))
    refused = tool(grpcurl, "-plaintext", server.target, "list")
    assert refused.returncode != 0
    assert "Unauthenticated" in refused.stderr
    tools = {"grpcurl": grpcurl, "grpc-health-probe": health_probe}
    check_the_walk(walk_the_readme(server.target, tools, ["-H", f"authorization: Bearer {TOKEN}"]))
