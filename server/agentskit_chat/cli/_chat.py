"""`agentskit-chat chat`: talk to a chat from a terminal, through the Python client.

Replies stream as they arrive; after each turn a badge shows the turn's kind, route,
transition and whether it was replayed, then the state's actions and the commands the
chat offers in it (routes whose `input_text` is eligible now). A few lines are handled
locally (`/retry`, `/edit TEXT`, `/regenerate`, `/truncate [N]`, `/state`, `/quit`); every
other line goes to the chat, and `//` sends a line starting with one `/` as it is.

Without `--target`, a server on a free loopback port hosts `--definitions` (memory store,
the definitions' own model adapters) for the length of the conversation.

Without `--definition`, the definitions the server offers are listed (id, revision,
description): on a terminal `chat` asks which one to talk to; in a pipe, where input is the
conversation, it prints the list and exits 2. An unknown `--definition` lists them too.

On a terminal, input has line editing and history, and Tab completes the offered
commands (the standard library's readline; nothing else earns a dependency here). In a
pipe, each input line is echoed after `> ` so the output reads as a transcript.

`--tools FILE` declares tools for the model; the person at the terminal runs them (see
`_chat_tools`): each call is shown, approvals are asked y/n, results are typed in.

Turns run with `on_disconnect` continue: a connection that drops mid-answer does not lose
the turn. The client reattaches by itself (WatchTurn from the last event shown), so the
answer goes on where it stopped and shows once. Ctrl-C during a turn cancels it with
CancelTurn, so nothing is committed.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import secrets
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from agentskit_chat.conversation import ConfigError
from agentskit_chat.models import AdapterRegistry
from agentskit_chat.service import Catalog, ChatService
from agentskit_chat.storage import MemoryStore
from agentskit_chat.transport import RunningServer, start_server
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    Definition,
    DisconnectMode,
    Edit,
    Regenerate,
    Retry,
    RouteInfo,
    SessionHistory,
    Snapshot,
    Submit,
    TextDelta,
    ToolDeclaration,
    TurnCompleted,
    TurnDecision,
    TurnFailed,
    TurnOperation,
    TurnStarted,
    command_hints,
    new_turn_id,
)

from ._chat_tools import Ask, answers, call_line, load_tools
from ._chat_view import (
    HELP,
    LOCAL_COMMANDS,
    View,
    badge,
    definition_lines,
    history_lines,
    state_line,
)
from ._connection import add_connection_arguments, client_options
from ._definitions import gather

T = TypeVar("T")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `chat`."""
    parser.add_argument(
        "--target", metavar="HOST:PORT", help="a live server [a private one over --definitions]"
    )
    parser.add_argument(
        "--definition",
        metavar="ID",
        help="the chat to talk to [asked on a terminal; in a pipe, the offered ones are listed]",
    )
    parser.add_argument(
        "--session", metavar="ID", help="resume this session (created with this id if new)"
    )
    parser.add_argument(
        "--definitions",
        type=Path,
        default=Path("examples/definitions"),
        metavar="DIR",
        help="without --target: the definitions to host [%(default)s]",
    )
    parser.add_argument(
        "--definitions-module",
        action="append",
        default=[],
        metavar="MODULE",
        help="without --target: also host the chats a Python module defines; repeatable",
    )
    parser.add_argument(
        "--tools",
        type=Path,
        metavar="FILE",
        help="declare these tools (a JSON or YAML list of name, description, parameters) on "
        "every turn; you run them: results are typed in, approvals asked y/n",
    )
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Talk until /quit or the end of the input; 130 when interrupted while starting."""
    try:
        return _talk(args)
    except KeyboardInterrupt:
        return 130


def _talk(args: argparse.Namespace) -> int:
    view = View.for_stream(sys.stdout)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    try:
        tools = () if args.tools is None else load_tools(args.tools)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    with _Loop() as loop:
        try:
            connection = loop.run(_connect(args))
        except (ConfigError, ValueError) as exc:
            print(exc, file=sys.stderr)
            return 2
        try:
            ask = input if interactive else _piped(view)
            conversation = _Conversation(loop, connection, view, tools, ask)
            chosen = args.definition or conversation.choose(interactive)
            if chosen is None:
                return 2 if conversation.offered else 1
            status = conversation.open(chosen, args.session)
            if status == 0:
                _Repl(conversation, view, interactive).run()
        finally:
            loop.run(connection.close())
    return status


@dataclass
class _Connection:
    client: ChatClient
    target: str
    server: RunningServer | None = None
    """The private server, when there is no --target; its sessions end with it."""

    async def close(self) -> None:
        await self.client.close()
        if self.server is not None:
            await self.server.drain(1.0)


async def _connect(args: argparse.Namespace) -> _Connection:
    if args.target:
        options = client_options(args)
        client = ChatClient(args.target, timeout=None, tls=options.tls, token=options.token)
        return _Connection(client, args.target)
    adapters = AdapterRegistry()
    hosted = gather(args.definitions, args.definitions_module, adapters)
    service = ChatService(
        Catalog(hosted), MemoryStore(), digest_key=secrets.token_bytes(32), adapters=adapters
    )
    server = await start_server(service, "127.0.0.1:0")
    target = f"127.0.0.1:{server.port}"
    return _Connection(ChatClient(target), target, server)


class _Loop:
    """An event loop on its own thread: the terminal blocks on input, gRPC never waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="chat-io", daemon=True)

    def __enter__(self) -> _Loop:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop; Ctrl-C cancels it and is raised here."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            concurrent.futures.wait([future], timeout=5)
            raise


