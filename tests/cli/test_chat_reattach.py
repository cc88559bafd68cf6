"""`agentskit-chat chat` in a pseudo-terminal keeps its answer through a dropped connection:
a TCP proxy between the chat and a live `serve` resets the connection mid-answer."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from tests.cli.conftest import Launcher
from tests.cli.test_chat import TIMEOUT, spawn, terminals  # noqa: F401 (the fixture)
from tests.client.tcp_proxy import TcpProxy, proxied

ANSWER = ("Before the cut, ", "after ", "the cut.")
BADGE = "[agentic | no route | open -> open]"


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def proxy(launch: Launcher, model: FakeModelServer, tmp_path: Path) -> Iterator[TcpProxy]:
    """A proxy in front of a `serve` whose `assistant` chat asks the fake model."""
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    (definitions / "assistant.yaml").write_text(
        "id: assistant\nrevision: 1\n"
        f"model: {{adapter: openai, base_url: '{model.url}', model: fake-1}}\n"
        "conversation:\n  initial: open\n  states: {open: {on: {hello: open}}}\n"
        "  routes: [{id: hello, command: /hello, event: hello, response: Hi.}]\n",
        encoding="utf-8",
    )
    server = launch(None, "--store", "memory://", "--definitions", str(definitions))
    with proxied(server.target) as running:
        yield running


def test_a_dropped_connection_mid_answer_reattaches_and_the_answer_shows_once(
    terminals: list[pexpect.spawn[str]],  # noqa: F811
    model: FakeModelServer,
    proxy: TcpProxy,
) -> None:
    child = spawn(terminals, "--target", proxy.target, "--definition", "assistant")
    screen = io.StringIO()
    child.logfile_read = screen
    child.expect_exact("buttons: /hello")
    model.enqueue(Reply(chunks=ANSWER, pause_after=1))
    child.sendline("tell me")
    child.expect_exact(ANSWER[0])  # on screen while the model holds the rest
    assert proxy.cut() >= 1  # the connection drops mid-answer
    model.resume()
    child.expect_exact(BADGE, timeout=TIMEOUT)
    shown = screen.getvalue()
    assert shown.count("".join(ANSWER)) == 1  # the answer whole, in one piece
    assert shown.count(ANSWER[0]) == 1  # nothing shown twice
    assert "error" not in shown
    child.sendline("/state")
    child.expect_exact("| 2 messages |")  # the turn committed once
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert proxy.accepted >= 2  # it came back over a new connection


def test_ctrl_c_still_cancels_a_turn_that_would_outlive_its_connection(
    terminals: list[pexpect.spawn[str]],  # noqa: F811
    model: FakeModelServer,
    proxy: TcpProxy,
) -> None:
    child = spawn(terminals, "--target", proxy.target, "--definition", "assistant")
    child.expect_exact("buttons: /hello")
    model.enqueue(Reply(chunks=("Begun ", "never shown"), pause_after=1))
    child.sendline("and then?")
    child.expect_exact("Begun ")
    child.sendintr()
    child.expect_exact("[cancelled: nothing was committed]")
    assert model.wait_disconnect(TIMEOUT)  # CancelTurn closed the model stream
    child.sendline("/state")
    child.expect_exact("| 0 messages |")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
