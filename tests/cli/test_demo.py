"""`demo` uses the server at --target when its health check answers SERVING, else its own."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentskit_chat.fakemodel import DEFAULT_TEXT
from agentskit_chat_client import ChatClient
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import run_cli, slow_args
from tests.cli.test_security import TOKEN, write_tokens

OWN_SERVER = re.compile(r"^server listening on 127\.0\.0\.1:\d+ \(definitions from ", re.M)
SCRIPT_END = "> submit '/help'\n  kind fallback      route help     identifying -> identifying\n"
DELEGATED = re.compile(
    r"the 'assistant' chat streams from the fake model server at http://127\.0\.0\.1:\d+/v1, "
    r"which only a server of the demo's own knows: it listens on 127\.0\.0\.1:\d+ "
)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port held without listening: connections to it are refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def sessions(out: str) -> dict[str, str]:
    """The session ids the demo printed, by chat."""
    return {chat: sid for sid, chat in re.findall(r"^session (\S+) of '(\w+)'", out, re.M)}


async def stored(target: str, session_id: str, token: str | None = None) -> tuple[str, int]:
    async with ChatClient(target, token=token, timeout=30) as client:
        history = await client.get_session(session_id)
    return history.session.snapshot.state, len(history.messages)


def assert_walked(out: str) -> None:
    """The scripted part and the streamed model part both ran, without a failed turn."""
    assert SCRIPT_END in out
    assert f"response: {DEFAULT_TEXT}" in out  # streamed from the fake model
    assert out.count("(streamed from the model)") == 2
    assert "(duplicate: True)" in out
    assert "failed:" not in out


def test_the_demo_walks_through_a_running_server(launch: Launcher, tmp_path: Path) -> None:
    server = launch(tmp_path / "state")
    result = run_cli("demo", "--target", server.target)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.startswith(f"using the server at {server.target} (its health check answers SERVING)")
    assert OWN_SERVER.search(out) is None
    assert DELEGATED.search(out), out
    assert_walked(out)
    printed = sessions(out)
    assert asyncio.run(stored(server.target, printed["support"])) == ("collecting", 4)
    assert asyncio.run(stored(server.target, printed["orders"])) == ("identifying", 4)


def test_the_demo_starts_its_own_server_when_none_answers(closed_port: int) -> None:
    target = f"127.0.0.1:{closed_port}"
    result = run_cli("demo", "--target", target)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.startswith(
        f"no server answers SERVING at {target} (UNAVAILABLE): start one with `make serve` to "
        "use it; the demo starts a server of its own on a free port\n"
    )
    assert OWN_SERVER.search(out), out
    assert_walked(out)


def test_a_server_without_the_example_chats_is_not_used(launch: Launcher, tmp_path: Path) -> None:
    server = launch(tmp_path / "state", *slow_args())
    result = run_cli("demo", "--target", server.target)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(
        f"the server at {server.target} answers SERVING but does not host 'support' or "
        "'orders': the demo starts a server of its own"
    )
    assert OWN_SERVER.search(result.stdout)
    assert_walked(result.stdout)


def test_the_demo_sends_a_token_from_the_environment_or_a_file(
    launch: Launcher, tmp_path: Path
) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", TOKEN)
    server = launch(tmp_path / "state", "--auth-tokens", str(tokens))
    refused = run_cli("demo", "--target", server.target)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        f"the server at {server.target} refused the demo: UNAUTHENTICATED "
        "ERROR_REASON_UNAUTHENTICATED"
    )
    assert "pass its token with --token-file or AGENTSKIT_CHAT_TOKEN" in refused.stderr
    assert "session " not in refused.stdout

    from_env = run_cli("demo", "--target", server.target, env={"AGENTSKIT_CHAT_TOKEN": TOKEN})
    assert from_env.returncode == 0, from_env.stdout + from_env.stderr
    assert from_env.stdout.startswith(f"using the server at {server.target}")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    from_file = run_cli("demo", "--target", server.target, "--token-file", str(token_file))
    assert from_file.returncode == 0, from_file.stdout + from_file.stderr
    assert_walked(from_file.stdout)
    support = sessions(from_file.stdout)["support"]
    assert asyncio.run(stored(server.target, support, TOKEN)) == ("collecting", 4)
    for result in (refused, from_env, from_file):
        assert TOKEN not in result.stdout + result.stderr
    missing = run_cli("demo", "--target", server.target, "--token-file", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert "token file" in missing.stderr


def test_own_server_skips_the_running_one(launch: Launcher, tmp_path: Path) -> None:
    server = launch(tmp_path / "state")
    result = run_cli("demo", "--target", server.target, "--own-server")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("server listening on 127.0.0.1:")
    assert server.target not in result.stdout
    assert_walked(result.stdout)
