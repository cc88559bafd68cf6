"""A continued turn's stream that breaks is followed again with WatchTurn, against a real
in-process gRPC server whose scripted streams are cut."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import grpc
import pytest

from agentskit.chat.v1 import chat_pb2
from agentskit_chat_client import (
    ChatClient,
    ChatError,
    DisconnectMode,
    ReattachPolicy,
    TextDelta,
    TurnCompleted,
    TurnEvent,
    TurnStarted,
)
from tests.client.conftest import Runner
from tests.client.fake_service import Abort, FakeChatService, event, serving

CONTINUE = DisconnectMode.CONTINUE
FAST = ReattachPolicy(attempts=8, initial_backoff=0.001, max_backoff=0.002)
CUT = Abort(grpc.StatusCode.UNAVAILABLE, "connection reset by peer")


def _turn() -> list[chat_pb2.StreamTurnResponse]:
    return [
        event(1, started=chat_pb2.TurnStarted(operation=chat_pb2.OPERATION_SUBMIT)),
        event(2, decision=chat_pb2.TurnDecision(kind=chat_pb2.TURN_KIND_AGENTIC)),
        event(3, delta=chat_pb2.TextDelta(text="one ")),
        event(4, delta=chat_pb2.TextDelta(text="two ")),
        event(5, delta=chat_pb2.TextDelta(text="three")),
        event(6, completed=chat_pb2.TurnCompleted(content="one two three", cursor=2)),
    ]


def _cut_after(service: FakeChatService, count: int) -> None:
    """StreamTurn sends the turn's first `count` events, then its stream is cut."""
    service.turn = _turn()
    service.events = service.turn[:count]
    service.stream_abort = CUT


def _requests(service: FakeChatService, kind: type) -> list:  # type: ignore[type-arg]
    return [request for request in service.requests if isinstance(request, kind)]


async def _collect(client: ChatClient, **options: object) -> list[TurnEvent]:
    stream = client.submit("s1", "hello", turn_id="t1", **options)  # type: ignore[arg-type]
    async with aclosing(stream):
        return [item async for item in stream]


def _serve(service: FakeChatService, policy: ReattachPolicy = FAST) -> Runner[Any]:
    """Run `scenario(client)` against `service` with a client using `policy`."""

    def runner(scenario: Callable[[ChatClient], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            async with serving(service) as target, ChatClient(target, reattach=policy) as client:
                return await scenario(client)

        return asyncio.run(main())

    return runner


def test_a_continued_turn_cut_mid_answer_goes_on_from_the_last_sequence(
    service: FakeChatService,
) -> None:
    _cut_after(service, 3)
    events = _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "one two three"
    assert isinstance(events[-1], TurnCompleted)
    (start,) = _requests(service, chat_pb2.StreamTurnRequest)
    assert start.on_disconnect == chat_pb2.DISCONNECT_MODE_CONTINUE
    (watch,) = _requests(service, chat_pb2.WatchTurnRequest)
    assert (watch.session_id, watch.turn_id, watch.after_sequence) == ("s1", "t1", 3)


def test_a_reattach_stream_that_breaks_is_followed_again(service: FakeChatService) -> None:
    _cut_after(service, 2)
    service.watch_rejections = [CUT]  # the first attempt fails before any event,
    service.watch_cuts = [1, 0]  # the next sends one event, the one after none
    events = _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]
    watches = [w.after_sequence for w in _requests(service, chat_pb2.WatchTurnRequest)]
    assert watches == [2, 2, 3, 3]


def test_a_reset_reported_as_internal_also_reattaches(service: FakeChatService) -> None:
    _cut_after(service, 4)
    service.stream_abort = Abort(grpc.StatusCode.INTERNAL, "Received RST_STREAM with error 2")
    events = _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]


def test_after_the_last_attempt_the_last_error_is_raised(service: FakeChatService) -> None:
    _cut_after(service, 3)
    service.watch_rejections = [CUT, CUT, Abort(grpc.StatusCode.UNAVAILABLE, "still down")]
    seen: list[TurnEvent] = []

    async def scenario(client: ChatClient) -> None:
        stream = client.submit("s1", "hello", turn_id="t1", on_disconnect=CONTINUE)
        async with aclosing(stream):
            async for item in stream:
                seen.append(item)

    with pytest.raises(ChatError) as raised:
        _serve(service, ReattachPolicy(attempts=3, initial_backoff=0.001))(scenario)
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert raised.value.message == "still down"
    assert [e.sequence for e in seen] == [1, 2, 3]  # nothing twice, nothing invented
    assert len(_requests(service, chat_pb2.WatchTurnRequest)) == 3


