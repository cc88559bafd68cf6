"""`agentskit-chat chat` driven for real: in a pseudo-terminal (pexpect) and in a pipe,
against a live `serve` process."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from agentskit_chat.fakemodel import FakeModelServer, Reply
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import EXAMPLES, REPO, base_env, command

TIMEOUT = 30


@pytest.fixture
def terminals() -> Iterator[list[pexpect.spawn[str]]]:
    """Chat processes in pseudo-terminals; each is ended at the end of the test."""
    spawned: list[pexpect.spawn[str]] = []
    yield spawned
    for child in spawned:
        child.close(force=True)


def _default_sigint() -> None:
    """Ctrl-C must interrupt the chat even when the tests run with SIGINT ignored (`make test &`,
    nohup): a process inherits an ignored SIGINT, and Python then installs no handler for it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(
    terminals: list[pexpect.spawn[str]], *args: str, color: bool = False
) -> pexpect.spawn[str]:
    env = base_env({"TERM": "xterm"})
    if not color:
        env["NO_COLOR"] = "1"
    argv = command("chat", *args)
    child = pexpect.spawn(
        argv[0],
        argv[1:],
        cwd=str(REPO),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 220),
        preexec_fn=_default_sigint,
    )
    terminals.append(child)
    return child


def test_a_conversation_in_a_terminal(
    launch: Launcher, terminals: list[pexpect.spawn[str]]
) -> None:
    server = launch(None, "--store", "memory://")
    child = spawn(terminals, "--target", server.target, "--definition", "orders", color=True)
    child.expect(r"orders r1 \| session (\S+) \(new session\)")
    child.expect_exact("buttons: /return  /retrun  /help")
    child.expect_exact("> ")
    child.sendline("/retrun")
    child.expect_exact("Starting a return. Which order? Send /order followed by its number.")
    # The badge is coloured on a terminal.
    child.expect_exact("\x1b[36m[repaired | route begin-typo | browsing -> identifying]\x1b[0m")
    child.expect_exact(
        "state identifying | actions: enter_order_number, cancel | buttons: /cancel  /help"
    )
    child.sendline("/order 4242")
    child.expect_exact("Order 4242 found.")
    child.expect_exact("[deterministic | route order | identifying -> choosing_reason]")
    child.sendline("/retry")
    child.expect_exact("[deterministic | route order | identifying -> choosing_reason | replayed]")
    child.sendline("other")
    child.expect_exact("buttons: /confirm  /cancel")
    child.expect_exact("> ")
    child.send("/conf\t")  # Tab completes from the buttons of the current state
    child.expect_exact("irm")
    child.sendline("")
    child.expect_exact("Your return is registered.")
    child.expect_exact("[deterministic | route confirm | confirming -> completed]")
    child.sendline("/state")
    child.expect_exact("| 8 messages | cursor")
    child.expect_exact("allowed events: restart")
    child.sendline("/quit")
    child.expect(r"resume with: agentskit-chat chat --target \S+ --definition orders --session s-")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_lifecycle_commands_and_the_slash_escape(
    launch: Launcher, terminals: list[pexpect.spawn[str]]
) -> None:
    server = launch(None, "--store", "memory://")
    child = spawn(terminals, "--target", server.target, "--definition", "support")
    child.sendline("/start")
    child.expect_exact("[deterministic | route start | idle -> collecting]")
    child.sendline("/name Ada")
    child.expect_exact("[deterministic | route finish | collecting -> complete]")
    child.sendline("/edit /name Grace")
    child.expect_exact("Welcome, Grace.")
    child.expect_exact("[deterministic | route finish | collecting -> complete]")
    child.sendline("/regenerate")
    child.expect_exact("[deterministic | route finish | collecting -> complete | replayed]")
    child.sendline("/truncate")
    child.expect_exact("[truncated: 2 messages kept; the state follows on the next turn]")
    child.expect_exact("state complete")  # a truncation does not transition
    child.sendline("/truncate 9")
    child.expect_exact("the history holds 2 messages")
    child.sendline("//retry")  # sent to the chat as "/retry": no route matches it
    child.expect_exact("[agentic | no route | collecting -> collecting]")
    child.sendline("/edit")
    child.expect_exact("usage: /edit TEXT")
    child.sendline("/truncate 0")
    child.sendline("/regenerate")
    child.expect_exact("error: INVALID_ARGUMENT ERROR_REASON_INVALID_ARGUMENT")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_session_resumes_by_id(launch: Launcher, terminals: list[pexpect.spawn[str]]) -> None:
    server = launch(None, "--store", "memory://")
    first = spawn(
        terminals, "--target", server.target, "--definition", "support", "--session", "desk-7"
    )
    first.expect_exact("session desk-7 (new session)")
    first.sendline("/start")
    first.expect_exact("state collecting")
    first.sendline("/quit")
    first.expect(pexpect.EOF)
    again = spawn(
        terminals, "--target", server.target, "--definition", "support", "--session", "desk-7"
    )
    again.expect_exact("session desk-7 (resumed session, 2 messages)")
    again.expect_exact("you: /start")
    again.expect_exact(
        "assistant: What is your name? [deterministic | route start | idle -> collecting]"
    )
    again.expect_exact("state collecting | actions: cancel")
    again.sendline("/name Lin")
    again.expect_exact("Welcome, Lin.")
    other = spawn(
        terminals, "--target", server.target, "--definition", "orders", "--session", "desk-7"
    )
    other.expect_exact("error: session desk-7 runs 'support', not 'orders'")
    other.expect(pexpect.EOF)
    other.close()
    assert other.exitstatus == 1


