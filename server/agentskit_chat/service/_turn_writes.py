"""The writes of a turn (its lease claim, its commit or its recorded failure, its lease's
release), and the count of turns in flight that shutdown waits for.

A turn holding the session's lease ends with a commit or a recorded failure, or gives the
lease back; a write it started is run to its end even when the turn is cancelled meanwhile.
A turn without a lease (see `_one_write`) has its commit (or failure) as its only write:
when that loses its compare-and-set, `LostError` says so and nothing was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import Any

from agentskit_chat.conversation import (
    DelegateOutcome,
    FailureOutcome,
    Lease,
    Message,
    Outcome,
    PendingCall,
    RecordedRounds,
    RouteOutcome,
)
from agentskit_chat.models import ModelError
from agentskit_chat.storage import HistoryChange, HistoryMode

from ._errors import Reason, ServiceError
from ._held_results import held_results
from ._history import Plan
from ._limits import Limits
from ._progress import TurnProgress
from ._records import Loaded, Records, now_ms, to_stored
from ._releases import Releases
from ._terminal import (
    CONFLICT,
    STORE_UNAVAILABLE,
    completed_turn,
    failed_turn,
    failure,
    interrupted_folded,
)
from ._types import Completed, Decided, Delta, Failed, TurnEvent, TurnRequest, Usage


def new_answer(answer: Message | None) -> str:
    """The id of a committed answer."""
    if answer is None:
        raise ValueError("a turn commits an answer unless it answers tool calls")
    return answer.id


def new_id(prefix: str) -> str:
    """A fresh message id such as `u-1f2e3d4c5b6a7988`."""
    return f"{prefix}-{secrets.token_hex(8)}"


@dataclass(slots=True)
class Turn:
    """One turn past its checks, as planned on the record it was read with."""

    request: TurnRequest
    plan: Plan
    claimed: Loaded
    """The record the turn holds: its claim, or its lease's latest write (`mark_running`)."""
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
    rounds: RecordedRounds | None = None
    """The server tool rounds the turn completed so far: its record keeps them when it
    fails, so that a retry resumes after them (see `_agentic`)."""
    held: bytes | None = None
    """The stored bytes `claimed` was held as, when the turn did not read the record (a turn
    without a lease, planned on what this process holds): its write requires them."""


class LostError(Exception):
    """The one write of a turn without a lease lost its compare-and-set (or, for a turn
    planned on held bytes, found the store unavailable: the read that follows answers as
    it would have before the write)."""


