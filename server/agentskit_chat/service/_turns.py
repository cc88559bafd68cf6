"""The turn lifecycle: claim the lease, resolve, stream, commit or release.

A turn that may wait on anything (application code, a model call) first claims the
session's expiring lease by compare-and-set, before any callback, model call or
transition. From then on it ends in exactly one of: a committed answer, a recorded failure
that commits nothing else, or (when the client goes away) a released lease.

A turn of a definition whose routes are all declared as data is resolved before any write:
when a route answers it (or fails it), the turn takes no lease and is committed with one
write (`_one_write`). When this process holds the session (it wrote or read it last), such
a turn reads nothing: its write also requires the stored record to be the held bytes, and
only when that write loses (or the turn would do anything but commit) does it run from a
read. Only when no route answers (the turn goes to the model) does it claim
the lease, and then proceeds with the outcome already resolved. The model's part of a turn,
with its server tool rounds, is `_agentic`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from contextlib import aclosing
from dataclasses import replace
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
    resolve,
)
from agentskit_chat.models import (
    AdapterRegistry,
)
from agentskit_chat.storage import HistoryMode

from ._agentic import Agentic
from ._cache import Entry
from ._errors import Reason, ServiceError
from ._held_results import with_held_results
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
    interrupted_folded,
    repeat,
)
from ._turn_writes import Turn, TurnWrites, new_id, route_answered, route_decided
from ._types import (
    Claim,
    Completed,
    Dispatch,
    Failed,
    Started,
    TurnEvent,
    TurnRequest,
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
        self._limits = limits
        self._digester = digester
        self._holder = holder
        self._callback_timeout = callback_timeout
        self._observer: TurnObserver = observer or NoObserver()
        self._turn_started = getattr(self._observer, "turn_started", None)
        self._writes = TurnWrites(records, limits, holder)
        self._agentic = Agentic(adapters, limits, self._writes, server_tools, digester.digest)
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
        held = self._records.held(request.session_id)
        if held is not None:
            answered = await self._from_held(request, held, progress, claimed)
            if answered is not None:
                for event in answered:
                    yield event
                return
        # Otherwise the stored record is read, even when this process holds it: the bytes
        # are compared with the cached ones (no decoding when they match), so a record
        # changed or damaged behind the cache is noticed instead of being written over.
        # The history is read with the record, in one snapshot: a repeat and a claim both
        # use it, and nothing committed since the record was read can make it disagree.
        loaded, history = await self._records.load_with_messages(request.session_id)
        progress.definition = loaded.definition
        _check_mode(loaded.history_mode, request)
        # A turn whose process stopped while a server tool ran is interrupted, written or not.
        finished = interrupted_folded(loaded.record, now_ms()).find_turn(request.turn_id)
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

    async def _from_held(
        self,
        request: TurnRequest,
        held: Entry,
        progress: TurnProgress,
        claimed: Callable[[Claim], None] | None,
    ) -> tuple[TurnEvent, ...] | None:
        """The events of a turn a declared route answers (or fails) on the session as this
        process holds it, without reading the store: its one write also requires the
        stored record to be the held bytes. None, having written nothing, when the turn
        would do anything else (repeat a finished turn, refuse, meet a lease, migrate, go
        to the model) or its write lost (or found the store unavailable): `_run` then runs
        it from a read, as any turn."""
        loaded = held.loaded
        record = loaded.record
        if (
            not _declarative(loaded.definition)
            or isinstance(request.operation, Dispatch)
            != (loaded.history_mode == HistoryMode.CLIENT)
            or record.find_turn(request.turn_id) is not None
            or request.expected_cursor not in (None, loaded.cursor)
            or self._records.catalog.migration_for(loaded.definition, record.session_id)
        ):
            return None
        at = now_ms()
        if record.lease is not None and record.lease.expires_at_ms > at:
            return None
        history = held.messages or ()
        try:
            plan = plan_turn(
                request.operation,
                history,
                self._limits,
                new_id,
                record,
                loaded.definition.approvals,
            )
        except ServiceError:
            return None
        resolved = await self._resolve(loaded, plan, request.turn_id)  # Never waits.
        if isinstance(resolved, DelegateOutcome):
            return None
        progress.definition = loaded.definition
        one = self._one_write
        return await one.run(request, loaded, plan, at, progress, resolved, claimed, held.data)

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
        client_held = turn.claimed.history_mode != HistoryMode.SERVER
        if client_held and turn.plan.tools is not None and isinstance(outcome, DelegateOutcome):
            messages = with_held_results(turn.claimed.record, outcome.messages)
            outcome = replace(outcome, messages=messages)  # the server's results it kept
        if isinstance(outcome, FailureOutcome):
            yield await self._writes.fail(turn, outcome.code, outcome)
        elif isinstance(outcome, RouteOutcome):
            async for event in self._answer(turn, outcome):
                yield event
        elif turn.plan.tools is not None and turn.plan.tools.waiting:
            async for event in self._agentic.run_approved(turn, outcome):
                yield event
        else:
            async with aclosing(self._agentic.delegate(turn, outcome)) as events:
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
            tools=None if port is None else route_tools(port, loaded.definition, turn_id),
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
