"""Clients that run continued turns one after another through a proxy, and what they saw.

Each client has a session and a channel of its own, and runs turns in a loop until told to
stop, through `ChatClient.stream_turn(on_disconnect=CONTINUE)`, whose automatic reattach
hides broken streams. A turn that ends `interrupted` (its server died) runs again under the
same turn id. A call a stopping replica cancelled before it began (gRPC cancels calls its
application had not taken yet) is sent again by the client itself. Every call of a turn
carries the turn id as metadata (`TURN_HEADER`), so the proxy's access log tells which
replica served which call. `ReattachClock` times every
WatchTurn from the moment it is sent to its first event.

`problems()` checks the runs against the sessions' histories: the answer to what a test or
the soak asserts.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import grpc

from agentskit.chat.v1 import chat_pb2
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    DisconnectMode,
    SessionHistory,
    Submit,
    TextDelta,
    TurnCompleted,
    TurnEvent,
    TurnFailed,
)
from tests.deploy.nginx import TURN_HEADER

WATCH_TURN: Final = "/agentskit.chat.v1.ChatService/WatchTurn"
INTERRUPTED: Final = "interrupted"
TURN_SECONDS: Final = 60.0
"""Deadline of one turn's stream, reattaches included."""


@dataclass(slots=True)
class Reattach:
    """One WatchTurn call: when it was sent and when (and what) its first event arrived."""

    turn_id: str
    sent: float
    """time.monotonic() when the call was made."""
    sent_at: float
    """time.time() when the call was made, to compare with the events' times."""
    first: float | None = None
    first_sequence: int = 0
    first_terminal: bool = False
    first_failed: bool = False
    error: str | None = None

    @property
    def latency(self) -> float | None:
        return None if self.first is None else self.first - self.sent


