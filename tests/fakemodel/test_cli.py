"""`python -m agentskit_chat.fakemodel` as a child process."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx

import agentskit_chat
from agentskit_chat.fakemodel import DEFAULT_TEXT, split_text

REPO = Path(__file__).resolve().parents[2]
SOURCE = Path(agentskit_chat.__file__).resolve().parents[1]
"""Where the package under test is imported from: the child process runs the same code."""
LISTENING = re.compile(r"^fake model listening on (http://127\.0\.0\.1:\d+/v1)$")


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env["PYTHONPATH"] = os.pathsep.join([str(SOURCE), str(REPO)])
    return env


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentskit_chat.fakemodel", *args]


def test_the_command_serves_the_default_reply_until_sigterm() -> None:
    with subprocess.Popen(
        command("--listen", "127.0.0.1:0", "--chunks", "7", "--delay", "0"),
        cwd=REPO,
        env=base_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            found = LISTENING.match(process.stdout.readline().strip())
            assert found is not None
            body = {"model": "m", "messages": [], "stream": True}
            response = httpx.post(f"{found[1]}/chat/completions", json=body, timeout=30)
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    data = [
        json.loads(line[len("data: ") :])
        for line in response.text.split("\n\n")
        if line.startswith("data: {")
    ]
    pieces = [c["choices"][0]["delta"].get("content") for c in data]
    assert [p for p in pieces if p] == list(split_text(DEFAULT_TEXT, 7))


def test_the_command_refuses_bad_flags() -> None:
    for args in (["--chunks", "0"], ["--delay", "-1"], ["--listen", "nowhere"]):
        result = subprocess.run(
            command(*args), cwd=REPO, env=base_env(), capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 2
        assert "listening" not in result.stdout
