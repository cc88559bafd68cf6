"""Every RPC of agentskit.chat.v1.ChatService as plain coroutines over messages.

The one place where requests are decoded into service calls and results encoded back, for
every transport: gRPC (`ChatServicer`) and the HTTP listener (Connect and gRPC-Web) wrap
these, and each turns a raised `ServiceError` into its own status.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.models import Sampling
from agentskit_chat.service import ChatService, Completed, Failed, TurnRequest

from . import _convert as convert
from ._stall import StallWatch


class ChatRpcs:
    """The service's RPCs; each raises `ServiceError` for a refused request."""

    def __init__(self, service: ChatService) -> None:
        self.service = service

    async def list_definitions(
        self, request: pb.ListDefinitionsRequest
    ) -> pb.ListDefinitionsResponse:
        """Every hosted definition."""
        service = self.service
        definitions = [
            convert.definition(d, service.served_revisions(d.id)) for d in service.definitions()
        ]
        return pb.ListDefinitionsResponse(definitions=definitions)

    async def get_definition(self, request: pb.GetDefinitionRequest) -> pb.GetDefinitionResponse:
        """One definition by id."""
        if request.HasField("revision"):
            definition = await self.service.revision(request.definition_id, request.revision)
        else:
            definition = self.service.definition(request.definition_id)
        served = self.service.served_revisions(definition.id)
        return pb.GetDefinitionResponse(definition=convert.definition(definition, served))

    async def create_session(self, request: pb.CreateSessionRequest) -> pb.CreateSessionResponse:
        """A new session at the definition's initial state."""
        view = await self.service.create_session(
            request.definition_id,
            request.session_id or None,
            convert.history_mode(request.history_mode),
            request.definition_revision if request.HasField("definition_revision") else None,
        )
        return pb.CreateSessionResponse(session=convert.session(view))

    async def get_session(self, request: pb.GetSessionRequest) -> pb.GetSessionResponse:
        """The session and its server-held history."""
        history = await self.service.get_session(request.session_id)
        return pb.GetSessionResponse(
            session=convert.session(history.session), messages=convert.messages(history)
        )

    async def delete_session(self, request: pb.DeleteSessionRequest) -> pb.DeleteSessionResponse:
        """Remove the session and its history."""
        await self.service.delete_session(request.session_id, _expected_cursor(request))
        return pb.DeleteSessionResponse()

    async def truncate_history(
        self, request: pb.TruncateHistoryRequest
    ) -> pb.TruncateHistoryResponse:
        """Drop the newest messages without a turn."""
        history = await self.service.truncate_history(
            request.session_id, request.last_kept_message_id or None, _expected_cursor(request)
        )
        return pb.TruncateHistoryResponse(
            session=convert.session(history.session), messages=convert.messages(history)
        )

    async def get_turn(self, request: pb.GetTurnRequest) -> pb.GetTurnResponse:
        """The status of one retained turn; runs nothing."""
        view = await self.service.get_turn(request.session_id, request.turn_id)
        return pb.GetTurnResponse(turn=convert.turn(view))

    async def list_turns(self, request: pb.ListTurnsRequest) -> pb.ListTurnsResponse:
        """A page of the session's retained turns, newest first."""
        found = await self.service.list_turns(
            request.session_id, request.page_size, request.page_token or None
        )
        return pb.ListTurnsResponse(
            turns=[convert.turn(view) for view in found.turns],
            next_page_token=found.next_page_token or "",
        )

    async def stream_turn(
        self,
        request: pb.StreamTurnRequest,
        stalled: Callable[[], None] | None = None,
        sampling: Sampling | None = None,
    ) -> AsyncGenerator[pb.StreamTurnResponse, None]:
        """Run one turn and stream its events; a client that stops reading loses the turn
        at its deadline, and `stalled` is called to end the call (see `StallWatch`).
        `sampling` (from a front whose protocol carries it) goes to the model of an agentic
        turn, lowered to the server's caps."""
        stamp = convert.EventStamper(request.session_id, request.turn_id)
        deadline = asyncio.get_running_loop().time() + self.service.limits.turn_timeout
        turn = TurnRequest(
            request.session_id,
            request.turn_id,
            convert.operation(request),
            _expected_cursor(request),
            convert.disconnect_mode(request.on_disconnect),
            self.service.limits.sampling_caps.cap(sampling),
            convert.tool_options(request, self.service.limits),
        )
        async with StallWatch(self.service.stream_turn(turn), deadline, stalled) as watch:
            async for sequence, event in watch.events:
                watch.sending(terminal=isinstance(event, Completed | Failed))
                yield stamp(sequence, event)
                await watch.sent()

    async def watch_turn(
        self, request: pb.WatchTurnRequest, stalled: Callable[[], None] | None = None
    ) -> AsyncGenerator[pb.StreamTurnResponse, None]:
        """Stream one turn's events after `after_sequence`, numbered as the turn numbered
        them; a client that stops reading is cut off as a turn stream's is (`StallWatch`),
        which changes nothing of the turn."""
        stamp = convert.EventStamper(request.session_id, request.turn_id)
        deadline = asyncio.get_running_loop().time() + self.service.limits.lease_ttl
        events = self.service.watch_turn(
            request.session_id, request.turn_id, request.after_sequence
        )
        async with StallWatch(events, deadline, stalled) as watch:
            async for sequence, event in watch.events:
                watch.sending(terminal=isinstance(event, Completed | Failed))
                yield stamp(sequence, event)
                await watch.sent()

    async def cancel_turn(self, request: pb.CancelTurnRequest) -> pb.CancelTurnResponse:
        """Stop a running turn; idempotent."""
        outcome = await self.service.cancel_turn(request.session_id, request.turn_id)
        return convert.cancel_outcome(outcome)

    async def watch_session(
        self, request: pb.WatchSessionRequest
    ) -> AsyncGenerator[pb.WatchSessionResponse, None]:
        """Stream the session, its turns' events and its changes as they happen, with
        heartbeats while nothing happens (see `ChatService.watch_session`)."""
        after = request.after_cursor if request.HasField("after_cursor") else None
        items = self.service.watch_session(request.session_id, after)
        async with aclosing(items) as watched:
            async for item in watched:
                yield convert.watch_item(request.session_id, item)


def _expected_cursor(
    request: pb.StreamTurnRequest | pb.TruncateHistoryRequest | pb.DeleteSessionRequest,
) -> int | None:
    return request.expected_cursor if request.HasField("expected_cursor") else None
