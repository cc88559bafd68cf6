"""A WatchSession call read item by item, over a raw gRPC stub."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat_client import ChatError
from agentskit_chat_client._errors import from_rpc_error

Item = pb.WatchSessionResponse
READ_SECONDS = 20.0
"""The longest one read may wait: a bound, never an expected time."""


class Watch:
    """One WatchSession call: `next()` reads its next item, `error()` its ending status."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        session_id: str,
        after_cursor: int | None = None,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> None:
        request = pb.WatchSessionRequest(session_id=session_id)
        if after_cursor is not None:
            request.after_cursor = after_cursor
        stub = chat_pb2_grpc.ChatServiceStub(channel)
        self.call = stub.WatchSession(request, metadata=tuple(metadata) or None, timeout=60)
        self.items: list[Item] = []

    async def next(self) -> Item:
        """The next item; ChatError when the call ended with a status."""
        try:
            item = await asyncio.wait_for(self.call.read(), READ_SECONDS)
        except grpc.aio.AioRpcError as error:
            raise from_rpc_error(error) from error
        if item is grpc.aio.EOF:
            raise AssertionError("the watch ended without a status")
        assert isinstance(item, Item)
        self.items.append(item)
        return item

    async def until(self, done: Callable[[Item], bool]) -> list[Item]:
        """Items up to and including the first for which `done` holds."""
        read = []
        while True:
            item = await self.next()
            read.append(item)
            if done(item):
                return read

    async def error(self) -> ChatError:
        """The status the watch ends with, after whatever items come before it."""
        try:
            while True:
                await self.next()
        except ChatError as error:
            return error

    def cancel(self) -> None:
        self.call.cancel()


def kind(item: Item) -> str:
    """`session`, `event` or `heartbeat`."""
    which = item.WhichOneof("item")
    assert which is not None
    return which


def event_kind(item: Item) -> str | None:
    """The event's kind (`started`, `delta`, ...) of an `event` item, else None."""
    return item.event.WhichOneof("event") if kind(item) == "event" else None


def terminal_of(turn_id: str) -> Callable[[Item], bool]:
    """Whether an item is the terminal event of `turn_id`."""
    return lambda item: (
        item.event.turn_id == turn_id
        and event_kind(item)
        in (
            "completed",
            "failed",
        )
    )


def session_at(cursor: int) -> Callable[[Item], bool]:
    """Whether an item is the session at `cursor` or later."""
    return lambda item: kind(item) == "session" and item.session.cursor >= cursor


def turn_events(items: Sequence[Item], turn_id: str) -> list[pb.StreamTurnResponse]:
    return [i.event for i in items if kind(i) == "event" and i.event.turn_id == turn_id]


def text(events: Sequence[pb.StreamTurnResponse]) -> str:
    return "".join(e.delta.text for e in events if e.WhichOneof("event") == "delta")