def test_progress_starts_the_count_of_attempts_again(service: FakeChatService) -> None:
    _cut_after(service, 1)
    service.watch_cuts = [1, 1, 1, 1]  # four breaks, each after one more event
    events = _serve(service, ReattachPolicy(attempts=1, initial_backoff=0.001))(
        lambda client: _collect(client, on_disconnect=CONTINUE)
    )
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("mode", [None, DisconnectMode.CANCEL])
def test_a_turn_that_cancels_on_disconnect_is_never_reattached(
    service: FakeChatService, mode: DisconnectMode | None
) -> None:
    _cut_after(service, 3)
    with pytest.raises(ChatError) as raised:
        _serve(service)(lambda client: _collect(client, on_disconnect=mode))
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert _requests(service, chat_pb2.WatchTurnRequest) == []
    (start,) = _requests(service, chat_pb2.StreamTurnRequest)
    expected = chat_pb2.DISCONNECT_MODE_UNSPECIFIED if mode is None else 1
    assert start.on_disconnect == expected


def test_an_answer_from_the_server_is_not_a_break(service: FakeChatService) -> None:
    _cut_after(service, 3)
    service.watch_rejections = [
        Abort(grpc.StatusCode.NOT_FOUND, "no such turn", "ERROR_REASON_TURN_NOT_FOUND")
    ]
    with pytest.raises(ChatError) as raised:
        _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    assert raised.value.reason == "ERROR_REASON_TURN_NOT_FOUND"
    assert len(_requests(service, chat_pb2.WatchTurnRequest)) == 1


def test_a_watcher_that_fell_behind_watches_again(service: FakeChatService) -> None:
    _cut_after(service, 3)
    behind = {"sequence": "3"}
    service.watch_rejections = [
        Abort(grpc.StatusCode.ABORTED, "behind", "ERROR_REASON_WATCH_BEHIND", behind)
    ]
    events = _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]


def test_a_cut_before_any_event_sends_the_turn_again_then_follows_it(
    service: FakeChatService,
) -> None:
    service.turn = _turn()
    service.stream_rejections = [
        CUT,
        Abort(grpc.StatusCode.ABORTED, "running", "ERROR_REASON_TURN_IN_PROGRESS"),
    ]
    events = _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]
    starts = _requests(service, chat_pb2.StreamTurnRequest)
    assert [s.turn_id for s in starts] == ["t1", "t1"]  # the same id: it never runs twice
    (watch,) = _requests(service, chat_pb2.WatchTurnRequest)
    assert watch.after_sequence == 0


def test_a_call_the_server_cancelled_before_any_event_is_sent_again(
    service: FakeChatService,
) -> None:
    """A stopping server cancels the calls it has not begun: nothing ran, so the turn is
    sent again under its id, and a cancel after events is followed with WatchTurn."""
    service.turn = _turn()
    service.stream_rejections = [Abort(grpc.StatusCode.CANCELLED, "server stopping")]
    service.watch_rejections = [Abort(grpc.StatusCode.CANCELLED, "cancelled")]
    service.events = service.turn[:2]
    service.stream_abort = CUT
    events = _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]
    starts = _requests(service, chat_pb2.StreamTurnRequest)
    assert [s.turn_id for s in starts] == ["t1", "t1"]
    assert [w.after_sequence for w in _requests(service, chat_pb2.WatchTurnRequest)] == [2, 2]


def test_a_cancel_the_server_chose_is_an_answer(service: FakeChatService) -> None:
    _cut_after(service, 3)
    service.watch_rejections = [
        Abort(grpc.StatusCode.CANCELLED, "cancelled", "ERROR_REASON_TURN_NOT_FOUND")
    ]
    with pytest.raises(ChatError) as raised:
        _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    assert raised.value.code == grpc.StatusCode.CANCELLED
    assert len(_requests(service, chat_pb2.WatchTurnRequest)) == 1


