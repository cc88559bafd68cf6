"""The asynchronous chat service client."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, Iterable, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import Any, Self, TypeAlias, TypeVar

import grpc
import grpc.aio

from agentskit.chat.v1 import chat_pb2, chat_pb2_grpc

from . import _convert
from ._connect import TLSConfig, bearer, open_channel
from ._errors import from_rpc_error
from ._reattach import TURN_IN_PROGRESS, ReattachPolicy, breaks_stream
from ._tools import ToolApproval, ToolDeclaration, ToolResult, ToolResults, TurnTools
from ._types import (
    CancelTurnResponse,
    Definition,
    DisconnectMode,
    Dispatch,
    Edit,
    HistoryMode,
    Message,
    Regenerate,
    Retry,
    Session,
    SessionHistory,
    Submit,
    TextDelta,
    TurnCompleted,
    TurnDecision,
    TurnEvent,
    TurnFailed,
    TurnOperation,
    TurnPage,
    TurnRecord,
    TurnResult,
    TurnStarted,
    WatchItem,
)

__all__ = ["ChatClient", "Metadata", "new_turn_id"]

Metadata: TypeAlias = Sequence[tuple[str, str | bytes]]
"""gRPC metadata: ``(key, value)`` pairs; keys ending in ``-bin`` take bytes."""

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


def new_turn_id() -> str:
    """Return a fresh turn id (a random UUID4 as 32 hex digits)."""
    return uuid.uuid4().hex


class ChatClient:
    """An asynchronous client of the AgentsKit Chat service.

    Create it from a target such as ``"127.0.0.1:50051"`` (a channel is opened and owned by
    the client: plaintext, or TLS with ``tls``) or from an existing ``grpc.aio.Channel``
    (which stays owned by the caller and is not closed by ``close()``). Use it as an async
    context manager or call ``close()`` when done.

    Every method raises ``ChatError`` when the call fails.

    Args:
        target: A ``host:port`` target or a ``grpc.aio.Channel``.
        timeout: Default deadline in seconds of every call, including a whole turn stream;
            ``None`` means no deadline.
        metadata: Metadata sent with every call, before any per-call metadata.
        tls: ``True`` for TLS verified against the system's roots, or a ``TLSConfig`` with
            roots and a client certificate; plaintext when ``False``. Only with a target.
        token: Bearer token sent as ``authorization`` metadata with every call.
        reattach: How a continued turn's stream that breaks is followed again (see
            ``stream_turn``); 8 attempts with a backoff of 0.1 s doubling to 2 s by default.
    """

    def __init__(
        self,
        target: str | grpc.aio.Channel,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        tls: bool | TLSConfig = False,
        token: str | None = None,
        reattach: ReattachPolicy | None = None,
    ) -> None:
        """Create a client; see the class documentation."""
        if token is not None:
            metadata = (bearer(token), *(metadata or ()))
        if isinstance(target, str):
            self._channel = open_channel(target, tls)
            self._owns_channel = True
        elif tls is not False:
            raise ValueError("tls applies to a target; configure a given channel yourself")
        else:
            self._channel = target
            self._owns_channel = False
        self._stub = chat_pb2_grpc.ChatServiceStub(self._channel)
        self._timeout = timeout
        self._metadata: tuple[tuple[str, str | bytes], ...] = tuple(metadata or ())
        self._closed = False
        self._reattach = reattach or ReattachPolicy()

    @property
    def channel(self) -> grpc.aio.Channel:
        """The channel the client calls through."""
        return self._channel

    async def close(self) -> None:
        """Close the channel if the client owns it; closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> Self:
        """Return the client itself."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the client."""
        await self.close()

    def _call_options(
        self, timeout: float | None, metadata: Metadata | None
    ) -> tuple[float | None, tuple[tuple[str, str | bytes], ...] | None]:
        merged = self._metadata + tuple(metadata or ())
        return (self._timeout if timeout is None else timeout), (merged or None)

    async def _unary(
        self,
        method: grpc.aio.UnaryUnaryMultiCallable[_Request, _Response],
        request: _Request,
        timeout: float | None,
        metadata: Metadata | None,
    ) -> _Response:
        call_timeout, call_metadata = self._call_options(timeout, metadata)
        try:
            return await method(request, timeout=call_timeout, metadata=call_metadata)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from error

    async def list_definitions(
        self, *, timeout: float | None = None, metadata: Metadata | None = None
    ) -> list[Definition]:
        """Return every chat definition the server hosts, ordered by id."""
        response = await self._unary(
            self._stub.ListDefinitions, chat_pb2.ListDefinitionsRequest(), timeout, metadata
        )
        return [_convert.definition_from_pb(definition) for definition in response.definitions]

    async def get_definition(
        self,
        definition_id: str,
        *,
        revision: int | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> Definition:
        """Return one chat definition by id.

        Args:
            definition_id: Id of the definition.
            revision: A served revision to describe; the newest served one when ``None``.
                A revision the server does not serve raises ``ChatError``
                ``FAILED_PRECONDITION`` with reason ``ERROR_REASON_REVISION_MISMATCH``.
            timeout: Deadline in seconds; the client default when ``None``.
            metadata: Extra metadata for this call.
        """
        response = await self._unary(
            self._stub.GetDefinition,
            chat_pb2.GetDefinitionRequest(definition_id=definition_id, revision=revision),
            timeout,
            metadata,
        )
        return _convert.definition_from_pb(response.definition)

    async def create_session(
        self,
        definition_id: str,
        *,
        session_id: str | None = None,
        history_mode: HistoryMode = HistoryMode.SERVER,
        revision: int | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> Session:
        """Start a session of a definition at its initial state.

        Args:
            definition_id: Id of the definition to run.
            session_id: Session id chosen by the client; the server chooses one when ``None``.
            history_mode: Who keeps the messages.
            revision: Pins the session to this served revision; when ``None``, the server's
                rollout picks one by the session id (see ``Definition.served_revisions``).
                A revision the server does not serve raises ``ChatError``
                ``FAILED_PRECONDITION`` with reason ``ERROR_REASON_REVISION_MISMATCH`` and
                the revision in ``metadata["definition_revision"]``.
            timeout: Deadline in seconds; the client default when ``None``.
            metadata: Extra metadata for this call.
        """
        response = await self._unary(
            self._stub.CreateSession,
            chat_pb2.CreateSessionRequest(
                definition_id=definition_id,
                session_id=session_id or "",
                history_mode=_convert.history_mode_to_pb(history_mode),
                definition_revision=revision,
            ),
            timeout,
            metadata,
        )
        return _convert.session_from_pb(response.session)

    async def get_session(
        self,
        session_id: str,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> SessionHistory:
        """Return a session and, for server-held history, its retained messages."""
        response = await self._unary(
            self._stub.GetSession,
            chat_pb2.GetSessionRequest(session_id=session_id),
            timeout,
            metadata,
        )
        return _convert.session_history_from_pb(response)

    async def delete_session(
        self,
        session_id: str,
        *,
        expected_cursor: int | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> None:
        """Remove a session and its stored history.

        With ``expected_cursor``, only while the session cursor still equals it; otherwise
        ``ChatError`` ``ABORTED`` with reason ``ERROR_REASON_CONFLICT`` and the current
        cursor in ``metadata["cursor"]``, and nothing changes.
        """
        await self._unary(
            self._stub.DeleteSession,
            chat_pb2.DeleteSessionRequest(session_id=session_id, expected_cursor=expected_cursor),
            timeout,
            metadata,
        )

    async def truncate_history(
        self,
        session_id: str,
        last_kept_message_id: str | None = None,
        *,
        expected_cursor: int | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> SessionHistory:
        """Drop the newest messages of a server-held history without running a turn.

        Every message after ``last_kept_message_id`` is dropped; ``None`` drops every message.
        The session state is unchanged until the next turn reconciles the history. With
        ``expected_cursor``, only while the session cursor still equals it (see
        ``delete_session``).
        """
        response = await self._unary(
            self._stub.TruncateHistory,
            chat_pb2.TruncateHistoryRequest(
                session_id=session_id,
                last_kept_message_id=last_kept_message_id or "",
                expected_cursor=expected_cursor,
            ),
            timeout,
            metadata,
        )
        return _convert.session_history_from_pb(response)

    async def get_turn(
        self,
        session_id: str,
        turn_id: str,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> TurnRecord:
        """Return the status of a turn id the session retains: running, completed or failed.

        Runs nothing. A client that lost a turn's stream learns from it whether the turn
        finished. Raises ``ChatError`` ``NOT_FOUND`` (``ERROR_REASON_TURN_NOT_FOUND``) for a
        turn id the session does not retain (never started, cancelled, or too old).
        """
        response = await self._unary(
            self._stub.GetTurn,
            chat_pb2.GetTurnRequest(session_id=session_id, turn_id=turn_id),
            timeout,
            metadata,
        )
        return _convert.turn_record_from_pb(response.turn)

    async def list_turns(
        self,
        session_id: str,
        *,
        page_size: int = 0,
        page_token: str | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> TurnPage:
        """Return one page of the session's retained turns, newest first.

        Args:
            session_id: The session.
            page_size: At most this many turns; the server's default (20) when 0, at most
                100.
            page_token: ``next_page_token`` of the previous page of the same session.
            timeout: Deadline in seconds; the client default when ``None``.
            metadata: Extra metadata for this call.
        """
        response = await self._unary(
            self._stub.ListTurns,
            chat_pb2.ListTurnsRequest(
                session_id=session_id, page_size=page_size, page_token=page_token or ""
            ),
            timeout,
            metadata,
        )
        return _convert.turn_page_from_pb(response)

    async def all_turns(
        self,
        session_id: str,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[TurnRecord, None]:
        """Yield every retained turn of the session, newest first, page by page."""
        token: str | None = None
        while True:
            page = await self.list_turns(
                session_id,
                page_size=100,
                page_token=token,
                timeout=timeout,
                metadata=metadata,
            )
            for turn in page.turns:
                yield turn
            if page.next_page_token is None:
                return
            token = page.next_page_token

    async def stream_turn(
        self,
        session_id: str,
        operation: TurnOperation,
        *,
        turn_id: str | None = None,
        expected_cursor: int | None = None,
        on_disconnect: DisconnectMode | None = None,
        tools: TurnTools | Sequence[ToolDeclaration] | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Run one turn and yield its events as they arrive.

        The call starts on the first iteration. Events arrive in order: started, decision,
        deltas, then exactly one of completed or failed. Leaving the iteration early (break,
        an exception or task cancellation) cancels the call on the server; wrap the iterator
        in ``contextlib.aclosing`` for the cancellation to happen immediately on ``break``
        rather than when the iterator is garbage-collected. An event of a kind this client
        version does not know is skipped.

        Args:
            session_id: The session to run the turn in.
            operation: What the turn does: ``Submit``, ``Retry``, ``Edit``, ``Regenerate``,
                ``Dispatch`` or ``ToolResults`` (the results and approvals an answer waits
                for).
            turn_id: Idempotency key; a repeated turn id is never executed twice. A fresh id
                is generated when ``None``; pass one to be able to retry the same turn.
            expected_cursor: Run only while the session cursor still equals this value;
                otherwise ``ChatError`` ``ABORTED`` with reason ``ERROR_REASON_CONFLICT``
                and the current cursor in ``metadata["cursor"]``. A finished turn id
                repeats its outcome whatever the cursor.
            on_disconnect: ``DisconnectMode.CONTINUE`` lets the turn run to its end and
                commit without this stream, and makes the client reattach by itself when the
                stream breaks (the connection closes or resets, the server goes away): it
                follows the turn with WatchTurn from the last sequence received, on any
                server, with the client's ``ReattachPolicy``, and the iteration goes on with
                the next event, each exactly once; when the attempts run out the last error
                is raised. Leaving the iteration early then closes the stream only: the
                turn goes on (``cancel_turn`` stops it). ``None`` (not sent) and
                ``DisconnectMode.CANCEL`` cancel the turn with its stream and never
                reattach.
            tools: The tools the model may call in this turn (declarations, or
                ``TurnTools`` with a tool choice). An answer that calls them streams
                ``ToolCallStarted``, ``ToolCallDelta`` and ``ToolCallEnded`` events and
                completes with ``pending_tool_calls``; run them and continue with
                ``ToolResults``, declaring the same tools.
            timeout: Deadline in seconds of the whole stream, reattaches included; the
                client default when ``None``.
            metadata: Extra metadata for this call.

        Raises:
            ChatError: The call failed, before or during the stream.
        """
        turn_id = turn_id or new_turn_id()
        request = _convert.turn_request(
            session_id,
            turn_id,
            operation,
            expected_cursor,
            on_disconnect,
            tools if tools is None or isinstance(tools, TurnTools) else TurnTools(tuple(tools)),
        )
        reattach = on_disconnect == DisconnectMode.CONTINUE
        stream = self._follow(session_id, turn_id, request, 0, reattach, timeout, metadata)
        async with aclosing(stream):
            async for event in stream:
                yield event

    async def watch_turn(
        self,
        session_id: str,
        turn_id: str,
        after_sequence: int = 0,
        *,
        reattach: bool = True,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Follow a turn from anywhere: yield its events after ``after_sequence``.

        First the events the caller missed, then live ones, then the terminal event, each
        exactly once and numbered as the turn numbered them; the iteration ends after the
        terminal event. It never starts, changes or extends the turn. A finished turn whose
        events the server no longer keeps answers with its recorded outcome instead
        (``TurnStarted.duplicate`` set, numbered from ``after_sequence + 1``): replace what
        was shown of the turn. With ``after_sequence`` equal to the last event's sequence
        the iteration ends at once.

        Args:
            session_id: The session.
            turn_id: A running turn, or one the session retains.
            after_sequence: The sequence of the last event the caller has; 0 for all.
            reattach: Follow the turn again when the stream breaks, as ``stream_turn`` does
                for a continued turn; ``False`` raises the first error instead.
            timeout: Deadline in seconds of the whole stream; the client default when
                ``None``.
            metadata: Extra metadata for this call.

        Raises:
            ChatError: ``NOT_FOUND`` (``ERROR_REASON_TURN_NOT_FOUND``) for a turn neither
                running nor retained, ``INVALID_ARGUMENT`` for an ``after_sequence`` past
                the turn's last event, or any other failed call.
        """
        stream = self._follow(
            session_id, turn_id, None, after_sequence, reattach, timeout, metadata
        )
        async with aclosing(stream):
            async for event in stream:
                yield event

    async def cancel_turn(
        self,
        session_id: str,
        turn_id: str,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> CancelTurnResponse:
        """Stop a running turn, whoever started it and whichever server runs it.

        Nothing is committed, the lease is released and the turn id may run again; its
        streams end with a ``TurnFailed`` of code ``"cancelled"``. Cancelling a turn that is
        not running changes nothing (``cancelled`` is False). Idempotent.
        """
        response = await self._unary(
            self._stub.CancelTurn,
            chat_pb2.CancelTurnRequest(session_id=session_id, turn_id=turn_id),
            timeout,
            metadata,
        )
        return _convert.cancel_turn_from_pb(response)

    async def watch_session(
        self,
        session_id: str,
        after_cursor: int | None = None,
        *,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[WatchItem, None]:
        """Follow a session live: yield its turns as they happen, whoever started them.

        The first item is the ``Session`` as it is now; then the events of each turn that
        runs (each ``TurnEvent`` carries its ``turn_id``; turns arrive one after the other,
        events in order and exactly once), a ``Session`` after every stored change, and a
        ``WatchHeartbeat`` after 15 s of silence. The stream stays open until the caller
        leaves the iteration or the deadline passes; it is not reattached by itself: watch
        again with ``after_cursor`` set to the last session's cursor.

        Args:
            session_id: The session.
            after_cursor: The cursor of the last session received, to resume a watch; when
                the first session's cursor is past it the caller missed stored changes and
                reloads the history (``get_session``).
            timeout: Deadline in seconds of the whole stream; none by default unless the
                client has one.
            metadata: Extra metadata for this call.

        Raises:
            ChatError: The call failed, e.g. ``ABORTED`` (``ERROR_REASON_WATCH_BEHIND``,
                metadata ``cursor``) for a watcher too slow for the server, or
                ``RESOURCE_EXHAUSTED`` (``ERROR_REASON_LIMIT_EXCEEDED``) past the watcher
                limits.
        """
        request = chat_pb2.WatchSessionRequest(session_id=session_id, after_cursor=after_cursor)
        call_timeout, call_metadata = self._call_options(timeout, metadata)
        call = self._stub.WatchSession(request, timeout=call_timeout, metadata=call_metadata)
        try:
            async for response in call:
                item = _convert.watch_item_from_pb(response)
                if item is not None:
                    yield item
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from error
        finally:
            call.cancel()

    async def _follow(
        self,
        session_id: str,
        turn_id: str,
        start: chat_pb2.StreamTurnRequest | None,
        after_sequence: int,
        reattach: bool,
        timeout: float | None,
        metadata: Metadata | None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """A turn's events after `after_sequence`: from StreamTurn `start` when given, else
        (and after a break) from WatchTurn, until the terminal event; see `stream_turn`."""
        call_timeout, call_metadata = self._call_options(timeout, metadata)
        deadline = None if call_timeout is None else time.monotonic() + call_timeout
        last, failures, resent = after_sequence, 0, False
        # A recorded outcome (a repeat: TurnStarted.duplicate) is numbered by the answer
        # that sends it, from its after_sequence + 1, not as the turn numbered its events:
        # after a break in it, follow it again from 0 (the same repeat, numbered from 1)
        # and shift that numbering onto the one passed on.
        repeat: int | None = None
        """The sequence passed on before the repeat's first event."""
        shift = 0
        """What the current call's sequences are shifted by."""
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if start is not None:
                call: grpc.aio.UnaryStreamCall[Any, chat_pb2.StreamTurnResponse] = (
                    self._stub.StreamTurn(start, timeout=remaining, metadata=call_metadata)
                )
            else:
                watch = chat_pb2.WatchTurnRequest(
                    session_id=session_id,
                    turn_id=turn_id,
                    after_sequence=last if repeat is None else 0,
                )
                shift = 0 if repeat is None else repeat
                call = self._stub.WatchTurn(watch, timeout=remaining, metadata=call_metadata)
            try:
                async for response in call:
                    if response.sequence and shift:
                        response.sequence += shift
                    if response.sequence and response.sequence <= last:
                        continue  # delivered before the break: each event once
                    if repeat is None and response.started.duplicate:
                        repeat = response.sequence - 1
                    last, failures = max(last, response.sequence), 0
                    event = _convert.event_from_pb(response)
                    if event is not None:
                        yield event
                    if _convert.is_terminal(response):
                        await _ended(call)
                        return
                return
            except grpc.aio.AioRpcError as rpc_error:
                error = from_rpc_error(rpc_error)
                if resent and error.reason == TURN_IN_PROGRESS:
                    start, resent = None, False  # it runs: follow it from the start
                    continue
                failures += 1
                if not reattach or not breaks_stream(error):
                    raise error from rpc_error
                if failures > self._reattach.attempts:
                    raise error from rpc_error
                delay = self._reattach.delay(failures)
                if deadline is not None and time.monotonic() + delay >= deadline:
                    raise error from rpc_error
                await asyncio.sleep(delay)
                # Nothing seen yet: the request may never have arrived, so send it again (a
                # turn id never runs twice); otherwise follow the turn from the last event.
                resent = start is not None and last == after_sequence == 0
                if not resent:
                    start = None
            finally:
                call.cancel()

    def submit(
        self,
        session_id: str,
        content: str,
        *,
        message_id: str | None = None,
        turn_id: str | None = None,
        expected_cursor: int | None = None,
        on_disconnect: DisconnectMode | None = None,
        tools: TurnTools | Sequence[ToolDeclaration] | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Append a user message to a server-held history and stream the turn's events."""
        return self.stream_turn(
            session_id,
            Submit(content, message_id),
            turn_id=turn_id,
            expected_cursor=expected_cursor,
            on_disconnect=on_disconnect,
            tools=tools,
            timeout=timeout,
            metadata=metadata,
        )

    def retry(
        self,
        session_id: str,
        message_id: str | None = None,
        *,
        turn_id: str | None = None,
        expected_cursor: int | None = None,
        on_disconnect: DisconnectMode | None = None,
        tools: TurnTools | Sequence[ToolDeclaration] | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Send a user message again (the last one when ``None``) and stream the events."""
        return self.stream_turn(
            session_id,
            Retry(message_id),
            turn_id=turn_id,
            expected_cursor=expected_cursor,
            on_disconnect=on_disconnect,
            tools=tools,
            timeout=timeout,
            metadata=metadata,
        )

    def edit(
        self,
        session_id: str,
        message_id: str,
        content: str,
        *,
        turn_id: str | None = None,
        expected_cursor: int | None = None,
        on_disconnect: DisconnectMode | None = None,
        tools: TurnTools | Sequence[ToolDeclaration] | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Change a user message, drop later messages and stream the turn's events."""
        return self.stream_turn(
            session_id,
            Edit(message_id, content),
            turn_id=turn_id,
            expected_cursor=expected_cursor,
            on_disconnect=on_disconnect,
            tools=tools,
            timeout=timeout,
            metadata=metadata,
        )

    def regenerate(
        self,
        session_id: str,
        message_id: str | None = None,
        *,
        turn_id: str | None = None,
        expected_cursor: int | None = None,
        on_disconnect: DisconnectMode | None = None,
        tools: TurnTools | Sequence[ToolDeclaration] | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Answer again (the last assistant message when ``None``) and stream the events."""
        return self.stream_turn(
            session_id,
            Regenerate(message_id),
            turn_id=turn_id,
            expected_cursor=expected_cursor,
            on_disconnect=on_disconnect,
            tools=tools,
            timeout=timeout,
            metadata=metadata,
        )

    def dispatch(
        self,
        session_id: str,
        messages: Iterable[Message],
        approvals: Iterable[ToolApproval] = (),
        *,
        turn_id: str | None = None,
        expected_cursor: int | None = None,
        on_disconnect: DisconnectMode | None = None,
        tools: TurnTools | Sequence[ToolDeclaration] | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Send a whole client-held history and stream the events of its last user message
        (or, when it ends with tool messages, of the answer they continue; ``approvals``
        decide the calls of that answer that wait for approval)."""
        return self.stream_turn(
            session_id,
            Dispatch(tuple(messages), tuple(approvals)),
            turn_id=turn_id,
            expected_cursor=expected_cursor,
            on_disconnect=on_disconnect,
            tools=tools,
            timeout=timeout,
            metadata=metadata,
        )

    def tool_results(
        self,
        session_id: str,
        results: Iterable[ToolResult] = (),
        approvals: Iterable[ToolApproval] = (),
        *,
        turn_id: str | None = None,
        expected_cursor: int | None = None,
        on_disconnect: DisconnectMode | None = None,
        tools: TurnTools | Sequence[ToolDeclaration] | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Continue a server-held answer that waits for tools with their results and
        approval decisions, and stream the events of the model's continued answer."""
        return self.stream_turn(
            session_id,
            ToolResults(tuple(results), tuple(approvals)),
            turn_id=turn_id,
            expected_cursor=expected_cursor,
            on_disconnect=on_disconnect,
            tools=tools,
            timeout=timeout,
            metadata=metadata,
        )

    async def run_turn(
        self,
        session_id: str,
        operation: TurnOperation,
        *,
        turn_id: str | None = None,
        expected_cursor: int | None = None,
        on_disconnect: DisconnectMode | None = None,
        tools: TurnTools | Sequence[ToolDeclaration] | None = None,
        timeout: float | None = None,
        metadata: Metadata | None = None,
    ) -> TurnResult:
        """Run one turn to its end and collect its events.

        A turn that fails with a ``TurnFailed`` event returns normally with ``failed`` set;
        a failed call raises ``ChatError``.
        """
        turn_id = turn_id or new_turn_id()
        started: TurnStarted | None = None
        decision: TurnDecision | None = None
        completed: TurnCompleted | None = None
        failed: TurnFailed | None = None
        text: list[str] = []
        events: list[TurnEvent] = []
        stream = self.stream_turn(
            session_id,
            operation,
            turn_id=turn_id,
            expected_cursor=expected_cursor,
            on_disconnect=on_disconnect,
            tools=tools,
            timeout=timeout,
            metadata=metadata,
        )
        async with aclosing(stream):
            async for event in stream:
                events.append(event)
                match event:
                    case TurnStarted():
                        started = event
                    case TurnDecision():
                        decision = event
                    case TextDelta(text=piece):
                        text.append(piece)
                    case TurnCompleted():
                        completed = event
                    case TurnFailed():
                        failed = event
        return TurnResult(
            turn_id=turn_id,
            started=started,
            decision=decision,
            text="".join(text),
            completed=completed,
            failed=failed,
            events=tuple(events),
        )


END_SECONDS = 1.0
"""How long a stream whose terminal event arrived is given to end by itself."""


async def _ended(call: grpc.aio.UnaryStreamCall[Any, chat_pb2.StreamTurnResponse]) -> None:
    """Let the server end a call whose terminal event arrived (it ends it at once), so the
    call ends OK on both sides rather than cancelled by the client; cancelled past
    `END_SECONDS`."""
    with contextlib.suppress(TimeoutError, grpc.aio.AioRpcError):
        await asyncio.wait_for(call.code(), END_SECONDS)