class _Conversation:
    """One session: turns, local commands and what to show after each."""

    def __init__(
        self,
        loop: _Loop,
        connection: _Connection,
        view: View,
        tools: Sequence[ToolDeclaration] = (),
        ask: Ask = input,
    ) -> None:
        self.loop = loop
        self.tools = tuple(tools)
        self.ask = ask
        self.client = connection.client
        self.target = connection.target
        self.private = connection.server is not None
        self.view = view
        self.session_id = ""
        self.definition_id = ""
        self.routes: Sequence[RouteInfo] = ()
        self.snapshot = Snapshot(state="")
        self.offered: Sequence[Definition] = ()
        self.host = (
            "the private server over --definitions"
            if self.private
            else f"the server at {self.target}"
        )

    @property
    def buttons(self) -> list[str]:
        """The commands the chat offers in the current state."""
        return command_hints(self.routes, self.snapshot)

    def choose(self, interactive: bool) -> str | None:
        """The definition to talk to when none was named: listed, then asked on a terminal;
        None after printing why not (`offered` is then what the server offers)."""
        try:
            self.offered = self.loop.run(self.client.list_definitions(timeout=30))
        except ChatError as exc:
            self.view.line(f"error: {exc}", "error")
            return None
        if not self.offered:
            self.view.line(f"error: {self.host} offers no definitions", "error")
            return None
        if not interactive:
            print(
                f"chat: name the chat with --definition ID; {self.host} offers:",
                *definition_lines(self.offered),
                sep="\n",
                file=sys.stderr,
            )
            return None
        self.view.line(f"{self.host} offers:")
        for line in definition_lines(self.offered):
            self.view.line(line)
        return _ask(self.offered)

    def open(self, definition_id: str, session_id: str | None) -> int:
        """Resume or start the session; 0, or 1 with the reason printed."""
        try:
            return self.loop.run(self._open(definition_id, session_id))
        except ChatError as exc:
            self.view.line(f"error: {exc}", "error")
            if exc.code == grpc.StatusCode.NOT_FOUND and not self.offered:
                self._list_offered()
            return 1

    def _list_offered(self) -> None:
        """After an unknown definition: what the server offers, when it says."""
        try:
            self.offered = self.loop.run(self.client.list_definitions(timeout=30))
        except ChatError:
            return
        offered = ", ".join(f"{d.id} r{d.revision}" for d in self.offered) or "none"
        self.view.line(f"{self.host} offers: {offered}", "error")

    async def _open(self, definition_id: str, session_id: str | None) -> int:
        definition = await self.client.get_definition(definition_id, timeout=30)
        self.definition_id = definition.id
        self.routes = tuple(definition.routes)
        resumed = await self._resume(session_id) if session_id else None
        if resumed is None:
            session = await self.client.create_session(definition_id, session_id=session_id)
            self.session_id, self.snapshot = session.session_id, session.snapshot
            how = "new session"
        elif resumed.session.definition_id != definition_id:
            self.view.line(
                f"error: session {session_id} runs {resumed.session.definition_id!r}, "
                f"not {definition_id!r}",
                "error",
            )
            return 1
        else:
            self.session_id, self.snapshot = resumed.session.session_id, resumed.session.snapshot
            how = f"resumed session, {len(resumed.messages)} messages"
        self.view.line(
            f"{definition.id} r{definition.revision} | session {self.session_id} ({how}) | "
            f"{self.target}"
        )
        if resumed is not None:
            for line in history_lines(resumed.messages):
                self.view.line(line, "state")
        self.view.line(HELP, "state")
        self.show_state()
        return 0

    async def _resume(self, session_id: str) -> SessionHistory | None:
        try:
            return await self.client.get_session(session_id)
        except ChatError as exc:
            if exc.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def show_state(self) -> None:
        """The state line."""
        self.view.line(state_line(self.snapshot, self.buttons), "state")

    def turn(self, operation: TurnOperation) -> None:
        """Run one turn, streaming its text; then the badge and the state line. An answer
        waiting for tools asks for their results and approvals, and goes on with them."""
        next_operation: TurnOperation | None = operation
        while next_operation is not None:
            next_operation = self._one_turn(next_operation)

    def _one_turn(self, operation: TurnOperation) -> TurnOperation | None:
        turn_id = new_turn_id()
        try:
            completed = self.loop.run(self._turn(operation, turn_id))
        except KeyboardInterrupt:
            self._cancel(turn_id)
            self.view.line()
            self.view.line("[cancelled: nothing was committed]", "error")
            return None
        except ChatError as exc:
            self.view.line(f"error: {exc}", "error")
            return None
        if completed is None or not completed.pending_tool_calls:
            return None
        try:
            return answers(completed.pending_tool_calls, completed.tool_calls, self.ask)
        except (EOFError, KeyboardInterrupt):
            self.view.line()
            self.view.line("[the tool calls were left unanswered]", "error")
            return None

    def _cancel(self, turn_id: str) -> None:
        """Stop the turn the stream left: it continues on disconnect, so closing the stream
        alone would leave it running."""
        # Not running any more, or the server is out of reach: nothing to stop.
        with contextlib.suppress(ChatError, KeyboardInterrupt):
            self.loop.run(self.client.cancel_turn(self.session_id, turn_id, timeout=10))

    async def _turn(self, operation: TurnOperation, turn_id: str) -> TurnCompleted | None:
        decision: TurnDecision | None = None
        completed: TurnCompleted | None = None
        streamed = False
        stream = self.client.stream_turn(
            self.session_id,
            operation,
            turn_id=turn_id,
            on_disconnect=DisconnectMode.CONTINUE,
            tools=self.tools or None,
        )
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                if isinstance(event, TurnStarted) and event.duplicate and streamed:
                    # A reattach long after the cut: the server repeats the recorded answer
                    # whole instead of the missed pieces, so it is shown again in full.
                    self.view.line()
                    self.view.line("[reconnected: the whole answer follows]", "state")
                    streamed = False
                elif isinstance(event, TurnDecision):
                    decision = event
                elif isinstance(event, TextDelta):
                    self.view.piece(event.text)
                    streamed = True
                elif isinstance(event, TurnCompleted):
                    completed = event
                    if not streamed and event.content:
                        self.view.piece(event.content)  # a duplicate turn id repeats it whole
                    self.view.line()
                    for call in event.tool_calls:
                        self.view.line(call_line(call), "state")
                    self.snapshot = event.snapshot
                    self.view.line(badge(decision), "badge")
                elif isinstance(event, TurnFailed):
                    if streamed:
                        self.view.line()
                    self.view.line(f"{event.message}", "error")
                    self.view.line(badge(decision, failed=event.code), "error")
        self.show_state()
        return completed

    def local(self, command: str, argument: str) -> bool:
        """Run a local command; False on /quit."""
        try:
            if command == "/quit":
                return False
            if command == "/state":
                self._state()
            elif command == "/retry":
                self.turn(Retry())
            elif command == "/regenerate":
                self.turn(Regenerate())
            elif command == "/edit":
                self._edit(argument)
            elif command == "/truncate":
                self._truncate(argument)
        except ChatError as exc:
            self.view.line(f"error: {exc}", "error")
        return True

    def _state(self) -> None:
        history = self.loop.run(self.client.get_session(self.session_id))
        self.snapshot = history.session.snapshot
        events = ", ".join(self.snapshot.allowed_events) or "none"
        self.view.line(
            f"session {self.session_id} | {len(history.messages)} messages | "
            f"cursor {history.session.cursor} | allowed events: {events}",
            "state",
        )
        self.show_state()

    def _edit(self, text: str) -> None:
        if not text:
            self.view.line("usage: /edit TEXT (replaces your last message)", "error")
            return
        history = self.loop.run(self.client.get_session(self.session_id))
        users = [m.id for m in history.messages if m.role == "user"]
        if not users:
            self.view.line("nothing to edit yet", "error")
            return
        self.turn(Edit(users[-1], text))

    def _truncate(self, argument: str) -> None:
        if argument and not argument.isdigit():
            self.view.line("usage: /truncate [N] (keep the first N messages)", "error")
            return
        messages = self.loop.run(self.client.get_session(self.session_id)).messages
        if argument:
            keep = int(argument)
        else:  # drop the last exchange: the last user message and what followed it
            users = [i for i, m in enumerate(messages) if m.role == "user"]
            keep = users[-1] if users else 0
        if keep > len(messages):
            self.view.line(f"the history holds {len(messages)} messages", "error")
            return
        last_kept = messages[keep - 1].id if keep else None
        truncated = self.loop.run(self.client.truncate_history(self.session_id, last_kept))
        self.snapshot = truncated.session.snapshot
        self.view.line(
            f"[truncated: {len(truncated.messages)} messages kept; "
            "the state follows on the next turn]",
            "badge",
        )
        self.show_state()