class ReattachClock(grpc.aio.UnaryStreamClientInterceptor):
    """Records every WatchTurn call the client makes (its own reattaches included)."""

    def __init__(self) -> None:
        self.reattaches: list[Reattach] = []

    async def intercept_unary_stream(
        self,
        continuation: Callable[[Any, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        method = client_call_details.method
        name = method.decode() if isinstance(method, bytes) else str(method)
        sent, sent_at = time.monotonic(), time.time()
        call = await continuation(client_call_details, request)
        if name != WATCH_TURN:
            return call
        record = Reattach(request.turn_id, sent, sent_at)
        self.reattaches.append(record)
        return self._timed(call, record)

    @staticmethod
    async def _timed(
        call: AsyncIterator[chat_pb2.StreamTurnResponse], record: Reattach
    ) -> AsyncIterator[chat_pb2.StreamTurnResponse]:
        try:
            async for response in call:
                if record.first is None:
                    record.first = time.monotonic()
                    record.first_sequence = response.sequence
                    kind = response.WhichOneof("event")
                    record.first_terminal = kind in ("completed", "failed")
                    record.first_failed = kind == "failed"
                yield response
        except grpc.aio.AioRpcError as error:
            record.error = error.code().name
            raise


@dataclass(slots=True)
class TurnRun:
    """One run of one turn id by one client: every event it got, or the error it ended with."""

    client: int
    turn_id: str
    message_id: str
    rerun: bool
    started: float
    """time.time() when the stream was opened (comparable to the proxy's log)."""
    events: list[TurnEvent] = field(default_factory=list)
    received: list[float] = field(default_factory=list)
    """time.monotonic() when each event arrived."""
    error: ChatError | None = None
    ended: float = 0.0

    @property
    def terminal(self) -> TurnEvent | None:
        return self.events[-1] if self.events else None

    @property
    def completed(self) -> TurnCompleted | None:
        last = self.terminal
        return last if isinstance(last, TurnCompleted) else None

    @property
    def interrupted(self) -> bool:
        last = self.terminal
        return isinstance(last, TurnFailed) and last.code == INTERRUPTED


@dataclass(slots=True)
class LoadClient:
    """One client of the load: its session, channel and runs."""

    index: int
    target: str
    session_id: str = ""
    clock: ReattachClock = field(default_factory=ReattachClock)
    runs: list[TurnRun] = field(default_factory=list)

    async def run(self, definition: str, stop: asyncio.Event, max_turns: int = 1000) -> None:
        """Run turns until `stop` is set (finishing the one in flight) or `max_turns`."""
        channel = grpc.aio.insecure_channel(self.target, interceptors=[self.clock])
        async with ChatClient(channel, timeout=TURN_SECONDS) as client:
            self.session_id = (await client.create_session(definition)).session_id
            for number in range(max_turns):
                if stop.is_set():
                    break
                turn_id = f"c{self.index}-t{number}"
                run = await self._turn(client, turn_id, rerun=False)
                if run.interrupted:  # its server died: the id may run again
                    await self._turn(client, turn_id, rerun=True)
            await channel.close()

    async def _turn(self, client: ChatClient, turn_id: str, rerun: bool) -> TurnRun:
        message_id = f"m-{turn_id}"
        run = TurnRun(self.index, turn_id, message_id, rerun, time.time())
        self.runs.append(run)
        try:
            async for event in client.stream_turn(
                self.session_id,
                Submit(f"client {self.index} turn {turn_id}", message_id=message_id),
                turn_id=turn_id,
                on_disconnect=DisconnectMode.CONTINUE,
                metadata=((TURN_HEADER, turn_id),),
            ):
                run.events.append(event)
                run.received.append(time.monotonic())
        except ChatError as error:
            run.error = error
        run.ended = time.time()
        return run


async def histories(target: str, clients: Sequence[LoadClient]) -> dict[str, SessionHistory]:
    """Every client's session as the service has it now."""
    async with ChatClient(target, timeout=30) as reader:
        return {c.session_id: await reader.get_session(c.session_id) for c in clients}


def problems(
    clients: Sequence[LoadClient], stored: dict[str, SessionHistory], answer: str
) -> list[str]:
    """What went wrong, one line each; empty when every run and history is as it must be.

    Every run ended with its terminal event, its events numbered 1, 2, ... without a gap or
    a repeat, its deltas adding up to `answer` when it completed (so no delta was lost or
    doubled across reattaches); it either completed or was interrupted, and an interrupted
    run ran again and completed. Every completed turn is in its session's history exactly
    once (its user message and answer), and nothing else is.
    """
    found: list[str] = []
    for client in clients:
        completed: dict[str, TurnCompleted] = {}
        for run in client.runs:
            name = f"{run.turn_id}{' (again)' if run.rerun else ''}"
            if run.error is not None:
                found.append(f"{name}: ended with {run.error.code.name} {run.error.reason}")
                continue
            sequences = [event.sequence for event in run.events]
            if sequences != list(range(1, len(sequences) + 1)):
                found.append(f"{name}: sequences {sequences}")
            if not any(isinstance(e, TurnCompleted | TurnFailed) for e in run.events[-1:]):
                found.append(f"{name}: no terminal event")
            terminals = [e for e in run.events if isinstance(e, TurnCompleted | TurnFailed)]
            if len(terminals) > 1:
                found.append(f"{name}: {len(terminals)} terminal events")
            if (done := run.completed) is not None:
                text = "".join(e.text for e in run.events if isinstance(e, TextDelta))
                if text != answer or done.content != answer:
                    found.append(f"{name}: {_differs(text, done.content, answer)}")
                if run.turn_id in completed:
                    found.append(f"{name}: completed twice")
                completed[run.turn_id] = done
            elif run.interrupted:
                failed = run.terminal
                assert isinstance(failed, TurnFailed)
                if not failed.retryable:
                    found.append(f"{name}: interrupted but not retryable")
                if run.rerun:
                    found.append(f"{name}: interrupted again")
            else:
                found.append(f"{name}: ended with {run.terminal!r}")
        for run in client.runs:
            if run.interrupted and run.turn_id not in completed:
                found.append(f"{run.turn_id}: interrupted and never completed again")
        history = stored[client.session_id].messages
        users = [m.id for m in history if m.role == "user"]
        answers = {m.id: m.content for m in history if m.role == "assistant"}
        expected = [f"m-{turn_id}" for turn_id in completed]
        if sorted(users) != sorted(expected):
            found.append(f"client {client.index}: user messages {users}, expected {expected}")
        for turn_id, done in completed.items():
            if answers.get(done.assistant_message_id) != done.content:
                found.append(f"{turn_id}: the answer is not in the history")
        if len(answers) != len(completed):
            found.append(f"client {client.index}: {len(answers)} answers, {len(completed)} turns")
    return found


def _differs(deltas: str, content: str, answer: str) -> str:
    """Where the deltas and the completed content part from the model's answer."""

    def where(text: str) -> str:
        if text == answer:
            return "as the model's"
        at = next((n for n, (a, b) in enumerate(zip(text, answer, strict=False)) if a != b), None)
        at = min(len(text), len(answer)) if at is None else at
        return f"{len(text)} characters of {len(answer)}, apart from {at}: {text[at : at + 24]!r}"

    return f"deltas {where(deltas)}; completed content {where(content)}"


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of `values` (not empty)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]
