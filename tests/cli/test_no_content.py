"""No prompt content reaches the server's output or the stored session records."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentskit_chat_client import ChatClient, ChatError, Dispatch, HistoryMode, Message, Submit
from tests.cli.fixtures.serving import EXAMPLES, LISTENING, REPO, base_env

CANARY = "canary-5d1e-never-logged"


def test_debug_logs_and_session_records_hold_no_content(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "agentskit_chat.cli", "--log-level", "DEBUG", "serve"]
    argv += ["--listen", "127.0.0.1:0", "--state-dir", str(tmp_path)]
    argv += ["--definitions", str(EXAMPLES)]
    server = subprocess.Popen(
        argv, cwd=REPO, env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        first = ""
        while (found := LISTENING.search(first)) is None:
            line = server.stdout.readline().decode()
            assert line, first
            first += line
        asyncio.run(talk(f"127.0.0.1:{found.group(1)}"))
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0
    output = first.encode() + out + err
    assert CANARY.encode() not in output
    with sqlite3.connect(tmp_path / "sessions.db") as db:
        records = b"".join(
            row[0] for row in db.execute("SELECT CAST(record AS BLOB) FROM sessions")
        )
        stored = [row[0] for row in db.execute("SELECT content FROM messages")]
    db.close()
    assert records
    assert CANARY.encode() not in records
    assert any(CANARY in content for content in stored)  # server-held history keeps its text


async def talk(target: str) -> None:
    async with ChatClient(target, timeout=30) as client:
        held = (await client.create_session("support")).session_id
        await client.run_turn(held, Submit(f"tell me about {CANARY}"))  # agentic
        await client.run_turn(held, Submit("/start"))
        named = await client.run_turn(held, Submit(f"/name {CANARY}"))  # template with a group
        assert named.text == f"Welcome, {CANARY}."
        mine = await client.create_session("support", history_mode=HistoryMode.CLIENT)
        history = (Message("u1", "user", "/start"), Message("u2", "user", f"/x {CANARY}"))
        await client.run_turn(mine.session_id, Dispatch(history))
        refusals = [
            client.run_turn(held, Submit("x"), turn_id=f"bad {CANARY}"),
            client.run_turn(held, Submit("x", message_id=f"bad {CANARY}")),
            client.run_turn(held, Submit(CANARY * 5000)),
            client.get_session(f"{CANARY} no such session"),
        ]
        for refusal in refusals:
            with pytest.raises(ChatError) as refused:
                await refusal
            assert CANARY not in str(refused.value)
