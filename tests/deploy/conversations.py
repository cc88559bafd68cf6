"""Conversations that take turns in a loop through a proxy while a chat's revisions roll
out, and what each of them saw.

The chat is the help desk of docs/how-to/revisions.md (its files, read from the page):
`/open` moves `idle` to `collecting` (renamed `describing` in revision 2), a message the
routes do not know goes to the model and stays there, `/submit` moves on to `filed`
(through the route `submit`, renamed `file` in revision 2, which answers differently) and
`/new` goes back to `idle`. Each conversation sends those, with a message for the model
after `/open` and another after `/submit`, in a cycle, so the state after every turn
follows from the messages sent, and the answer or the state's name says which revision ran
the turn (in `idle` and `filed` only `/submit`'s answer tells).

A turn refused with ABORTED or UNAVAILABLE (a draining replica refuses new turns) is sent
again under the same turn id, and the refusal is kept; any other error, or a turn that ends
failed, is a problem. Streams are continued on disconnect, so the client itself sends a
turn again when its call broke before any event (a stopping replica refuses it with
UNAVAILABLE, or cancels it) and follows it with WatchTurn when it broke later; `CallLog`
keeps every such call and how it ended.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc

from agentskit_chat_client import (
    ChatClient,
    ChatError,
    DisconnectMode,
    Submit,
    TurnCompleted,
    TurnEvent,
)
from agentskit_chat_client._errors import from_rpc_error
from tests.deploy.nginx import TURN_HEADER
from tests.docs.pages import DOCS, marked

GUIDE: Final = DOCS / "how-to" / "revisions.md"
DEFINITION: Final = "desk"
OFFLINE: Final = "model: {adapter: offline}"
FIRST_FILE: Final = "definitions/desk.yaml"
SECOND_FILE: Final = "definitions/desk-2.yaml"

SCRIPT: Final = ("/open", "the printer is on fire", "/submit", "thank you", "/new")
"""One cycle of a conversation; the routes know three, the model gets the other two."""
STATE_AFTER: Final = {
    "/open": "collecting",
    "the printer is on fire": "collecting",
    "/submit": "filed",
    "thank you": "filed",
    "/new": "idle",
}
"""Revision 1's state after each message of the cycle."""
RENAMED: Final = {"collecting": "describing"}
"""Revision 2's names for revision 1's states (its migration's `states`)."""
ROUTE_ANSWERS: Final = {
    "/open": {1: "What is the problem?", 2: "What is the problem?"},
    "/submit": {1: "Ticket filed.", 2: "Filed; we will write soon."},
    "/new": {1: "Ready for another one.", 2: "Ready for another one."},
}
RETRYABLE: Final = frozenset({grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE})
ATTEMPTS: Final = 30
"""Sends of one turn id at most."""
LONGEST_RETRY_DELAY: Final = 1.0
TURN_SECONDS: Final = 60.0


def revision_files(model_url: str) -> tuple[str, str]:
    """The guide's two files, revision 1 and revision 2 (as the guide shows them, revision
    2 with `rollout: 0`), their model the fake one at `model_url`."""
    files = {block.name: block.code for block in marked("file", where=[GUIDE])}
    model = f"model: {{adapter: openai, base_url: '{model_url}', model: fake-1}}"
    texts = []
    for name in (FIRST_FILE, SECOND_FILE):
        text = files[name]
        assert text.count(OFFLINE) == 1, f"{GUIDE.name}: {name} lost its model line"
        texts.append(text.replace(OFFLINE, model))
    return texts[0], texts[1]


