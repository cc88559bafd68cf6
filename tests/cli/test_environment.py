"""`serve` settings from AGENTSKIT_CHAT_* environment variables."""

from __future__ import annotations

import asyncio
import signal
import stat
from pathlib import Path

from agentskit_chat_client import ChatClient, Retry, Submit, TurnCompleted, TurnDecision
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import EXAMPLES, Server, collect, terminal


def stop(server: Server) -> None:
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    assert "agentskit-chat stopped" in server.stdout


def test_state_dir_from_the_environment_holds_the_store_and_the_key(
    launch: Launcher, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {"AGENTSKIT_CHAT_STATE_DIR": str(state)}
    args = ("--definitions", str(EXAMPLES))
    first = launch(None, *args, env=env, cwd=workdir)
    assert f"store sqlite://{state / 'sessions.db'}" in first.stdout

    async def start_session(server: Server) -> str:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("support")
            done = terminal(await collect(client, session.session_id, Submit("/start")))
            assert isinstance(done, TurnCompleted)
            assert done.snapshot.state == "collecting"
            return session.session_id

    sid = asyncio.run(start_session(first))
    stop(first)
    assert (state / "sessions.db").is_file()
    key = state / "digest.key"
    assert key.is_file()
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert list(workdir.iterdir()) == []
    key_text = key.read_text()

    second = launch(None, *args, env=env, cwd=workdir)

    async def resume(server: Server) -> None:
        async with ChatClient(server.target, timeout=30) as client:
            loaded = await client.get_session(sid)
            assert loaded.session.snapshot.state == "collecting"
            assert [(m.role, m.content) for m in loaded.messages] == [
                ("user", "/start"),
                ("assistant", "What is your name?"),
            ]
            events = await collect(client, sid, Retry())
            decision = next(e for e in events if isinstance(e, TurnDecision))
            assert decision.replayed
            assert (decision.route_id, decision.from_state, decision.to_state) == (
                "start",
                "idle",
                "collecting",
            )

    asyncio.run(resume(second))
    stop(second)
    assert key.read_text() == key_text
    assert list(workdir.iterdir()) == []


def test_the_state_dir_flag_wins_over_the_environment(launch: Launcher, tmp_path: Path) -> None:
    from_env = tmp_path / "from-env"
    from_flag = tmp_path / "from-flag"
    server = launch(
        from_flag,
        "--definitions",
        str(EXAMPLES),
        env={"AGENTSKIT_CHAT_STATE_DIR": str(from_env)},
        cwd=tmp_path,
    )
    stop(server)
    assert (from_flag / "sessions.db").is_file()
    assert (from_flag / "digest.key").is_file()
    assert not from_env.exists()
