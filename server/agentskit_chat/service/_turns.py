"""The turn lifecycle: claim the lease, resolve, stream, commit or release.

A turn that may wait on anything (application code, a model call) first claims the
session's expiring lease by compare-and-set, before any callback, model call or
transition. From then on it ends in exactly one of: a committed answer, a recorded failure
that commits nothing else, or (when the client goes away) a released lease.

A turn of a definition whose routes are all declared as data is resolved before any write:
resolving runs no application code and never waits. When a route answers it (or fails it),
nothing can fail between a lease claim and the commit, so the turn takes no lease: its
answer (or failure) is committed with one compare-and-set on the cursor read with the
record, and the cursor grows by one. When that compare-and-set loses, the record is read
again and the turn answers as a claim that lost would: the recorded outcome when the same
turn id finished meanwhile, SESSION_BUSY or TURN_IN_PROGRESS while a lease is held,
CONFLICT otherwise. Only when no route answers (the turn goes to the model) does it claim
the lease, and then proceeds with the outcome already resolved.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from agentskit_chat.conversation import (
    ChatDefinition,
    DelegateOutcome,
    FailureOutcome,
    InputDigester,
    Lease,
    Message,
    Outcome,
    Role,
    RouteOutcome,
    TurnKind,
    resolve,
)
from agentskit_chat.models import (
    AdapterRegistry,
    FinishChunk,
    ModelError,
    ModelRequest,
    TextChunk,
    UsageChunk,
)
from agentskit_chat.storage import HistoryChange, HistoryMode

from ._errors import Reason, ServiceError
from ._history import Plan, plan_turn
from ._limits import Limits, utf8_size
from ._observer import NO_SCOPE, NoObserver, TurnObserver, TurnScope
from ._progress import TurnProgress
from ._records import (
    Loaded,
    Records,
    check_expected_cursor,
    now_ms,
    refuse_if_leased,
    to_stored,
)
from ._releases import Releases
from ._terminal import (
    CONFLICT,
    DEADLINE_EXCEEDED,
    OUTPUT_LIMIT,
    STORE_UNAVAILABLE,
    completed_turn,
    failed_turn,
    failure,
    repeat,
)
from ._types import (
    Claim,
    Completed,
    Decided,
    Delta,
    Dispatch,
    Failed,
    Started,
    TurnEvent,
    TurnRequest,
    Usage,
)

log = logging.getLogger(__name__)


def new_id(prefix: str) -> str:
    """A fresh message id such as `u-1f2e3d4c5b6a7988`."""
    return f"{prefix}-{secrets.token_hex(8)}"


@dataclass(frozen=True, slots=True)
class _Turn:
    request: TurnRequest
    plan: Plan
    claimed: Loaded
    deadline: float
    """Event-loop time after which the turn fails with deadline_exceeded."""
    declarative: bool
    """Every route is declared as data: resolving runs no application code and never waits."""
    progress: TurnProgress
    answer_id: str
    """The id the answer is stored under, told to the renderer when the turn starts."""
    started_at_ms: int
    """When the turn started (its lease's claim, when it holds one)."""
    resolved: Outcome | None = None
    """The outcome, when it was resolved before the lease was claimed."""
    leased: bool = True
    """The turn holds the session's lease; otherwise its one write is its commit."""


class _LostError(Exception):
    """The one write of a turn without a lease lost its compare-and-set."""


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
    ) -> None:
        self._records = records
        self._adapters = adapters
        self._limits = limits
        self._digester = digester
        self._holder = holder
        self._callback_timeout = callback_timeout
        self._observer: TurnObserver = observer or NoObserver()
        self._turn_started = getattr(self._observer, "turn_started", None)
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._cleanups: set[asyncio.Task[object]] = set()
        self.releases = Releases(records)
        """Lease releases the store refused, retried in the background."""
        self.draining = False

    @property
    def in_flight(self) -> int:
        """Turns holding a lease in this process."""
        return self._in_flight

    async def wait_idle(self) -> None:
        """Return once no turn is in flight and every closing write has been tried once.

        A release the store refused goes on being retried in the background
        (`releases.wait()` waits for those); so the wait ends when the turns do, however
        long the store stays down. Cancelling the wait (a timeout) leaves the writes running.
        """
        await self._idle.wait()
        while self._cleanups:
            await asyncio.wait(set(self._cleanups))

    async def _finish(self, write: Coroutine[Any, Any, object]) -> None:
        """Run a closing write to the end even when the turn is cancelled meanwhile."""
        await asyncio.shield(self._track(write))

    def track(self, write: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        """Run a closing write as a task that `wait_idle` waits for."""
        return self._track(write)

    def _track(self, write: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        """Run `write` as a task that `wait_idle` waits for."""
        task: asyncio.Task[object] = asyncio.ensure_future(write)
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)
        return task

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
        plan = plan_turn(request.operation, history, self._limits, new_id)
        declarative = _declarative(loaded.definition)
        resolved: Outcome | None = None
        if declarative:
            resolved = await self._resolve(loaded, plan)  # Never waits, writes nothing.
            if not isinstance(resolved, DelegateOutcome):
                answer_id = new_id("a")
                direct = _Turn(
                    request, plan, loaded, 0.0, True, progress, answer_id, at, resolved, False
                )
                self._in_flight += 1
                self._idle.clear()
                try:
                    answered = await self._once(direct, resolved)
                finally:
                    self._left()
                if answered is None:  # The write lost: answer as the session is now.
                    async with aclosing(self._lost(request)) as repeated:
                        async for event in repeated:
                            yield event
                    return
                if claimed is not None:
                    client_held = loaded.history_mode == HistoryMode.CLIENT
                    claimed(Claim(self._holder, at, client_held, leased=False))
                yield Started(request.operation_name, plan.user_message_id, False, answer_id)
                for event in answered:  # A tuple: no generator between the turn and its reader.
                    yield event
                return
        turn = await self._claim(request, loaded, plan, at, progress, declarative, resolved)
        if turn is None:
            raise ServiceError(Reason.CONFLICT, "another writer changed the session; retry")
        self._in_flight += 1
        self._idle.clear()
        try:
            if claimed is not None:
                client_held = turn.claimed.history_mode == HistoryMode.CLIENT
                claimed(Claim(self._holder, turn.started_at_ms, client_held))
            async with aclosing(self._execute(turn)) as events:
                async for event in events:
                    yield event
        finally:
            self._left()

    def _left(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._idle.set()

    async def _claim(
        self,
        request: TurnRequest,
        loaded: Loaded,
        plan: Plan,
        at: int,
        progress: TurnProgress,
        declarative: bool,
        resolved: Outcome | None,
    ) -> _Turn | None:
        """Claim the session lease for the turn planned on `loaded`; None when the
        compare-and-set lost."""
        lease = Lease(
            request.turn_id,
            self._holder,
            at + int(self._limits.lease_ttl * 1000),
            request.operation_name,
            at,
            plan.user_message_id,
        )
        saving = asyncio.ensure_future(
            self._records.save(loaded, loaded.record.evolve(lease=lease))
        )
        try:
            claimed = await asyncio.shield(saving)
        except asyncio.CancelledError:
            self._track(self._release_when_claimed(saving))  # The claim may still land.
            raise
        if claimed is None:
            return None
        deadline = asyncio.get_running_loop().time() + self._limits.turn_timeout
        progress.definition = claimed.definition
        answer_id = new_id("a")
        return _Turn(
            request, plan, claimed, deadline, declarative, progress, answer_id, at, resolved
        )

    async def _once(
        self, turn: _Turn, outcome: RouteOutcome | FailureOutcome
    ) -> tuple[TurnEvent, ...] | None:
        """The events after `started` of a turn a declared route answers (or fails), without
        a lease: its one write is the commit. None when that write lost its compare-and-set
        (nothing was written)."""
        try:
            if isinstance(outcome, FailureOutcome):
                return (await self._fail(turn, outcome.code, outcome),)
            if utf8_size(outcome.response) > self._limits.max_output_bytes:
                return (await self._fail(turn, OUTPUT_LIMIT, None),)
            decided = _decided(outcome)
            answer = Message(turn.answer_id, Role.ASSISTANT, outcome.response)
            saved = await self._commit(turn, outcome, decided, answer, None)
        except _LostError:
            return None
        if isinstance(saved, Failed):
            return (saved,)
        return _answered(decided, answer, outcome, saved)

    async def _lost(self, request: TurnRequest) -> AsyncGenerator[TurnEvent, None]:
        """What a turn whose only write lost answers: the recorded outcome of the same turn
        id when it finished meanwhile, busy while a lease is held, else a conflict."""
        loaded, history = await self._records.load_with_messages(request.session_id)
        finished = loaded.record.find_turn(request.turn_id)
        if finished is not None:
            async with aclosing(repeat(loaded, history, finished)) as repeated:
                async for event in repeated:
                    yield event
            return
        refuse_if_leased(loaded, now_ms(), request.turn_id)
        raise ServiceError(Reason.CONFLICT, "another writer changed the session; retry")

    async def _execute(self, turn: _Turn) -> AsyncGenerator[TurnEvent, None]:
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
                await self._finish(self._release(turn.claimed))

    async def _respond(self, turn: _Turn) -> AsyncGenerator[TurnEvent, None]:
        if turn.resolved is not None:
            outcome = turn.resolved  # Resolved before the lease: declared routes only.
        elif turn.declarative:
            outcome = await self._resolve(turn.claimed, turn.plan)  # Never waits.
        else:
            try:
                async with asyncio.timeout_at(turn.deadline):
                    outcome = await self._resolve(turn.claimed, turn.plan)
            except TimeoutError:
                yield await self._fail(turn, DEADLINE_EXCEEDED, None)
                return
        if isinstance(outcome, FailureOutcome):
            yield await self._fail(turn, outcome.code, outcome)
        elif isinstance(outcome, RouteOutcome):
            async for event in self._answer(turn, outcome):
                yield event
        else:
            async with aclosing(self._delegate(turn, outcome)) as events:
                async for event in events:
                    yield event

    async def _resolve(self, loaded: Loaded, plan: Plan) -> Outcome:
        return await resolve(
            loaded.definition,
            loaded.record.conversation,
            plan.messages,
            digester=self._digester,
            callback_timeout=self._callback_timeout,
            at=time.time(),
        )

    async def _answer(self, turn: _Turn, outcome: RouteOutcome) -> AsyncGenerator[TurnEvent, None]:
        decided = _decided(outcome)
        if utf8_size(outcome.response) > self._limits.max_output_bytes:
            yield await self._fail(turn, OUTPUT_LIMIT, None)
            return
        answer = Message(turn.answer_id, Role.ASSISTANT, outcome.response)
        saved = await self._commit(turn, outcome, decided, answer, None)
        if isinstance(saved, Failed):
            yield saved
            return
        for event in _answered(decided, answer, outcome, saved):
            yield event

    async def _delegate(
        self, turn: _Turn, outcome: DelegateOutcome
    ) -> AsyncGenerator[TurnEvent, None]:
        state = outcome.state.state
        decided = Decided(str(TurnKind.AGENTIC), None, state, state, False)
        yield decided
        definition = turn.claimed.definition
        adapter = self._adapters.adapter(definition.model)
        request = ModelRequest(
            definition.id,
            turn.request.session_id,
            outcome.messages,
            definition.model,
            turn.request.sampling,
        )
        parts: list[str] = []
        size = 0
        usage: Usage | None = None
        finish = ""
        model = definition.model.get("model")
        call = turn.progress.model_started(adapter, model if isinstance(model, str) else None)
        async with aclosing(adapter.stream(request)) as chunks:
            while True:
                try:
                    async with asyncio.timeout_at(turn.deadline):
                        chunk = await anext(chunks, None)
                except TimeoutError:
                    call.end(DEADLINE_EXCEEDED)
                    yield await self._fail(turn, DEADLINE_EXCEEDED, None, decided=decided)
                    return
                except ModelError as exc:
                    call.end(exc.code)
                    yield await self._fail(turn, exc.code, None, exc, decided=decided)
                    return
                if chunk is None:
                    call.end()
                    break
                call.saw(chunk)
                if isinstance(chunk, TextChunk):
                    size += utf8_size(chunk.text)
                    if size > self._limits.max_output_bytes:  # Leaving closes the stream.
                        call.end(OUTPUT_LIMIT)
                        yield await self._fail(turn, OUTPUT_LIMIT, None, decided=decided)
                        return
                    parts.append(chunk.text)
                    yield Delta(chunk.text)
                elif isinstance(chunk, UsageChunk):
                    usage = Usage(chunk.input_tokens, chunk.output_tokens)
                elif isinstance(chunk, FinishChunk):
                    finish = chunk.reason
        answer = Message(turn.answer_id, Role.ASSISTANT, "".join(parts))
        saved = await self._commit(turn, outcome, decided, answer, usage)
        if isinstance(saved, Failed):
            yield saved
            return
        yield Completed(answer.id, answer.content, outcome.snapshot, saved.cursor, usage, finish)

    async def _commit(
        self,
        turn: _Turn,
        outcome: RouteOutcome | DelegateOutcome,
        decided: Decided,
        answer: Message,
        usage: Usage | None,
    ) -> Loaded | Failed:
        """Store the answer; the failed event instead when another writer won or the store
        failed (then nothing was committed and the lease is given back)."""
        finished = completed_turn(
            turn.request,
            turn.plan.user_message_id,
            decided,
            answer.id,
            started_at_ms=turn.started_at_ms,
            usage=usage,
        )
        record = turn.claimed.record.evolve(conversation=outcome.state, lease=None).with_turn(
            finished
        )
        history = None
        if turn.claimed.history_mode == HistoryMode.SERVER:
            added = tuple(map(to_stored, (*turn.plan.added, answer)))
            history = HistoryChange(turn.plan.keep, added)
        try:
            saved = await self._records.save(turn.claimed, record, history)
        except ServiceError as error:
            if error.reason != Reason.STORE_UNAVAILABLE:
                raise
            if turn.leased:
                await self._finish(self.releases.release(turn.claimed))
            return failure(STORE_UNAVAILABLE)
        if saved is not None:
            return saved
        if not turn.leased:
            raise _LostError
        return failure(CONFLICT)

    async def _fail(
        self,
        turn: _Turn,
        code: str,
        outcome: FailureOutcome | None,
        error: ModelError | None = None,
        *,
        decided: Decided | None = None,
    ) -> Failed:
        """Record the failure (after the decision `decided`, when the stream sent one) and
        release the lease; nothing else is committed.

        When the store cannot record it, the turn ends with `store_unavailable` instead
        (nothing recorded, so the same turn id may run again) and the lease is given back.
        """
        if error is not None:
            failed = Failed(error.code, error.message, error.retryable)
        else:
            failed = failure(code, None if outcome is None else outcome.route_id)
        finished = failed_turn(
            turn.request,
            turn.plan.user_message_id,
            failed,
            outcome,
            started_at_ms=turn.started_at_ms,
            decided=decided,
        )
        record = turn.claimed.record.evolve(lease=None).with_turn(finished)
        write = self._records.save(turn.claimed, record)
        try:
            if turn.leased:
                await self._finish(write)
            elif await write is None:
                raise _LostError
        except ServiceError as error:
            if error.reason != Reason.STORE_UNAVAILABLE:
                raise
            if turn.leased:
                await self._finish(self.releases.release(turn.claimed))
            return failure(STORE_UNAVAILABLE)
        return failed

    async def _release(self, claimed: Loaded) -> None:
        """Give the lease back after the client went away; the turn may run again."""
        await self.releases.release(claimed)

    async def _release_when_claimed(self, saving: asyncio.Future[Loaded | None]) -> None:
        """Release the lease of a claim that completed after its turn was cancelled."""
        with contextlib.suppress(ServiceError):
            claimed = await saving
            if claimed is not None:
                await self._release(claimed)


def _decided(outcome: RouteOutcome) -> Decided:
    decision = outcome.decision
    return Decided(
        str(decision.kind),
        decision.route_id,
        decision.from_state,
        decision.to_state,
        outcome.replayed,
    )


def _answered(
    decided: Decided, answer: Message, outcome: RouteOutcome, saved: Loaded
) -> tuple[TurnEvent, ...]:
    """The events of a committed route answer, after `started`."""
    done = Completed(answer.id, answer.content, outcome.snapshot, saved.cursor)
    if answer.content:
        return decided, Delta(answer.content), done
    return decided, done


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