def write_step(directory: Path, model_url: str, step: int) -> None:
    """The definitions directory at `step` of the rolling update: 0, revision 1 alone; 1,
    revision 1 with `rollout: 100` beside revision 2 with `rollout: 0`; 2, the weights
    the other way round; 3, revision 2 alone in revision 1's file (an update in one step)."""
    first, second = revision_files(model_url)
    directory.mkdir(parents=True, exist_ok=True)
    files = {"desk.yaml": first}
    if step == 3:
        files["desk.yaml"] = second.replace("rollout: 0\n", "")
        (directory / "desk-2.yaml").unlink(missing_ok=True)
    elif step >= 1:
        weights = (100, 0) if step == 1 else (0, 100)
        files["desk.yaml"] = _with_rollout(first, "revision: 1\n", weights[0])
        files["desk-2.yaml"] = second.replace("rollout: 0\n", f"rollout: {weights[1]}\n")
        assert f"rollout: {weights[1]}\n" in files["desk-2.yaml"]
    for name, text in files.items():
        temporary = directory / f".{name}.new"
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(directory / name)  # a replica starting now reads either whole file


def _with_rollout(text: str, after: str, weight: int) -> str:
    assert text.count(after) == 1
    return text.replace(after, f"{after}rollout: {weight}\n")


@dataclass(frozen=True, slots=True)
class Turn:
    """One completed turn of a conversation."""

    number: int
    text: str
    turn_id: str
    message_id: str
    step: int
    """The rolling update's step when the turn was first sent (see `Roll.step`)."""
    ended_step: int
    """The step when its stream ended. A turn sent just before a step may reach a replica
    after that step's first reload (the client's send and the roll are not ordered), so
    only a turn that ended before step 2 surely ran before it."""
    completed: TurnCompleted

    @property
    def expected_state(self) -> str:
        """Revision 1's name of the state the commands sent so far lead to."""
        return STATE_AFTER[self.text]

    @property
    def revision(self) -> int | None:
        """The revision that ran the turn, from its answer or its state; None when neither
        tells (in `idle` and `filed` only `/submit`'s answer does)."""
        answers = ROUTE_ANSWERS.get(self.text)
        if answers is not None and answers[1] != answers[2]:
            return next((r for r, a in answers.items() if a == self.completed.content), None)
        state = self.completed.snapshot.state
        if state == self.expected_state and state in RENAMED:
            return 1
        if state == RENAMED.get(self.expected_state):
            return 2
        return None


@dataclass(frozen=True, slots=True)
class Call:
    """One StreamTurn or WatchTurn call a client made, and how it ended."""

    method: str
    turn_id: str
    code: str
    """`OK` once the turn's last event arrived, else the status's name."""
    reason: str | None