def test_replies_stream_as_they_arrive_and_ctrl_c_cancels_the_turn(
    launch: Launcher, terminals: list[pexpect.spawn[str]], tmp_path: Path
) -> None:
    with FakeModelServer() as model:
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
        child = spawn(terminals, "--target", server.target, "--definition", "assistant")
        child.expect_exact("buttons: /hello")
        model.enqueue(Reply(chunks=("First part, ", "second part."), pause_after=1))
        child.sendline("tell me")
        child.expect_exact("First part, ")  # on screen while the model still holds the rest
        model.resume()
        child.expect_exact("second part.")
        child.expect_exact("[agentic | no route | open -> open]")
        model.enqueue(Reply(chunks=("Begun ", "never shown"), pause_after=1))
        child.sendline("and then?")
        child.expect_exact("Begun ")
        child.sendintr()
        child.expect_exact("[cancelled: nothing was committed]")
        assert model.wait_disconnect(TIMEOUT)
        child.sendline("/state")
        child.expect_exact("| 2 messages |")  # the cancelled turn left nothing behind
        child.sendline("/quit")
        child.expect(pexpect.EOF)


def transcript(text: str) -> str:
    return re.sub(r"s-[0-9a-f]+", "s-ID", re.sub(r"127\.0\.0\.1:\d+", "HOST:PORT", text))