class _Repl:
    """Reads lines until /quit or the end of the input."""

    def __init__(self, conversation: _Conversation, view: View, interactive: bool) -> None:
        self.conversation = conversation
        self.view = view
        self.interactive = interactive
        self.read: Callable[[], str] = self._read_tty if interactive else self._read_pipe
        if interactive:
            _completion(lambda: [*LOCAL_COMMANDS, *conversation.buttons])

    def run(self) -> None:
        """The loop; then how to resume the session, when a server keeps it."""
        while True:
            try:
                line = self.read()
            except EOFError:
                break
            except KeyboardInterrupt:  # at the prompt: a fresh line, as shells do
                self.view.line()
                continue
            if not self.handle(line.strip()):
                break
        conversation = self.conversation
        if conversation.private:
            return
        self.view.line(
            f"resume with: agentskit-chat chat --target {conversation.target} "
            f"--definition {conversation.definition_id} --session {conversation.session_id}",
            "state",
        )

    def handle(self, line: str) -> bool:
        """Act on one line; False to stop."""
        if not line:
            return True
        if line.startswith("//"):
            self.conversation.turn(Submit(line[1:]))
            return True
        command, _, argument = line.partition(" ")
        if command in LOCAL_COMMANDS:
            return self.conversation.local(command, argument.strip())
        self.conversation.turn(Submit(line))
        return True

    def _read_tty(self) -> str:
        return input("> ")

    def _read_pipe(self) -> str:
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        self.view.line(f"> {line.rstrip()}", "you")
        return line


