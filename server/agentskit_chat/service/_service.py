"""The application service: definitions, sessions and turns, independent of any transport."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import AsyncGenerator, Collection
from contextlib import aclosing
from typing import Final

from agentskit_chat.conversation import (
    DEFAULT_CALLBACK_TIMEOUT,
    ChatDefinition,
    InputDigester,
    Message,
    ResponseSealer,
)
from agentskit_chat.models import AdapterRegistry, ModelAdapter
from agentskit_chat.storage import HistoryChange, HistoryMode, Store
from agentskit_chat.storage._turn_events import SignalKind, TurnKey, session_topic

from ._catalog import Catalog, CatalogChanges
from ._errors import Reason, ServiceError, invalid
from ._event_log import MAX_EVENTS
from ._limits import Limits
from ._live_turns import LiveTurns
from ._observer import TurnObserver
from ._page_tokens import PageTokens
from ._published import PUBLISH_LEASE_SECONDS, PublishedRevisions
from ._rate_limits import RateLimits
from ._rates import Rated, RateLimiter
from ._records import Loaded, Records, check_expected_cursor, now_ms, refuse_if_leased
from ._server_tools import ServerToolPort
from ._session_watch import (
    POLL_SECONDS,
    SessionWatch,
    WatchItem,
    WatchSettings,
    shutting_down,
)
from ._tenancy import current_principal
from ._terminal import CANCELLED
from ._turn_bus import TurnBus, event_port, run_name
from ._turn_records import answer_origins, find_turn, finished_view, list_turns
from ._turn_watch import TurnWatch
from ._turn_writes import new_id
from ._turns import TurnRunner
from ._types import (
    CancelOutcome,
    ServedRevision,
    SessionHistory,
    SessionView,
    TurnEvent,
    TurnPage,
    TurnRequest,
    TurnView,
)
from ._watchers import Watchers

CANCEL_WAIT_SECONDS: Final = 5.0
"""How long CancelTurn waits for another process to release the lease of a turn it stops."""


class ChatService:
    """Hosts definitions and runs their sessions over one store and one adapter registry."""

    def __init__(
        self,
        definitions: Catalog,
        store: Store,
        *,
        digest_key: bytes,
        adapters: AdapterRegistry | None = None,
        limits: Limits | None = None,
        holder: str | None = None,
        callback_timeout: float = DEFAULT_CALLBACK_TIMEOUT,
        observer: TurnObserver | None = None,
        rates: RateLimits | None = None,
        watchers: Watchers | None = None,
        publish_lease: float | None = PUBLISH_LEASE_SECONDS,
        server_tools: ServerToolPort | None = None,
    ) -> None:
        """`publish_lease`: how long this process's published revisions count as served
        without a renewal (see `_published`); None neither publishes nor reads them.
        `server_tools` runs the definitions' declared server tools (tool routes fail
        without it)."""
        self.catalog = definitions
        self.rates = RateLimiter(rates)
        self.adapters = adapters or AdapterRegistry()
        self.limits = limits or Limits()
        for definition in definitions.all():
            self.adapters.check(definition.model)
        self._retiring: list[asyncio.Future[None]] = []
        sealer = ResponseSealer(digest_key)
        holder = holder or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._published = (
            None
            if publish_lease is None
            else PublishedRevisions(
                store, holder, self.adapters, lease=publish_lease, server_tools=server_tools
            )
        )
        self._records = Records(store, definitions, sealer=sealer, published=self._published)
        self._page_tokens = PageTokens(digest_key)
        self._names = InputDigester(digest_key)
        self.turns = TurnRunner(
            self._records,
            self.adapters,
            self.limits,
            InputDigester(digest_key),
            holder=holder,
            callback_timeout=callback_timeout,
            observer=observer,
            server_tools=server_tools,
        )
        self.bus = TurnBus(event_port(store), self.turns.holder, self.limits, sealer)
        self.live = LiveTurns(self.limits, self.bus, self.turns.track)
        self.watchers = watchers or Watchers()
        """Open watches of this process (turn watches here, session watches too)."""
        self._watch = TurnWatch(self._records, self.live, self.bus)

    def content_name(self, text: str) -> str:
        """A keyed digest (the deployment's digest key) naming `text` without revealing it:
        a front names a client's messages by their content with it, stably across
        processes and restarts, and never stores the content."""
        return self._names.digest("message-name\x00" + text)

    def replace_definitions(self, catalog: Catalog) -> CatalogChanges:
        """Serve `catalog` from now on; turns in flight finish on the definitions they began.

        Raises CatalogRefusedError (a conversation changed under the same revision) or
        UnknownAdapterError, and then keeps serving the current definitions.
        """
        changes = self.catalog.changes_to(catalog)
        for definition in catalog.every():
            self.adapters.check(definition.model)
        self.catalog = self._records.catalog = catalog
        unused = self.adapters.release_unused(d.model for d in catalog.every())
        if unused:  # Turns begun before the swap may still stream from them.
            self._retiring.append(asyncio.ensure_future(self._retire(unused)))
        if self._published is not None:
            self._published.renew()
        return changes

    async def publish_revisions(self) -> None:
        """Publish the served revisions in the store (now, then renewed while this process
        serves them), so that other processes serve their sessions too."""
        if self._published is not None:
            await self._published.start(lambda: self.catalog)

    async def _retire(self, adapters: list[ModelAdapter]) -> None:
        """Close adapters no definition uses, once no turn begun with them can be running
        (or at once when the service closes)."""
        try:
            await asyncio.sleep(self.limits.turn_timeout)
        finally:
            for adapter in adapters:
                await adapter.close()

    def definitions(self) -> list[ChatDefinition]:
        """The newest served revision of every hosted definition the caller may use,
        ordered by id."""
        principal = current_principal()
        return [d for d in self.catalog.all() if principal.may_use(d.id)]

    def definition(self, definition_id: str, revision: int | None = None) -> ChatDefinition:
        """One hosted definition, its newest served revision or `revision`; NOT_FOUND when
        unknown or not the caller's to use, REVISION_MISMATCH when the revision is not
        served."""
        if not definition_id:
            raise invalid("definition_id", "definition_id is required")
        if not current_principal().may_use(definition_id):
            raise ServiceError(Reason.DEFINITION_NOT_FOUND, "no definition has this id")
        if revision is not None and (found := self._records.definition_of(definition_id, revision)):
            return found
        return self.catalog.get(definition_id, revision)

    async def revision(self, definition_id: str, revision: int) -> ChatDefinition:
        """Like `definition`, also reading a revision another process publishes."""
        self.definition(definition_id)
        if self._published is not None and self.catalog.find(definition_id, revision) is None:
            await self._published.fetch(definition_id, revision)
        return self.definition(definition_id, revision)

    def served_revisions(self, definition_id: str) -> list[ServedRevision]:
        """The served revisions of a definition the caller may use, oldest first, with
        their weights for new sessions and the revisions they take sessions over from."""
        self.definition(definition_id)
        weights = dict(self.catalog.weights(definition_id))
        return [
            ServedRevision(d.revision, weights[d.revision], tuple(sorted(d.migrations)))
            for d in self.catalog.revisions(definition_id)
        ]

    async def create_session(
        self,
        definition_id: str,
        session_id: str | None,
        mode: HistoryMode,
        revision: int | None = None,
    ) -> SessionView:
        """A new session at the definition's initial state, of `revision` when given (it
        must be served), else of the revision the rollout gives its id.

        A reload that retires the chosen revision while the session is being stored would
        leave it stale from birth: it is then stored again at a served revision.
        """
        self.rates.check(Rated.SESSIONS)
        self.definition(definition_id, revision)  # NOT_FOUND before an id is made up
        if session_id is None:
            session_id = new_id("s")
        else:
            self.limits.check_id("session_id", session_id)
        definition = self._revision_for(definition_id, session_id, revision)
        loaded = await self._records.create(definition, session_id, mode)
        if self.catalog.find(definition_id, definition.revision) is definition:
            return _view(loaded)
        await self._records.delete(session_id)
        definition = self._revision_for(definition_id, session_id, revision)
        return _view(await self._records.create(definition, session_id, mode))

    def _revision_for(
        self, definition_id: str, session_id: str, revision: int | None
    ) -> ChatDefinition:
        if revision is not None:
            return self.definition(definition_id, revision)
        self.definition(definition_id)  # NOT_FOUND when a reload removed it
        return self.catalog.for_new_session(definition_id, session_id)

    async def get_session(self, session_id: str) -> SessionHistory:
        """The session and, for server-held history, its messages with their origins."""
        session_id = self.limits.check_id("session_id", session_id)
        loaded, messages = await self._records.load_with_messages(session_id)
        return _history(loaded, messages)

    async def delete_session(self, session_id: str, expected_cursor: int | None = None) -> None:
        """Remove the session and its history; NOT_FOUND when unknown, CONFLICT when its
        cursor is not `expected_cursor` (when given)."""
        session_id = self.limits.check_id("session_id", session_id)
        if not await self._records.delete(session_id, expected_cursor):
            raise ServiceError(Reason.SESSION_NOT_FOUND, "no session has this id")

    async def get_turn(self, session_id: str, turn_id: str) -> TurnView:
        """The retained turn `turn_id` (running, completed or failed); runs nothing."""
        loaded = await self._records.load(self.limits.check_id("session_id", session_id))
        return find_turn(loaded.record, self.limits.check_id("turn_id", turn_id), now_ms())

    async def list_turns(
        self, session_id: str, page_size: int = 0, page_token: str | None = None
    ) -> TurnPage:
        """A page of the session's retained turns, newest first (see `list_turns`)."""
        loaded = await self._records.load(self.limits.check_id("session_id", session_id))
        record = loaded.record
        tokens = self._page_tokens.scope(loaded.tenant, record.session_id, loaded.incarnation)
        return list_turns(record, page_size, page_token, now_ms(), tokens)

    async def truncate_history(
        self,
        session_id: str,
        last_kept_message_id: str | None,
        expected_cursor: int | None = None,
    ) -> SessionHistory:
        """Drop the messages after `last_kept_message_id` (all when None); no transition."""
        session_id = self.limits.check_id("session_id", session_id)
        loaded, messages = await self._records.load_with_messages(session_id)
        check_expected_cursor(loaded, expected_cursor)
        if loaded.history_mode != HistoryMode.SERVER:
            raise ServiceError(
                Reason.HISTORY_MISMATCH,
                "truncation is for server-held history; a client-held history is truncated by "
                "the client",
                history_mode=str(loaded.history_mode),
            )
        refuse_if_leased(loaded, now_ms())
        keep = 0
        if last_kept_message_id is not None:
            ids = [m.id for m in messages]
            if last_kept_message_id not in ids:
                raise invalid("last_kept_message_id", "last_kept_message_id is not in the history")
            keep = ids.index(last_kept_message_id) + 1
        saved = await self._records.save(
            loaded, loaded.record.evolve(lease=None), HistoryChange(keep)
        )
        if saved is None:
            raise ServiceError(Reason.CONFLICT, "another writer changed the session; retry")
        return _history(saved, messages[:keep])

    def run_turn(self, request: TurnRequest) -> AsyncGenerator[TurnEvent, None]:
        """The events of one turn; see `stream_turn`."""
        return _events(self.stream_turn(request))

    def stream_turn(self, request: TurnRequest) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """Start one turn (see TurnRunner.run; once it holds the lease it runs in a task of
        its own, see LiveTurns): (sequence, event) for each of its events, numbered by the
        turn from 1. Closing the stream before its end cancels the turn (the close returns
        once the turn ended) unless the request's `on_disconnect` is CONTINUE: the turn then
        runs to its end and commits.

        The turn fails with `deadline_exceeded` after `limits.turn_timeout`. A shorter
        deadline of the client's ends the call instead, like a cancellation.
        """
        self.rates.check(Rated.TURNS)
        return self.live.start(request, lambda claimed: self.turns.run(request, claimed))

    async def watch_turn(
        self, session_id: str, turn_id: str, after_sequence: int = 0
    ) -> AsyncGenerator[tuple[int, TurnEvent], None]:
        """(sequence, event) for each event of the turn after `after_sequence`, as the turn
        numbered them: those missed, then live ones, then the terminal event; on whatever
        process runs the turn. A finished turn whose events are no longer kept yields its
        recorded outcome (as a repeat, numbered from `after_sequence` + 1); a run that ended
        without recording anything (its process died) yields the `interrupted` failure.

        TURN_NOT_FOUND when the session retains no such turn; INVALID_ARGUMENT when
        `after_sequence` is past the turn's last event; LIMIT_EXCEEDED past the watcher
        bounds. Watching never starts, changes or extends a turn.
        """
        session_id = self.limits.check_id("session_id", session_id)
        turn_id = self.limits.check_id("turn_id", turn_id)
        if after_sequence < 0:
            raise invalid("after_sequence", "after_sequence must not be negative")
        if after_sequence > MAX_EVENTS + 1:  # past any turn's last event
            raise invalid("after_sequence", "after_sequence is past the turn's last event")
        tenant = current_principal().tenant
        with self.watchers.watching(tenant, session_id):
            loaded = await self._records.load(session_id)
            self.bus.sweep()
            async with aclosing(self._watch.events(loaded, turn_id, after_sequence)) as events:
                async for item in events:
                    yield item

    async def cancel_turn(self, session_id: str, turn_id: str) -> CancelOutcome:
        """Stop the running turn `turn_id` as a disconnect of a cancelling stream does:
        nothing committed, the model stream closed, the lease released (before this
        returns when the turn runs here; a turn another process runs is signalled, and this
        waits a bounded time for its lease to go). Its streams end with the `cancelled`
        failure. A turn not running changes nothing: `cancelled` False, with the retained
        turn when there is one."""
        session_id = self.limits.check_id("session_id", session_id)
        turn_id = self.limits.check_id("turn_id", turn_id)
        loaded = await self._records.load(session_id)
        live = self.live.running((loaded.tenant, session_id, turn_id))
        if live is not None:
            if await self.live.stop(live, CANCELLED):
                return CancelOutcome(True)
            loaded = await self._records.load(session_id)  # it ended first: as recorded
        lease = loaded.record.lease
        if (
            lease is not None
            and lease.turn_id == turn_id
            and lease.expires_at_ms > now_ms()
            and lease.holder != self.turns.holder
            and loaded.record.find_turn(turn_id) is None
        ):
            name = run_name(turn_id, lease.started_at_ms or 0)
            key = TurnKey(loaded.tenant, session_id, name)
            await self.bus.signal(lease.holder, SignalKind.CANCEL, key)
            loaded = await self._lease_gone(loaded, turn_id, lease.started_at_ms)
            if loaded.record.find_turn(turn_id) is None:
                still = loaded.record.lease
                if still is None or (still.turn_id, still.started_at_ms) != (
                    turn_id,
                    lease.started_at_ms,
                ):
                    return CancelOutcome(True)  # stopped, recording nothing
                # Its holder did not stop it (gone, or too slow): it may run on.
                refuse_if_leased(loaded, now_ms(), turn_id)
                return CancelOutcome(False)  # its lease lapsed: its holder is gone
        finished = loaded.record.find_turn(turn_id)
        return CancelOutcome(False, None if finished is None else finished_view(finished))

    async def _lease_gone(self, loaded: Loaded, turn_id: str, started_at: int | None) -> Loaded:
        """Wait (at most CANCEL_WAIT_SECONDS) until the run of `turn_id` started at
        `started_at` no longer holds the session's lease; the record then (or at the end
        of the wait)."""
        session_id = loaded.record.session_id
        loop = asyncio.get_running_loop()
        until = loop.time() + CANCEL_WAIT_SECONDS
        port = self.bus.port
        topic = session_topic(current_principal().tenant, session_id)
        while loop.time() < until:
            if port is None:
                await asyncio.sleep(0.1)
            else:
                await port.wait((topic,), max(0.0, min(1.0, until - loop.time())))
            loaded = await self._records.load(session_id)
            lease = loaded.record.lease
            if lease is None or lease.turn_id != turn_id or lease.started_at_ms != started_at:
                break
        return loaded

    watch_settings: WatchSettings = WatchSettings()
    """The session watches' heartbeat and behind bound (set before serving)."""

    async def watch_session(
        self, session_id: str, after_cursor: int | None = None
    ) -> AsyncGenerator[WatchItem, None]:
        """The session now, then, as they happen on any process of the deployment: the
        events of each turn it runs (whoever started it), the session after every stored
        change, and a heartbeat after `watch_settings.heartbeat` seconds without either;
        see `SessionWatch`. `after_cursor` (the last cursor the caller received) changes
        nothing the server sends: a first session past it tells the caller it missed
        changes and reloads the history.

        SESSION_NOT_FOUND when unknown or once deleted; LIMIT_EXCEEDED past the watcher
        bounds (a session watch is one watcher); WATCH_BEHIND when the caller falls behind.
        """
        session_id = self.limits.check_id("session_id", session_id)
        if after_cursor is not None and after_cursor < 0:
            raise invalid("after_cursor", "after_cursor must not be negative")
        if self.turns.draining:
            raise shutting_down()
        tenant = current_principal().tenant
        with self.watchers.watching(tenant, session_id):
            loaded = await self._records.load(session_id)
            port = self.bus.port
            self.bus.sweep()

            async def load() -> Loaded:
                return await self._records.load(session_id)

            async def wait(topics: Collection[str], timeout: float) -> None:
                if port is None:
                    await asyncio.sleep(min(timeout, POLL_SECONDS))
                else:
                    await port.wait(topics, timeout)

            watch = SessionWatch(
                loaded,
                load=load,
                view=_view,
                turn_events=self._watch.events,
                wait=wait,
                topic=session_topic(loaded.tenant, session_id),
                settings=self.watch_settings,
                follow_seconds=self.limits.lease_ttl + self.watch_settings.behind,
                draining=lambda: self.turns.draining,
            )
            async with aclosing(watch.items()) as items:
                async for item in items:
                    yield item

    def begin_drain(self) -> None:
        """Refuse new turns from now on; turns in flight continue (continued ones too)."""
        self.turns.draining = True
        self.live.draining = True

    async def close(self) -> None:
        """Close the adapters (retired ones too) and the store; lease releases still being
        retried stop (those leases lapse)."""
        await self.live.interrupt_all()
        with contextlib.suppress(TimeoutError):  # The releases' own retries are bounded.
            await asyncio.wait_for(self.turns.wait_idle(), CANCEL_WAIT_SECONDS)
        await self.bus.close()
        if self._published is not None:
            await self._published.close()
        for retiring in self._retiring:
            retiring.cancel()
        await asyncio.gather(*self._retiring, return_exceptions=True)
        await self.adapters.close()
        await self.turns.releases.close()
        await self._records.store.close()


def _history(loaded: Loaded, messages: tuple[Message, ...]) -> SessionHistory:
    initial = loaded.definition.conversation.initial
    origins = answer_origins(loaded.record, initial, messages)
    return SessionHistory(_view(loaded), messages, origins)


def _view(loaded: Loaded) -> SessionView:
    record = loaded.record
    return SessionView(
        session_id=record.session_id,
        definition_id=record.definition_id,
        revision=record.revision,
        history_mode=loaded.history_mode,
        snapshot=loaded.definition.snapshot(record.state),
        cursor=record.cursor,
        blocked=record.blocked,
    )


async def _events(
    stream: AsyncGenerator[tuple[int, TurnEvent], None],
) -> AsyncGenerator[TurnEvent, None]:
    async with aclosing(stream) as events:
        async for _, event in events:
            yield event