def test_in_a_pipe_it_prints_plain_lines(launch: Launcher) -> None:
    server = launch(None, "--store", "memory://")
    done = subprocess.run(
        command("chat", "--target", server.target, "--definition", "support"),
        input="/start\n/name Ada\n/retry\nhello there\n",
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "\x1b" not in done.stdout
    assert transcript(done.stdout).splitlines() == [
        "support r1 | session s-ID (new session) | HOST:PORT",
        "local commands: /retry  /edit TEXT  /regenerate  /truncate [N]  /state  /quit; "
        "any other line goes to the chat (start it with // to send one of these names)",
        "state idle | actions: start | buttons: /start",
        "> /start",
        "What is your name?",
        "[deterministic | route start | idle -> collecting]",
        "state collecting | actions: cancel | buttons: none",
        "> /name Ada",
        "Welcome, Ada.",
        "[deterministic | route finish | collecting -> complete]",
        "state complete | actions: restart | buttons: none",
        "> /retry",
        "Welcome, Ada.",
        "[deterministic | route finish | collecting -> complete | replayed]",
        "state complete | actions: restart | buttons: none",
        "> hello there",
        "No language model is configured for this chat, so I can only answer its known commands.",
        "[agentic | no route | complete -> complete]",
        "state complete | actions: restart | buttons: none",
        "resume with: agentskit-chat chat --target HOST:PORT --definition support --session s-ID",
    ]


def test_without_a_target_it_hosts_the_definitions_itself() -> None:
    done = subprocess.run(
        command("chat", "--definition", "orders", "--definitions", str(EXAMPLES)),
        input="/return\n",
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "[deterministic | route begin | browsing -> identifying]" in done.stdout
    assert "resume with" not in done.stdout  # the private server keeps nothing


def test_an_unknown_definition_or_unreachable_server_exits_1() -> None:
    unknown = subprocess.run(
        command("chat", "--definition", "nope", "--definitions", str(EXAMPLES)),
        input="",
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert unknown.returncode == 1
    assert unknown.stdout.startswith("error: NOT_FOUND ERROR_REASON_DEFINITION_NOT_FOUND: ")
    assert unknown.stdout.splitlines()[-1] == (
        "the private server over --definitions offers: coffee r1, orders r1, support r1"
    )
    down = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentskit_chat.cli",
            "chat",
            "--target",
            "127.0.0.1:1",
            "--definition",
            "support",
        ],
        input="",
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert down.returncode == 1
    assert down.stdout.startswith("error: UNAVAILABLE")


def test_without_a_definition_a_terminal_is_offered_the_list(
    launch: Launcher, terminals: list[pexpect.spawn[str]]
) -> None:
    server = launch(None, "--store", "memory://")
    child = spawn(terminals, "--target", server.target)
    child.expect_exact(f"the server at {server.target} offers:")
    child.expect(r"1\. coffee r1 +Orders a coffee")
    child.expect(r"2\. orders r1 +Walks a customer through returning an order")
    child.expect(r"3\. support r1 +Collects a name")
    child.expect_exact("definition (1-3 or id): ")
    child.sendline("4")
    child.expect_exact("no definition '4' here; type a number or an id from the list")
    child.expect_exact("definition (1-3 or id): ")
    child.send("sup\t")  # Tab completes the offered ids
    child.expect_exact("port")
    child.sendline("")
    child.expect(r"support r1 \| session s-\S+ \(new session\)")
    child.expect_exact("> ")
    child.sendline("/quit")
    child.expect(r"resume with: agentskit-chat chat --target \S+ --definition support --session")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    by_number = spawn(terminals, "--target", server.target)
    by_number.expect_exact("definition (1-3 or id): ")
    by_number.sendline("2")
    by_number.expect(r"orders r1 \| session s-\S+ \(new session\)")
    by_number.expect_exact("> ")
    by_number.sendline("/quit")
    by_number.expect(pexpect.EOF)
    ended = spawn(terminals, "--target", server.target)
    ended.expect_exact("definition (1-3 or id): ")
    ended.sendeof()  # no choice: nothing is created
    ended.expect(pexpect.EOF)
    ended.close()
    assert ended.exitstatus == 2


def test_without_a_definition_a_pipe_gets_the_list_and_status_2(launch: Launcher) -> None:
    server = launch(None, "--store", "memory://")
    done = subprocess.run(
        command("chat", "--target", server.target),
        input="/start\n",
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""  # the input was not taken for a choice
    assert done.stderr.splitlines() == [
        f"chat: name the chat with --definition ID; the server at {server.target} offers:",
        "  1. coffee r1   Orders a coffee, showing a command, a phrase, a pattern, a repaired "
        "typo, help, and the model for anything else.",
        "  2. orders r1   Walks a customer through returning an order; typos and dead ends have "
        "routes too.",
        "  3. support r1  Collects a name with two known commands; everything else goes to the "
        "model.",
    ]