def _piped(view: View) -> Ask:
    """Answers read from the piped input, echoed after their prompt as a transcript."""

    def ask(prompt: str) -> str:
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        view.line(f"{prompt}{line.rstrip()}", "you")
        return line

    return ask


def _ask(offered: Sequence[Definition]) -> str | None:
    """Ask on the terminal until a number from the list or an offered id is typed; None at
    the end of input."""
    ids = [d.id for d in offered]
    _completion(lambda: ids)
    while True:
        try:
            answer = input(f"definition (1-{len(ids)} or id): ").strip()
        except EOFError:
            print()
            return None
        if answer in ids:
            return answer
        if answer.isdigit() and 1 <= int(answer) <= len(ids):
            return ids[int(answer) - 1]
        if answer:
            print(f"no definition {answer!r} here; type a number or an id from the list")


def _completion(candidates: Callable[[], Sequence[str]]) -> None:
    """Tab completes the whole line from `candidates` (readline, where Python has it)."""
    try:
        import readline
    except ImportError:  # pragma: no cover - a Python built without readline
        return
    matches: list[str] = []

    def complete(text: str, state: int) -> str | None:
        if state == 0:
            matches[:] = [c for c in candidates() if c.startswith(text)]
        return matches[state] if state < len(matches) else None

    readline.set_completer_delims("")
    readline.set_completer(complete)
    readline.parse_and_bind("tab: complete")