class TurnWrites:
    """Claims leases for turns, commits and records them; counts the turns in flight so
    shutdown can wait for them."""

    def __init__(self, records: Records, limits: Limits, holder: str) -> None:
        self._records = records
        self._limits = limits
        self._holder = holder
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._cleanups: set[asyncio.Task[object]] = set()
        self.releases = Releases(records)
        """Lease releases the store refused, retried in the background."""

    @property
    def in_flight(self) -> int:
        """Turns in flight in this process."""
        return self._in_flight

    def entered(self) -> None:
        """A turn is in flight until `left`."""
        self._in_flight += 1
        self._idle.clear()

    def left(self) -> None:
        """A turn `entered` is over."""
        self._in_flight -= 1
        if self._in_flight == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        """See TurnRunner.wait_idle."""
        await self._idle.wait()
        while self._cleanups:
            await asyncio.wait(set(self._cleanups))

    async def finish(self, write: Coroutine[Any, Any, object]) -> None:
        """Run a closing write to the end even when the turn is cancelled meanwhile."""
        await asyncio.shield(self.track(write))

    def track(self, write: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        """Run `write` as a task that `wait_idle` waits for."""
        task: asyncio.Task[object] = asyncio.ensure_future(write)
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)
        return task

    async def claim(
        self,
        request: TurnRequest,
        loaded: Loaded,
        plan: Plan,
        at: int,
        progress: TurnProgress,
        declarative: bool,
        resolved: Outcome | None,
    ) -> Turn | None:
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
        record = interrupted_folded(loaded.record, at)
        saving = asyncio.ensure_future(self._records.save(loaded, record.evolve(lease=lease)))
        try:
            claimed = await asyncio.shield(saving)
        except asyncio.CancelledError:
            self.track(self._release_when_claimed(saving))  # The claim may still land.
            raise
        if claimed is None:
            return None
        deadline = asyncio.get_running_loop().time() + self._limits.turn_timeout
        progress.definition = claimed.definition
        answer_id = new_id("a")
        return Turn(
            request, plan, claimed, deadline, declarative, progress, answer_id, at, resolved
        )

    async def mark_running(self, turn: Turn, calls: tuple[PendingCall, ...]) -> Failed | None:
        """Write the server tool `calls` about to run into the turn's lease, so that a
        process that dies while they run leaves them named; the failed event (recorded)
        when the write fails or another writer won."""
        lease = turn.claimed.record.lease
        assert lease is not None
        assert turn.leased
        running = replace(lease, running=calls, rounds=turn.rounds)
        record = turn.claimed.record.evolve(lease=running)
        try:
            saved = await self._records.save(turn.claimed, record)
        except ServiceError as error:
            if error.reason != Reason.STORE_UNAVAILABLE:
                raise
            await self.finish(self.releases.release(turn.claimed))
            return failure(STORE_UNAVAILABLE)
        if saved is None:
            return failure(CONFLICT)
        turn.claimed = saved
        return None

    async def _release_when_claimed(self, saving: asyncio.Future[Loaded | None]) -> None:
        """Release the lease of a claim that completed after its turn was cancelled."""
        with contextlib.suppress(ServiceError):
            claimed = await saving
            if claimed is not None:
                await self.releases.release(claimed)

    async def commit(
        self,
        turn: Turn,
        outcome: RouteOutcome | DelegateOutcome,
        decided: Decided,
        answer: Message | None,
        usage: Usage | None,
        pending: tuple[PendingCall, ...] = (),
        *,
        before: tuple[Message, ...] = (),
        after: tuple[Message, ...] = (),
    ) -> Loaded | Failed:
        """Store the answer (None for a turn that only answers tool calls and waits again);
        the failed event instead when another writer won or the store failed (then nothing
        was committed and the lease is given back). LostError when the turn holds no lease
        and another writer won. `pending`: the tool calls the answer waits on; `before`
        and `after`: the server tool rounds of the turn stored before the answer, and the
        results of its own server tool calls after it (server-held histories; a client-held
        one's record keeps `after`, see `_held_results`)."""
        tools = turn.plan.tools
        answer_id = tools.answer_id if answer is None and tools is not None else new_answer(answer)
        finished = completed_turn(
            turn.request,
            turn.plan.user_message_id,
            decided,
            answer_id,
            started_at_ms=turn.started_at_ms,
            usage=usage,
            pending=pending,
        )
        if after and answer is not None and turn.claimed.history_mode != HistoryMode.SERVER:
            finished = replace(finished, rounds=held_results(answer, after))
        current = turn.claimed.record
        if not turn.leased:  # one write: it replaces a lapsed lease too
            current = interrupted_folded(current, now_ms())
        record = current.evolve(conversation=outcome.state, lease=None).with_turn(finished)
        history = None
        if turn.claimed.history_mode == HistoryMode.SERVER:
            answered = (
                turn.plan.added if answer is None else (*turn.plan.added, *before, answer, *after)
            )
            added = tuple(map(to_stored, answered))
            history = HistoryChange(turn.plan.keep, added)
        try:
            saved = await self._records.save(turn.claimed, record, history, held=turn.held)
        except ServiceError as error:
            if error.reason != Reason.STORE_UNAVAILABLE:
                raise
            if turn.held is not None:
                raise LostError from None  # read first, as a turn that read would have
            if turn.leased:
                await self.finish(self.releases.release(turn.claimed))
            return failure(STORE_UNAVAILABLE)
        if saved is not None:
            return saved
        if not turn.leased:
            raise LostError
        return failure(CONFLICT)

    async def fail(
        self,
        turn: Turn,
        code: str,
        outcome: FailureOutcome | None,
        error: ModelError | None = None,
        *,
        decided: Decided | None = None,
        unknown: tuple[PendingCall, ...] = (),
    ) -> Failed:
        """Record the failure (after the decision `decided`, when the stream sent one) and
        release the lease; nothing else is committed. LostError when the turn holds no
        lease and another writer won.

        When the store cannot record it, the turn ends with `store_unavailable` instead
        (nothing recorded, so the same turn id may run again) and the lease is given back.
        `unknown`: server tool calls stopped while they ran (their outcome is unknown).
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
            rounds=turn.rounds,
            unknown=unknown,
        )
        current = turn.claimed.record
        if not turn.leased:
            current = interrupted_folded(current, now_ms())
        record = current.evolve(lease=None).with_turn(finished)
        write = self._records.save(turn.claimed, record, held=turn.held)
        try:
            if turn.leased:
                await self.finish(write)
            elif await write is None:
                raise LostError
        except ServiceError as error:
            if error.reason != Reason.STORE_UNAVAILABLE:
                raise
            if turn.held is not None:
                raise LostError from None  # read first, as a turn that read would have
            if turn.leased:
                await self.finish(self.releases.release(turn.claimed))
            return failure(STORE_UNAVAILABLE)
        return failed


def route_decided(outcome: RouteOutcome) -> Decided:
    """The decided event of a route's answer."""
    decision = outcome.decision
    return Decided(
        str(decision.kind),
        decision.route_id,
        decision.from_state,
        decision.to_state,
        outcome.replayed,
    )


def route_answered(
    decided: Decided, answer: Message, outcome: RouteOutcome, saved: Loaded
) -> tuple[TurnEvent, ...]:
    """The events of a committed route answer, after `started`."""
    done = Completed(answer.id, answer.content, outcome.snapshot, saved.cursor)
    if answer.content:
        return decided, Delta(answer.content), done
    return decided, done
