"""`agentskit-chat demo` ends with an agentic turn streamed from the fake model server."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from agentskit_chat.cli._demo import FAKE_REPLY, demo

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "definitions"


def test_the_demo_streams_reloads_and_recovers_a_lost_stream(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert asyncio.run(demo(EXAMPLES)) == 0
    out = capsys.readouterr().out
    assert "failed:" not in out
    shown = " ".join(repr(chunk) for chunk in FAKE_REPLY.chunks)
    streamed = re.compile(
        r"session \S+ of 'assistant' starts in state 'chatting'; its model is the openai "
        r"adapter against the fake model server at http://127\.0\.0\.1:\d+/v1\n\n"
        r"> submit '/help'\n\s+kind deterministic\s+route help\s+chatting -> chatting\n.*\n\n"
        r"> submit 'What can you do\?' \(streamed from the model\)\n"
        r"\s+kind agentic\s+route -\s+chatting -> chatting\n"
        rf"\s+deltas: {re.escape(shown)}\n"
        rf"\s+response: {re.escape(FAKE_REPLY.text)}\n"
        r"\s+usage: \d+ input tokens, 8 output tokens\n"
        r"\s+the model received 4 messages"
    )
    assert streamed.search(out), out
    assert out.count("(streamed from the model)") == 2
    transcript = re.compile(
        r"> reload the transcript \(GetSession\): state 'complete', 6 messages\n"
        r"  user +/start\n"
        r"  assistant +\[deterministic start idle -> collecting\] What is your name\?\n"
        r"  user +/name Ada\n"
        r"  assistant +\[deterministic finish collecting -> complete, replayed\] Welcome, Ada\.\n"
        r"  user +Tell me a joke\n"
        r"  assistant +\[agentic - complete -> complete\] No language model"
    )
    assert transcript.search(out), out
    recovered = re.compile(
        r"GetTurn while the model streams: running\n"
        r".*GetTurn after the stream was lost: not found, so nothing was committed\n"
        r".*\n  GetTurn now: completed, kind agentic, 8 output tokens\n"
        r".*\(duplicate: True\)"
    )
    assert recovered.search(out), out
