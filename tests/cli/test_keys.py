"""`serve` on disk: the state directory, store and key it creates are owner-only whatever
the umask; an existing state directory or key file open to others is kept, with one warning
line each."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
from pathlib import Path

from agentskit_chat_client import ChatClient, Submit
from tests.cli.conftest import Launcher


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def one_turn(target: str) -> None:
    async def scenario() -> None:
        async with ChatClient(target, timeout=20) as client:
            sid = (await client.create_session("support")).session_id
            await client.run_turn(sid, Submit("/start"))

    asyncio.run(scenario())


def warnings(output: str) -> list[str]:
    return [line for line in output.splitlines() if "is open to" in line]


def test_under_umask_000_every_directory_made_is_0700_and_every_file_0600(
    launch: Launcher, tmp_path: Path
) -> None:
    state = tmp_path / "srv" / "chat" / "state"
    before = os.umask(0)
    try:
        server = launch(state)
    finally:
        os.umask(before)
    one_turn(server.target)
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    for directory in (tmp_path / "srv", tmp_path / "srv" / "chat", state):
        assert mode(directory) == 0o700, directory
    for name in ("sessions.db", "digest.key"):
        assert mode(state / name) == 0o600, name
    assert warnings(server.stdout + server.stderr) == []


def test_an_open_state_directory_and_key_are_kept_with_one_warning_each(
    launch: Launcher, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o755)
    key = state / "digest.key"
    key.write_text("ab" * 32 + "\n")
    key.chmod(0o644)
    server = launch(state)
    one_turn(server.target)
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    found = warnings(server.stdout + server.stderr)
    assert len(found) == 2, found
    assert any(f"directory {state} is open to others (mode 0755)" in w for w in found)
    assert any(f"the digest key file {key} is open to others (mode 0644)" in w for w in found)
    # One short line each, however long the temporary path it names (a test worker's is
    # longer): 240 characters besides the path.
    assert all(len(line.replace(str(state), "")) <= 240 for line in found), found
    assert "ab" * 32 not in server.stdout + server.stderr
    assert mode(state) == 0o755  # not ours to change: warned about, kept
    assert mode(key) == 0o644
    assert mode(state / "sessions.db") == 0o600


def test_a_given_key_file_open_to_others_is_named_in_one_warning(
    launch: Launcher, tmp_path: Path
) -> None:
    key = tmp_path / "mounted-key"
    key.write_text("cd" * 32 + "\n")
    key.chmod(0o604)
    server = launch(tmp_path / "state", "--digest-key-file", str(key))
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    found = warnings(server.stdout + server.stderr)
    assert len(found) == 1, found
    assert f"the digest key file {key} is open to others (mode 0604)" in found[0]
    assert "cd" * 32 not in server.stdout + server.stderr
    assert mode(key) == 0o604
