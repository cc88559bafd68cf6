"""The turn lifecycle: claim the lease, resolve, stream, commit or release.

A turn that may wait on anything (application code, a model call) first claims the
session's expiring lease by compare-and-set, before any callback, model call or
transition. From then on it ends in exactly one of: a committed answer, a recorded failure
that commits nothing else, or (when the client goes away) a released lease.

A turn of a definition whose routes are all declared as data is resolved before any write:
when a route answers it (or fails it), the turn takes no lease and is committed with one
write (`_one_write`). Only when no route answers (the turn goes to the model) does it claim
the lease, and then proceeds with the outcome already resolved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

from agentskit_chat.conversation import (
    ChatDefinition,
    DelegateOutcome,
    FailureOutcome,
    InputDigester,
    Message,
    Outcome,
    Role,
    RouteOutcome,
    ToolCall,
    TurnKind,
    resolve,
)
from agentskit_chat.models import (
    AdapterRegistry,
    FinishChunk,
    ModelError,
    ModelRequest,
    TextChunk,
    ToolCallDeltaChunk,
    ToolCallStartChunk,
    ToolOptions,
    UsageChunk,
)
from agentskit_chat.storage import HistoryMode

from ._errors import Reason, ServiceError
from ._history import Plan, plan_turn
from ._limits import Limits, utf8_size
from ._migrations import migrate_at_turn
from ._observer import NO_SCOPE, NoObserver, TurnObserver, TurnScope
from ._one_write import OneWrite
from ._progress import TurnProgress
from ._records import Loaded, Records, check_expected_cursor, now_ms, refuse_if_leased
from ._server_tools import ServerToolPort, route_tools
from ._terminal import (
    DEADLINE_EXCEEDED,
    OUTPUT_LIMIT,
    TOOL_LIMIT,
    TOOL_ROUNDS,
    finish_reason_of,
    repeat,
)
from ._tool_calls import ToolCalls
from ._turn_writes import Turn, TurnWrites, new_id, route_answered, route_decided
from ._types import (
    Claim,
    Completed,
    Decided,
    Delta,
    Dispatch,
    Failed,
    Started,
    ToolDelta,
    ToolEnded,
    ToolRan,
    ToolStarted,
    TurnEvent,
    TurnRequest,
    Usage,
)

log = logging.getLogger(__name__)


class TurnRunner:
    """Runs turns; counts the ones in flight so shutdown can wait for them."""

    def __init__(
        self,
        records: Records,
        adapters: AdapterRegistry,
        limits: Limits,
        digester: InputDigester,
        *,
        holder: str,
        callback_timeout: float,
        observer: TurnObserver | None = None,
        server_tools: ServerToolPort | None = None,
    ) -> None:
        self._records = records
        self._server_tools = server_tools
        self._adapters = adapters
        self._limits = limits
        self._digester = digester
        self._holder = holder
        self._callback_timeout = callback_timeout
        self._observer: TurnObserver = observer or NoObserver()
        self._turn_started = getattr(self._observer, "turn_started", None)
        self._writes = TurnWrites(records, limits, holder)
        self._one_write = OneWrite(records, self._writes, limits, holder)
        self.releases = self._writes.releases
        """Lease releases the store refused, retried in the background."""
        self.draining = False

    @property
    def in_flight(self) -> int:
        """Turns holding a lease in this process."""
        return self._writes.in_flight

    async def wait_idle(self) -> None:
        """Return once no turn is in flight and every closing write has been tried once.

        A release the store refused goes on being retried in the background
        (`releases.wait()` waits for those); so the wait ends when the turns do, however
        long the store stays down. Cancelling the wait (a timeout) leaves the writes running.
        """
        await self._writes.wait_idle()

    def track(self, write: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        """Run a closing write as a task that `wait_idle` waits for."""
        return self._writes.track(write)

    @property
    def holder(self) -> str:
        """The lease holder name of this process."""
        return self._holder

    async def run(
        self, request: TurnRequest, claimed: Callable[[Claim], None] | None = None
    ) -> AsyncGenerator[TurnEvent, None]:
        """The events of one turn. Refusals before the lease is claimed raise ServiceError;
        `claimed` is called once the turn holds the lease (a repeat never claims it).

        However the turn ends, the observer receives its report afterwards (except for
        malformed ids, refused before anything else).
        """
        limits = self._limits  # Ids are checked first: reports only carry valid ones.
        limits.check_id("session_id", request.session_id)
        limits.check_id("turn_id", request.turn_id)
        progress = TurnProgress(request, self._enter(request))
        try:
            async with aclosing(self._run(request, progress, claimed)) as events:
                async for event in events:
                    progress.saw(event)
                    yield event
        except ServiceError as error:
            progress.refused(error.reason.name)
            raise
        except Exception:
            progress.refused("internal")
            raise
        finally:
            self._report(progress)
            progress.scope.leave()

    def _enter(self, request: TurnRequest) -> TurnScope:
        """The observer's scope for this turn (see TurnTracer), current from here on."""
        if self._turn_started is None:
            return NO_SCOPE
        try:
            scope: TurnScope = self._turn_started(request)
        except Exception:  # An observer must never fail a turn.
            log.exception("turn observer failed")
            return NO_SCOPE
        return scope

    def _report(self, progress: TurnProgress) -> None:
        try:
            self._observer.turn_finished(progress.report())
        except Exception:  # An observer must never fail a turn.
            log.exception("turn observer failed")

    async def _run(
        self,
        request: TurnRequest,
        progress: TurnProgress,
        claimed: Callable[[Claim], None] | None,
    ) -> AsyncGenerator[TurnEvent, None]:
        if self.draining:
            raise ServiceError(Reason.SHUTTING_DOWN, "the server is shutting down")
        # The stored record is read on every turn, even when this process holds it: the bytes
        # are compared with the cached ones (no decoding when they match), so a record
        # changed or damaged behind the cache is noticed instead of being written over.
        # The history is read with the record, in one snapshot: a repeat and a claim both
        # use it, and nothing committed since the record was read can make it disagree.
        loaded, history = await self._records.load_with_messages(request.session_id)
        progress.definition = loaded.definition
        _check_mode(loaded.history_mode, request)
        finished = loaded.record.find_turn(request.turn_id)
        if finished is not None:
            async with aclosing(repeat(loaded, history, finished)) as repeated:
                async for event in repeated:
                    yield event
            return
        check_expected_cursor(loaded, request.expected_cursor)
        at = now_ms()
        refuse_if_leased(loaded, at, request.turn_id)
        loaded, progress.migration = await migrate_at_turn(self._records, loaded)
        progress.definition = loaded.definition
        plan = plan_turn(
            request.operation,
            history,
            self._limits,
            new_id,
            loaded.record,
            loaded.definition.approvals,
        )
        declarative = _declarative(loaded.definition)
        resolved: Outcome | None = None
        if declarative:
            resolved = await self._resolve(loaded, plan, request.turn_id)  # Never waits.
            if not isinstance(resolved, DelegateOutcome):
                one = self._one_write
                answered = await one.run(request, loaded, plan, at, progress, resolved, claimed)
                if answered is None:  # The write lost: answer as the session is now.
                    async with aclosing(one.lost(request)) as repeated:
                        async for event in repeated:
                            yield event
                    return
                for event in answered:  # A tuple: no generator between the turn and its reader.
                    yield event
                return
        turn = await self._writes.claim(request, loaded, plan, at, progress, declarative, resolved)
        if turn is None:
            raise ServiceError(Reason.CONFLICT, "another writer changed the session; retry")
        self._writes.entered()
        try:
            if claimed is not None:
                client_held = turn.claimed.history_mode == HistoryMode.CLIENT
                claimed(Claim(self._holder, turn.started_at_ms, client_held))
            async with aclosing(self._execute(turn)) as events:
                async for event in events:
                    yield event
        finally:
            self._writes.left()

    async def _execute(self, turn: Turn) -> AsyncGenerator[TurnEvent, None]:
        ended = False  # committed, recorded as failed, or lost to another writer
        first = Started(
            turn.request.operation_name, turn.plan.user_message_id, False, turn.answer_id
        )
        started: Started | None = first
        try:
            if not turn.declarative:
                yield first  # Route code may take a while: say at once that the turn runs.
                started = None
            # Otherwise resolving cannot wait on anything, and `started` goes out with the
            # first outcome event: the turn's events leave together, not one before the work.
            async with aclosing(self._respond(turn)) as events:
                async for event in events:
                    ended = isinstance(event, Completed | Failed)
                    if started is not None:
                        yield started
                        started = None
                    yield event
        finally:
            if not ended:
                await self._writes.finish(self.releases.release(turn.claimed))

    async def _respond(self, turn: Turn) -> AsyncGenerator[TurnEvent, None]:
        if turn.resolved is not None:
            outcome = turn.resolved  # Resolved before the lease: declared routes only.
        elif turn.declarative:
            outcome = await self._resolve(turn.claimed, turn.plan, turn.request.turn_id)
        else:
            try:
                async with asyncio.timeout_at(turn.deadline):
                    outcome = await self._resolve(turn.claimed, turn.plan, turn.request.turn_id)
            except TimeoutError:
                yield await self._writes.fail(turn, DEADLINE_EXCEEDED, None)
                return
        if isinstance(outcome, FailureOutcome):
            yield await self._writes.fail(turn, outcome.code, outcome)
        elif isinstance(outcome, RouteOutcome):
            async for event in self._answer(turn, outcome):
                yield event
        elif turn.plan.tools is not None and turn.plan.tools.waiting:
            async for event in self._run_approved(turn, outcome):
                yield event
        else:
            async with aclosing(self._delegate(turn, outcome)) as events:
                async for event in events:
                    yield event

    async def _resolve(self, loaded: Loaded, plan: Plan, turn_id: str) -> Outcome:
        port = self._server_tools
        return await resolve(
            loaded.definition,
            loaded.record.conversation,
            plan.messages,
            digester=self._digester,
            callback_timeout=self._callback_timeout,
            at=time.time(),
            continuation=plan.tools is not None,
            tools=None if port is None else route_tools(port, turn_id),
        )

    async def _answer(self, turn: Turn, outcome: RouteOutcome) -> AsyncGenerator[TurnEvent, None]:
        decided = route_decided(outcome)
        if utf8_size(outcome.response) > self._limits.max_output_bytes:
            yield await self._writes.fail(turn, OUTPUT_LIMIT, None)
            return
        answer = Message(turn.answer_id, Role.ASSISTANT, outcome.response)
        saved = await self._writes.commit(turn, outcome, decided, answer, None)
        if isinstance(saved, Failed):
            yield saved
            return
        for event in route_answered(decided, answer, outcome, saved):
            yield event

    async def _run_approved(
        self, turn: Turn, outcome: DelegateOutcome
    ) -> AsyncGenerator[TurnEvent, None]:
        """Approved calls without results: the service runs the server tools' ones; the
        others go back to the client (`_wait_again`). When none is left for the client,
        the model goes on with the results."""
        tools = turn.plan.tools
        assert tools is not None
        port = self._server_tools
        served = frozenset(turn.claimed.definition.server_tools) if port is not None else ()
        runs = tuple(c for c in tools.calls if c.name in served)
        if not runs:
            async for event in self._wait_again(turn, outcome):
                yield event
            return
        assert port is not None
        state = outcome.state.state
        decided = Decided(str(TurnKind.AGENTIC), None, state, state, False)
        yield decided
        results: list[Message] = []
        async with aclosing(self._run_calls(turn, decided, runs, "approved", results)) as ran:
            async for event in ran:
                yield event
                if isinstance(event, Failed):
                    return
        left = tuple(p for p in tools.waiting if p.name not in served)
        if left:
            saved = await self._writes.commit(
                turn, outcome, decided, None, None, left, after=tuple(results)
            )
            if isinstance(saved, Failed):
                yield saved
                return
            calls = tuple(c for c in tools.calls if c.name not in served)
            for event in _handed_back(calls):
                yield event
            yield Completed(
                tools.answer_id,
                "",
                outcome.snapshot,
                saved.cursor,
                None,
                finish_reason_of(left),
                tools.calls,
                left,
            )
            return
        async with aclosing(self._delegate(turn, outcome, tuple(results), decided)) as events:
            async for event in events:
                yield event

    async def _run_calls(
        self,
        turn: Turn,
        decided: Decided,
        calls: tuple[ToolCall, ...],
        label: str,
        results: list[Message],
    ) -> AsyncGenerator[TurnEvent, None]:
        """Run server tool `calls` in order: a ToolRan event each, its tool message added
        to `results` (ids from the answer's and `label`); the failed event, recorded, when
        the turn's deadline passes first."""
        port = self._server_tools
        assert port is not None
        for index, call in enumerate(calls):
            try:
                async with asyncio.timeout_at(turn.deadline):
                    ran = await port.call(
                        call.name, call.arguments, turn_id=turn.request.turn_id, call_id=call.id
                    )
            except TimeoutError:
                yield await self._writes.fail(turn, DEADLINE_EXCEEDED, None, decided=decided)
                return
            result_id = f"{turn.answer_id}.{label}.{index}"
            yield ToolRan(call.id, ran.text, ran.error_type, result_id)
            results.append(Message(result_id, Role.TOOL, ran.text, tool_call_id=call.id))

    async def _wait_again(
        self, turn: Turn, outcome: DelegateOutcome
    ) -> AsyncGenerator[TurnEvent, None]:
        """Approved calls without results go back to the client: the denied results are
        stored and the turn completes waiting, without asking the model."""
        tools = turn.plan.tools
        assert tools is not None
        state = outcome.state.state
        decided = Decided(str(TurnKind.AGENTIC), None, state, state, False)
        saved = await self._writes.commit(turn, outcome, decided, None, None, tools.waiting)
        if isinstance(saved, Failed):
            yield saved
            return
        yield decided
        for event in _handed_back(tools.calls):
            yield event
        yield Completed(
            tools.answer_id,
            "",
            outcome.snapshot,
            saved.cursor,
            None,
            finish_reason_of(tools.waiting),
            tools.calls,
            tools.waiting,
        )

    async def _delegate(
        self,
        turn: Turn,
        outcome: DelegateOutcome,
        ran: tuple[Message, ...] = (),
        decided: Decided | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Ask the model; while its answer calls server tools the service runs, run them
        and ask again with their results (a round), up to `max_tool_rounds` rounds. `ran`:
        results of approved server calls this turn ran first (`decided` already sent)."""
        if decided is None:
            state = outcome.state.state
            decided = Decided(str(TurnKind.AGENTIC), None, state, state, False)
            yield decided
        definition = turn.claimed.definition
        port = self._server_tools
        served = frozenset(definition.server_tools) if port is not None else frozenset()
        options = turn.request.tools
        if port is not None and served:
            options = replace(options, tools=(*options.tools, *port.specs(definition)))
        rounds: list[Message] = list(ran)
        usage: Usage | None = None
        for number in range(self._limits.max_tool_rounds + 1):
            answer = _Answer(ToolCalls(self._limits, definition.approvals, served))
            messages = (*outcome.messages, *rounds)
            async with aclosing(self._ask(turn, decided, messages, options, answer)) as events:
                async for event in events:
                    yield event
            if answer.failed is not None:
                yield answer.failed
                return
            usage = _sum(usage, answer.usage)
            runs = answer.calls.served()
            if not runs:
                break
            if number == self._limits.max_tool_rounds:
                yield await self._writes.fail(turn, TOOL_ROUNDS, None, decided=decided)
                return
            assert port is not None
            waiting = bool(answer.calls.pending())  # the client's calls of the same answer
            said = Message(
                turn.answer_id if waiting else f"{turn.answer_id}.{number}",
                Role.ASSISTANT,
                answer.text,
                answer.made,
            )
            results: list[Message] = []
            label = str(number)
            async with aclosing(self._run_calls(turn, decided, runs, label, results)) as calls:
                async for event in calls:
                    yield event
                    if isinstance(event, Failed):
                        return
            if waiting:  # the answer is this one; the turn then waits for the client's calls
                async for event in self._complete(
                    turn, outcome, decided, said, usage, answer, tuple(rounds), tuple(results)
                ):
                    yield event
                return
            rounds += [said, *results]
        final = Message(turn.answer_id, Role.ASSISTANT, answer.text, answer.made)
        async for event in self._complete(
            turn, outcome, decided, final, usage, answer, tuple(rounds), ()
        ):
            yield event

    async def _complete(
        self,
        turn: Turn,
        outcome: DelegateOutcome,
        decided: Decided,
        final: Message,
        usage: Usage | None,
        answer: _Answer,
        before: tuple[Message, ...],
        after: tuple[Message, ...],
    ) -> AsyncGenerator[TurnEvent, None]:
        """Commit the answer `final` with the rounds `before` it and the server tools'
        results `after` it; its Completed event, or the failure."""
        pending = answer.calls.pending()
        saved = await self._writes.commit(
            turn, outcome, decided, final, usage, pending, before=before, after=after
        )
        if isinstance(saved, Failed):
            yield saved
            return
        finish = finish_reason_of(pending) if pending else answer.finish
        yield Completed(
            final.id,
            final.content,
            outcome.snapshot,
            saved.cursor,
            usage,
            finish,
            answer.made,
            pending,
        )

    async def _ask(
        self,
        turn: Turn,
        decided: Decided,
        messages: tuple[Message, ...],
        options: ToolOptions,
        answer: _Answer,
    ) -> AsyncGenerator[TurnEvent, None]:
        """One model call: its events as they come, and the answer gathered in `answer`
        (`answer.failed` set, after recording the failure, when it fails)."""
        definition = turn.claimed.definition
        adapter = self._adapters.adapter(definition.model)
        request = ModelRequest(
            definition.id,
            turn.request.session_id,
            messages,
            definition.model,
            turn.request.sampling,
            options,
        )
        size = 0
        model = definition.model.get("model")
        call = turn.progress.model_started(adapter, model if isinstance(model, str) else None)
        async with aclosing(adapter.stream(request)) as chunks:
            while True:
                try:
                    async with asyncio.timeout_at(turn.deadline):
                        chunk = await anext(chunks, None)
                except TimeoutError:
                    call.end(DEADLINE_EXCEEDED)
                    answer.failed = await self._writes.fail(
                        turn, DEADLINE_EXCEEDED, None, decided=decided
                    )
                    return
                except ModelError as exc:
                    call.end(exc.code)
                    answer.failed = await self._writes.fail(
                        turn, exc.code, None, exc, decided=decided
                    )
                    return
                if chunk is None:
                    call.end()
                    break
                call.saw(chunk)
                if isinstance(chunk, TextChunk):
                    size += utf8_size(chunk.text)
                    if size > self._limits.max_output_bytes:  # Leaving closes the stream.
                        call.end(OUTPUT_LIMIT)
                        answer.failed = await self._writes.fail(
                            turn, OUTPUT_LIMIT, None, decided=decided
                        )
                        return
                    answer.parts.append(chunk.text)
                    yield Delta(chunk.text)
                elif isinstance(chunk, ToolCallStartChunk | ToolCallDeltaChunk):
                    event = answer.calls.add(chunk)
                    if event is None:  # Leaving closes the stream.
                        call.end(TOOL_LIMIT)
                        answer.failed = await self._writes.fail(
                            turn, TOOL_LIMIT, None, decided=decided
                        )
                        return
                    yield event
                elif isinstance(chunk, UsageChunk):
                    answer.usage = Usage(chunk.input_tokens, chunk.output_tokens)
                elif isinstance(chunk, FinishChunk):
                    answer.finish = chunk.reason
        answer.made = answer.calls.made()
        for ended in answer.calls.ended():
            yield ended


@dataclass(slots=True)
class _Answer:
    """What one model call answered."""

    calls: ToolCalls
    parts: list[str] = field(default_factory=list)
    made: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish: str = ""
    failed: Failed | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _handed_back(calls: tuple[ToolCall, ...]) -> Iterator[TurnEvent]:
    """The events of approved calls going back to the client to run."""
    for call in calls:
        yield ToolStarted(call.id, call.name)
        if call.arguments:
            yield ToolDelta(call.id, call.arguments)
        yield ToolEnded(call.id, call.arguments, "result")


def _sum(total: Usage | None, more: Usage | None) -> Usage | None:
    if total is None or more is None:
        return more if total is None else total
    return Usage(total.input_tokens + more.input_tokens, total.output_tokens + more.output_tokens)


def _declarative(definition: ChatDefinition) -> bool:
    """Whether every route is declared as data: resolving runs no application code."""
    return all(route.derives_response for route in definition.conversation.routes)


def _check_mode(mode: HistoryMode, request: TurnRequest) -> None:
    client_held = isinstance(request.operation, Dispatch)
    if client_held != (mode == HistoryMode.CLIENT):
        raise ServiceError(
            Reason.HISTORY_MISMATCH,
            "dispatch is for client-held history; submit, retry, edit and regenerate are for "
            "server-held history",
            history_mode=str(mode),
        )