class CallLog(grpc.aio.UnaryStreamClientInterceptor):
    """Every StreamTurn and WatchTurn call of a client, its own sends again included."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    async def intercept_unary_stream(
        self,
        continuation: Callable[[Any, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        method = client_call_details.method
        name = (method.decode() if isinstance(method, bytes) else str(method)).rsplit("/", 1)[-1]
        call = await continuation(client_call_details, request)
        if name not in ("StreamTurn", "WatchTurn"):
            return call
        return self._logged(call, name, request.turn_id)

    async def _logged(
        self, call: AsyncIterator[Any], method: str, turn_id: str
    ) -> AsyncIterator[Any]:
        try:
            async for response in call:
                if response.WhichOneof("event") in ("completed", "failed"):
                    self.calls.append(Call(method, turn_id, "OK", None))
                yield response
        except grpc.aio.AioRpcError as error:
            reason = from_rpc_error(error).reason
            self.calls.append(Call(method, turn_id, error.code().name, reason))
            raise


def sent_again(call: Call) -> bool:
    """Whether a call that did not end with its turn's last event is one a client sends
    again: refused as busy or unavailable (a draining replica), or cancelled without a
    reason (a stopping replica cancels the calls it had not begun)."""
    return call.code in ("ABORTED", "UNAVAILABLE") or (
        call.code == "CANCELLED" and call.reason is None
    )


@dataclass(frozen=True, slots=True)
class Refusal:
    """A send of a turn refused with a retryable status; the turn id was sent again."""

    turn_id: str
    code: str
    reason: str | None


DONE: Final = 3
"""`Roll.step` once the rolling update is over."""


@dataclass(slots=True)
class Roll:
    """Where the rolling update is: 0 before it, 1 from the first replica of step 1 on, 2
    from the first replica of step 2 on, DONE once every replica has the new weights."""

    step: int = 0


@dataclass(slots=True)
class Progress:
    """Completed turns by conversation, and a way to wait for more of them."""

    counts: list[int]
    ended: set[int] = field(default_factory=set)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def completed(self, index: int) -> None:
        async with self.changed:
            self.counts[index] += 1
            self.changed.notify_all()

    async def end(self, index: int) -> None:
        async with self.changed:
            self.ended.add(index)
            self.changed.notify_all()

    async def each_one_more(self, timeout: float) -> None:
        """Wait until every conversation has completed a turn after this call (or ended)."""
        marks = list(self.counts)

        def moved() -> bool:
            counts = enumerate(zip(self.counts, marks, strict=True))
            return all(n > mark or i in self.ended for i, (n, mark) in counts)

        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(moved), timeout)


@dataclass(slots=True)
class Conversation:
    """One session and every turn, refusal and problem it had."""

    index: int
    target: str
    session_id: str = ""
    revision_at_start: int = 0
    turns: list[Turn] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    errors: list[ChatError] = field(default_factory=list)
    """The errors among the problems."""
    log: CallLog = field(default_factory=lambda: CallLog())

    async def create(self, client: ChatClient) -> None:
        session = await client.create_session(DEFINITION)
        self.session_id = session.session_id
        self.revision_at_start = session.definition_revision

    async def run(self, roll: Roll, progress: Progress, after: int, max_turns: int) -> None:
        """Create the session (unless `create` did), then take turns until `after` turns
        were sent once the roll was done (or `max_turns`, or a problem)."""
        channel = grpc.aio.insecure_channel(self.target, interceptors=[self.log])
        try:
            async with ChatClient(channel, timeout=TURN_SECONDS) as client:
                if not self.session_id:
                    await self.create(client)
                await self._turns(client, roll, progress, after, max_turns)
        except ChatError as error:
            self.problems.append(f"conversation {self.index}: {error}")
            self.errors.append(error)
        finally:
            await channel.close()
            await progress.end(self.index)

    async def _turns(
        self, client: ChatClient, roll: Roll, progress: Progress, after: int, max_turns: int
    ) -> None:
        since_done = 0
        for number in range(max_turns):
            if since_done >= after or self.problems:
                return
            since_done += roll.step == DONE
            if await self._turn(client, number, roll):
                await progress.completed(self.index)
        self.problems.append(f"conversation {self.index}: {max_turns} turns, the roll not done")

    async def _turn(self, client: ChatClient, number: int, roll: Roll) -> bool:
        step = roll.step
        text = SCRIPT[number % len(SCRIPT)]
        turn_id = f"c{self.index}-t{number}"
        message_id = f"m-{turn_id}"
        for _ in range(ATTEMPTS):
            try:
                events = await self._send(client, text, turn_id, message_id)
            except ChatError as error:
                if error.code not in RETRYABLE:
                    self.problems.append(f"{turn_id} ({text}): {error}")
                    self.errors.append(error)
                    return False
                self.refusals.append(Refusal(turn_id, error.code.name, error.reason))
                await asyncio.sleep(_delay(error))
                continue
            last = events[-1] if events else None
            if not isinstance(last, TurnCompleted):
                self.problems.append(f"{turn_id} ({text}): ended with {last!r}")
                return False
            self.turns.append(Turn(number, text, turn_id, message_id, step, roll.step, last))
            return True
        self.problems.append(f"{turn_id} ({text}): refused {ATTEMPTS} times")
        return False

    async def _send(
        self, client: ChatClient, text: str, turn_id: str, message_id: str
    ) -> list[TurnEvent]:
        stream = client.stream_turn(
            self.session_id,
            Submit(text, message_id=message_id),
            turn_id=turn_id,
            on_disconnect=DisconnectMode.CONTINUE,
            metadata=((TURN_HEADER, turn_id),),
        )
        async with aclosing(stream):
            return [event async for event in stream]


def _delay(error: ChatError) -> float:
    """The retry delay the server asked for (bounded); none without one."""
    after = error.retry_after_ms
    return 0.0 if after is None else min(after / 1000, LONGEST_RETRY_DELAY)


def turn_problems(conversation: Conversation, answer: str) -> list[str]:
    """What is wrong with the turns a conversation completed, one line each.

    Every turn number ran once, in order, and completed in the state its commands imply,
    named by the revision that ran it, with that revision's answer (the model's `answer`
    for a message to the model). No turn that ended before step 2 ran on revision 2; once a
    turn ran on revision 2, none ran on revision 1 again; every turn sent after the roll
    was done ran on revision 2, and one of them says so.
    """
    found: list[str] = []
    numbers = [turn.number for turn in conversation.turns]
    if numbers != list(range(len(numbers))):
        found.append(f"conversation {conversation.index}: turns {numbers}")
    moved = False
    for turn in conversation.turns:
        revision = turn.revision
        name = f"{turn.turn_id} ({turn.text})"
        expected = turn.expected_state
        if revision == 2:
            expected = RENAMED.get(expected, expected)
        if turn.completed.snapshot.state != expected:
            found.append(f"{name}: state {turn.completed.snapshot.state}, not {expected}")
        answers = ROUTE_ANSWERS.get(turn.text)
        wanted = answer if answers is None else answers[revision or 1]
        if turn.completed.content != wanted:
            found.append(f"{name}: answered {turn.completed.content!r}")
        if revision == 2:
            moved = True
            if turn.ended_step < 2:
                found.append(f"{name}: ran on revision 2 before step 2")
        elif revision == 1 and moved:
            found.append(f"{name}: back on revision 1")
        elif revision == 1 and turn.step == DONE:
            found.append(f"{name}: on revision 1 after the roll")
    if not any(t.revision == 2 for t in conversation.turns if t.step == DONE):
        found.append(f"conversation {conversation.index}: no turn after the roll told revision 2")
    return found


def history_problems(
    conversation: Conversation, messages: Sequence[tuple[str, str, str]]
) -> list[str]:
    """What the stored history (id, role, content of each message) lacks or adds: each
    completed turn's user message and answer, in order, and nothing else."""
    expected: list[tuple[str, str, str]] = []
    for turn in conversation.turns:
        expected.append((turn.message_id, "user", turn.text))
        expected.append((turn.completed.assistant_message_id, "assistant", turn.completed.content))
    if list(messages) == expected:
        return []
    return [
        f"conversation {conversation.index}: {len(messages)} messages, {len(expected)} expected"
    ]