def test_the_caller_leaving_the_stream_is_not_a_break(service: FakeChatService) -> None:
    service.turn = _turn()
    service.events = service.turn[:2]
    service.stream_hold = True

    async def scenario(client: ChatClient) -> list[TurnEvent]:
        seen: list[TurnEvent] = []
        stream = client.submit("s1", "hello", on_disconnect=CONTINUE)
        async with aclosing(stream):
            async for item in stream:
                seen.append(item)
                break
        await asyncio.wait_for(service.stream_cancelled.wait(), 120)  # a bound, not a wait
        return seen

    assert len(_serve(service)(scenario)) == 1
    assert _requests(service, chat_pb2.WatchTurnRequest) == []


def test_a_cancelled_task_does_not_reattach(service: FakeChatService) -> None:
    _cut_after(service, 2)
    service.watch_rejections = [CUT] * 8  # every attempt fails: the task is in its backoff

    async def scenario(client: ChatClient) -> None:
        task = asyncio.create_task(_collect(client, on_disconnect=CONTINUE))
        while not _requests(service, chat_pb2.WatchTurnRequest):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        calls = len(_requests(service, chat_pb2.WatchTurnRequest))
        await asyncio.sleep(0.2)
        assert len(_requests(service, chat_pb2.WatchTurnRequest)) == calls

    _serve(service, ReattachPolicy(attempts=8, initial_backoff=0.05, max_backoff=0.05))(scenario)


def test_watch_turn_follows_again_unless_told_not_to(service: FakeChatService) -> None:
    service.turn = _turn()
    service.watch_cuts = [2]

    async def scenario(client: ChatClient) -> list[TurnEvent]:
        stream = client.watch_turn("s1", "t1", 1)
        async with aclosing(stream):
            return [item async for item in stream]

    events = _serve(service)(scenario)
    assert [e.sequence for e in events] == [2, 3, 4, 5, 6]

    service.requests.clear()
    service.watch_cuts = [2]

    seen: list[TurnEvent] = []

    async def once(client: ChatClient) -> None:
        async for item in client.watch_turn("s1", "t1", reattach=False):
            seen.append(item)

    with pytest.raises(ChatError) as raised:
        _serve(service)(once)
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE

    assert [e.sequence for e in seen] == [1, 2]
    assert len(_requests(service, chat_pb2.WatchTurnRequest)) == 1


def test_a_recorded_outcome_after_a_long_break_is_passed_on(service: FakeChatService) -> None:
    _cut_after(service, 3)
    service.turn = [  # the server no longer keeps the events: the outcome, from 4 on
        event(4, started=chat_pb2.TurnStarted(duplicate=True)),
        event(5, delta=chat_pb2.TextDelta(text="one two three")),
        event(6, completed=chat_pb2.TurnCompleted(content="one two three")),
    ]
    events = _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]
    repeat = events[3]
    assert isinstance(repeat, TurnStarted)
    assert repeat.duplicate


def test_a_recorded_outcome_that_breaks_is_followed_again_from_the_start(
    service: FakeChatService,
) -> None:
    _cut_after(service, 3)
    service.watch_outcome = [  # the server no longer keeps the events
        event(0, started=chat_pb2.TurnStarted(duplicate=True)),
        event(0, delta=chat_pb2.TextDelta(text="one two three")),
        event(0, completed=chat_pb2.TurnCompleted(content="one two three")),
    ]
    service.watch_cuts = [2]  # the outcome breaks after its first two events
    events = _serve(service)(lambda client: _collect(client, on_disconnect=CONTINUE))
    watches = [w.after_sequence for w in _requests(service, chat_pb2.WatchTurnRequest)]
    assert watches == [3, 0]  # its own numbering: from the start again, never mixed
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]
    assert [type(e).__name__ for e in events[3:]] == ["TurnStarted", "TextDelta", "TurnCompleted"]
    assert sum(isinstance(e, TurnStarted) and e.duplicate for e in events) == 1


def test_the_policy_doubles_its_backoff_up_to_its_bound() -> None:
    policy = ReattachPolicy()
    assert (policy.attempts, policy.initial_backoff, policy.max_backoff) == (8, 0.1, 2.0)
    delays = [policy.delay(n) for n in range(1, 9)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="must not be negative"):
        ReattachPolicy(attempts=-1)


def test_run_turn_reattaches_a_continued_turn(run: Runner[Any], service: FakeChatService) -> None:
    from agentskit_chat_client import Submit

    _cut_after(service, 3)
    result = run(lambda client: client.run_turn("s1", Submit("hi"), on_disconnect=CONTINUE))
    assert result.ok
    assert result.text == "one two three"
    assert [e.sequence for e in result.events] == [1, 2, 3, 4, 5, 6]
