"""Turns a declared route answers (or fails): resolved before any write, committed with one.

Resolving a definition whose routes are all declared as data runs no application code and
never waits. When a route answers the turn (or fails it), nothing can fail between a lease
claim and the commit, so the turn takes no lease: its answer (or failure) is committed with
one compare-and-set on the cursor read with the record, and the cursor grows by one. When
that compare-and-set loses, the record is read again and the turn answers as a claim that
lost would: the recorded outcome when the same turn id finished meanwhile, SESSION_BUSY or
TURN_IN_PROGRESS while a lease is held, CONFLICT otherwise.

A turn planned on the session as this process holds it, without reading it (see
`TurnRunner._from_held`), passes the held bytes (`held`): its compare-and-set then also
requires the stored record to be those bytes. When that one loses (or finds the store
unavailable), nothing was read that could be out of date: the turn runs again from a read,
as any turn, which refuses what a read refuses.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

from agentskit_chat.conversation import FailureOutcome, Message, Role, RouteOutcome
from agentskit_chat.storage import HistoryMode

from ._errors import Reason, ServiceError
from ._history import Plan
from ._limits import Limits, utf8_size
from ._progress import TurnProgress
from ._records import Loaded, Records, now_ms, refuse_if_leased
from ._terminal import OUTPUT_LIMIT, repeat
from ._turn_writes import LostError, Turn, TurnWrites, new_id, route_answered, route_decided
from ._types import Claim, Failed, Started, TurnEvent, TurnRequest


class OneWrite:
    """Answers the turns a declared route resolved, each with one write."""

    def __init__(self, records: Records, writes: TurnWrites, limits: Limits, holder: str) -> None:
        self._records = records
        self._writes = writes
        self._limits = limits
        self._holder = holder

    async def run(
        self,
        request: TurnRequest,
        loaded: Loaded,
        plan: Plan,
        at: int,
        progress: TurnProgress,
        resolved: RouteOutcome | FailureOutcome,
        claimed: Callable[[Claim], None] | None,
        held: bytes | None = None,
    ) -> tuple[TurnEvent, ...] | None:
        """The events of the turn planned on `loaded` and resolved to `resolved` at `at`;
        `claimed` is called once its write committed. None when the write lost: the turn's
        events are then `lost`'s (or, for a turn planned on the `held` bytes of a record it
        did not read, those of the turn run again from a read)."""
        answer_id = new_id("a")
        turn = Turn(
            request, plan, loaded, 0.0, True, progress, answer_id, at, resolved, False, held=held
        )
        writes = self._writes
        writes.entered()
        try:
            answered = await self._once(turn, resolved)
        finally:
            writes.left()
        if answered is None:
            return None
        if claimed is not None:
            client_held = loaded.history_mode == HistoryMode.CLIENT
            claimed(Claim(self._holder, at, client_held, leased=False))
        started = Started(request.operation_name, plan.user_message_id, False, answer_id)
        return (started, *answered)

    async def _once(
        self, turn: Turn, outcome: RouteOutcome | FailureOutcome
    ) -> tuple[TurnEvent, ...] | None:
        """The events after `started` of a turn a declared route answers (or fails), without
        a lease: its one write is the commit. None when that write lost its compare-and-set
        (nothing was written)."""
        writes = self._writes
        try:
            if isinstance(outcome, FailureOutcome):
                return (await writes.fail(turn, outcome.code, outcome),)
            if utf8_size(outcome.response) > self._limits.max_output_bytes:
                return (await writes.fail(turn, OUTPUT_LIMIT, None),)
            event = route_decided(outcome)
            answer = Message(turn.answer_id, Role.ASSISTANT, outcome.response)
            saved = await writes.commit(turn, outcome, event, answer, None)
        except LostError:
            return None
        if isinstance(saved, Failed):
            return (saved,)
        return route_answered(event, answer, outcome, saved)

    async def lost(self, request: TurnRequest) -> AsyncGenerator[TurnEvent, None]:
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