METRICS_AT: Final = re.compile(r"agentskit-chat metrics at (http://127\.0\.0\.1:\d+/metrics)")
MIGRATIONS: Final = "agentskit_chat_migrations_total"


def metrics_url(stdout: str) -> str:
    """The scrape address a `serve --metrics-listen` printed."""
    found = METRICS_AT.search(stdout)
    assert found is not None, stdout
    return found.group(1)


def migration_counts(urls: Iterable[str]) -> dict[tuple[tuple[str, str], ...], float]:
    """The migrations counter summed over the scrapes at `urls`, by its own labels (not
    the exporter's `otel_scope_*`)."""
    summed: dict[tuple[tuple[str, str], ...], float] = {}
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode("utf-8")
        for labels, value in _samples(text, MIGRATIONS):
            summed[labels] = summed.get(labels, 0.0) + value
    return summed


_SAMPLE: Final = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)")
_LABEL: Final = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _samples(text: str, name: str) -> list[tuple[tuple[tuple[str, str], ...], float]]:
    found = []
    for line in text.splitlines():
        sample = _SAMPLE.match(line)
        if sample is None or sample["name"] != name:
            continue
        pairs = _LABEL.findall(sample["labels"] or "")
        labels = tuple(sorted((k, v) for k, v in pairs if k.startswith("agentskit_chat_")))
        found.append((labels, float(sample["value"])))
    return found


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait, checking `condition` after each of the loop's turns, for at most `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
