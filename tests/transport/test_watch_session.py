"""WatchSession through a real server: a second client sees every turn of the session as
it happens, bounded per session and per tenant, scoped to the caller's tenant."""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.service import Limits, Reason, WatchSettings
from agentskit_chat.service._watchers import Watchers
from agentskit_chat.transport._status import CODES
from agentskit_chat_client import (
    ChatError,
    Dispatch,
    HistoryMode,
    Message,
    Submit,
    TextDelta,
    TurnCompleted,
    TurnResult,
)
from tests.waiting import EVENT_WAIT

from .conftest import CANARY, live, run
from .test_limits import MiB
from .test_tenants import TOKEN_A, TOKEN_B, two_tenants
from .watching import Watch, event_kind, kind, session_at, terminal_of, text, turn_events
from .web.conftest import web_live
from .web.wire import END_STREAM, SERVICE, TRAILERS, envelope, reason, stream


def test_a_second_client_sees_the_first_clients_turn_while_it_streams(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("probe")).session_id
            async with grpc.aio.insecure_channel(env.target) as channel:
                watch = Watch(channel, sid)
                first = await watch.next()
                assert kind(first) == "session"
                assert (first.session.session_id, first.session.cursor) == (sid, 0)

                stream = env.client.stream_turn(sid, Submit("/slow"), turn_id="t-1")
                got = [await anext(stream) for _ in range(3)]  # started, decision, "model "
                assert isinstance(got[-1], TextDelta)
                # The model waits on the gate: the first client's stream cannot end before
                # it opens, and the watcher has the same events already.
                early = await watch.until(lambda i: event_kind(i) == "delta")
                assert [kind(i) for i in early] == ["session", "event", "event", "event"]
                assert early[0].session.cursor == 1  # the lease claim
                events = turn_events(early, "t-1")
                assert [e.sequence for e in events] == [1, 2, 3]
                assert [e.WhichOneof("event") for e in events] == ["started", "decision", "delta"]
                assert text(events) == "model "
                assert all(e.session_id == sid for e in events)

                env.probe.gate.set()
                rest = [e async for e in stream]
                done = rest[-1]
                assert isinstance(done, TurnCompleted)
                late = await watch.until(session_at(done.cursor))
                events = turn_events(watch.items, "t-1")
                assert [e.sequence for e in events] == list(range(1, len(got) + len(rest) + 1))
                assert text(events) == "model answer"
                assert events[-1].completed.cursor == done.cursor
                assert kind(late[-1]) == "session"
                assert late[-1].session.cursor == done.cursor == 2
                assert late[-1].session.snapshot.state == "idle"
                watch.cancel()

    run(scenario())


def test_turns_by_two_clients_both_arrive_in_the_order_they_ran(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            async with (
                grpc.aio.insecure_channel(env.target) as channel,
                type(env.client)(env.target) as other,
            ):
                watch = Watch(channel, sid)
                await watch.next()
                first = await env.client.run_turn(sid, Submit("/start"), turn_id="one")
                await watch.until(terminal_of("one"))
                second = await other.run_turn(sid, Submit("/name Ada"), turn_id="two")
                await watch.until(session_at(cursor_of(second)))
                turns = [i.event.turn_id for i in watch.items if kind(i) == "event"]
                assert list(dict.fromkeys(turns)) == ["one", "two"]
                assert text(turn_events(watch.items, "one")) == first.text
                assert text(turn_events(watch.items, "two")) == second.text
                for turn_id in ("one", "two"):
                    events = turn_events(watch.items, turn_id)
                    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
                    assert events[-1].WhichOneof("event") == "completed"
                cursors = [i.session.cursor for i in watch.items if kind(i) == "session"]
                assert cursors == sorted(set(cursors))  # each change once, in order
                assert cursors[-1] == cursor_of(second) == 2  # one write per declared answer
                watch.cancel()

    run(scenario())


def test_a_watch_resumed_after_a_cursor_starts_with_the_session_now(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            async with grpc.aio.insecure_channel(env.target) as channel:
                watch = Watch(channel, sid)
                seen = (await watch.next()).session.cursor
                watch.cancel()
                missed = await env.client.run_turn(sid, Submit("/start"))
                again = Watch(channel, sid, after_cursor=seen)
                now = await again.next()
                assert kind(now) == "session"
                assert now.session.cursor == cursor_of(missed) > seen  # reload history
                later = await env.client.run_turn(sid, Submit("/name Ada"), turn_id="later")
                await again.until(session_at(cursor_of(later)))
                assert text(turn_events(again.items, "later")) == later.text
                assert {i.event.turn_id for i in again.items if kind(i) == "event"} == {"later"}
                again.cancel()

                bad = Watch(channel, sid, after_cursor=-1)
                error = await bad.error()
                assert error.code == grpc.StatusCode.INVALID_ARGUMENT
                assert error.metadata["field"] == "after_cursor"

    run(scenario())


def test_an_idle_watch_gets_heartbeats(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            env.service.watch_settings = WatchSettings(heartbeat=0.2)
            sid = (await env.client.create_session("support")).session_id
            async with grpc.aio.insecure_channel(env.target) as channel:
                watch = Watch(channel, sid)
                await watch.next()
                beats = [await watch.next() for _ in range(2)]
                assert [kind(b) for b in beats] == ["heartbeat", "heartbeat"]
                assert beats[0].heartbeat.time.ToNanoseconds() > 0
                assert (
                    beats[0].heartbeat.time.ToNanoseconds()
                    <= beats[1].heartbeat.time.ToNanoseconds()
                )
                watch.cancel()

    run(scenario())


def test_a_silent_turn_gets_heartbeats_and_then_its_events(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            env.service.watch_settings = WatchSettings(heartbeat=0.2)
            sid = (await env.client.create_session("probe")).session_id
            async with grpc.aio.insecure_channel(env.target) as channel:
                watch = Watch(channel, sid)
                await watch.next()
                turn = asyncio.ensure_future(env.client.run_turn(sid, Submit("/slow"), turn_id="s"))
                await watch.until(lambda i: event_kind(i) == "delta")
                await watch.until(lambda i: kind(i) == "heartbeat")
                await watch.until(lambda i: kind(i) == "heartbeat")
                env.probe.gate.set()
                done = await turn
                await watch.until(terminal_of("s"))
                events = turn_events(watch.items, "s")
                assert [e.sequence for e in events] == list(range(1, len(events) + 1))
                assert text(events) == done.text == "model answer"
                watch.cancel()

    run(scenario())


def test_watcher_limits_refuse_and_free_up_when_a_watch_ends(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            env.service.watchers = Watchers(per_session=2, per_tenant=3)
            one = (await env.client.create_session("support")).session_id
            two = (await env.client.create_session("support")).session_id
            async with grpc.aio.insecure_channel(env.target) as channel:
                first, second = Watch(channel, one), Watch(channel, one)
                await first.next()
                await second.next()
                error = await Watch(channel, one).error()
                assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert error.reason == "ERROR_REASON_LIMIT_EXCEEDED"
                assert error.metadata["limit"] == "watchers_per_session"
                # A turn watch counts against the same bound.
                assert await watch_turn_status(channel, one) == grpc.StatusCode.RESOURCE_EXHAUSTED

                third = Watch(channel, two)
                await third.next()
                error = await Watch(channel, two).error()
                assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert error.metadata["limit"] == "watchers_per_tenant"

                first.cancel()  # its slot is free once the server has seen the cancel
                again = await admitted(channel, one)
                for watch in (second, third, again):
                    watch.cancel()

    run(scenario())


def test_another_tenants_session_is_not_found(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path, authenticator=two_tenants(tmp_path), token=TOKEN_A) as env:
            sid = (await env.client.create_session("support")).session_id
            async with grpc.aio.insecure_channel(env.target) as channel:
                theirs = await Watch(channel, sid, metadata=[bearer(TOKEN_B)]).error()
                nobody = await Watch(channel, "nobody", metadata=[bearer(TOKEN_B)]).error()
                for error in (theirs, nobody):
                    assert error.code == grpc.StatusCode.NOT_FOUND
                    assert error.reason == "ERROR_REASON_SESSION_NOT_FOUND"
                assert (theirs.message, dict(theirs.metadata)) == (
                    nobody.message,
                    dict(nobody.metadata),
                )
                mine = Watch(channel, sid, metadata=[bearer(TOKEN_A)])
                assert kind(await mine.next()) == "session"
                mine.cancel()

    run(scenario())


def test_a_deleted_session_ends_the_watch_with_not_found(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (await env.client.create_session("support")).session_id
            async with grpc.aio.insecure_channel(env.target) as channel:
                watch = Watch(channel, sid)
                await watch.next()
                await env.client.delete_session(sid)
                error = await watch.error()
                assert error.code == grpc.StatusCode.NOT_FOUND
                assert error.reason == "ERROR_REASON_SESSION_NOT_FOUND"

                # A session created again under the id is another session: still NOT_FOUND.
                await env.client.create_session("support", session_id="again")
                watch = Watch(channel, "again")
                await watch.next()
                await env.client.delete_session("again")
                await env.client.create_session("support", session_id="again")
                error = await watch.error()
                assert error.code == grpc.StatusCode.NOT_FOUND

    run(scenario())


def test_a_client_held_sessions_text_never_reaches_the_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with live(tmp_path) as env:
            sid = (
                await env.client.create_session("probe", history_mode=HistoryMode.CLIENT)
            ).session_id
            async with grpc.aio.insecure_channel(env.target) as channel:
                watch = Watch(channel, sid)
                await watch.next()
                history = (Message("u1", "user", f"tell me {CANARY}"),)
                done = await env.client.run_turn(sid, Dispatch(history), turn_id="held")
                await watch.until(session_at(cursor_of(done)))
                assert text(turn_events(watch.items, "held")) == done.text
                watch.cancel()
                await env.client.delete_session(sid)

    run(scenario())
    assert CANARY not in caplog.text


async def watch_turn_status(channel: grpc.aio.Channel, session_id: str) -> grpc.StatusCode:
    request = pb.WatchTurnRequest(session_id=session_id, turn_id="any")
    try:
        async for _ in chat_pb2_grpc.ChatServiceStub(channel).WatchTurn(request, timeout=10):
            pass
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def admitted(channel: grpc.aio.Channel, session_id: str) -> Watch:
    """A watch of the session, once the server admits one (a cancelled watch gives its slot
    back when the server has seen the cancel)."""
    codes = []
    give_up = time.monotonic() + EVENT_WAIT
    while time.monotonic() < give_up:
        watch = Watch(channel, session_id)
        try:
            await watch.next()
        except ChatError as refused:
            codes.append(refused.code)
            await asyncio.sleep(0.02)
        else:
            assert set(codes) <= {grpc.StatusCode.RESOURCE_EXHAUSTED}
            return watch
    raise AssertionError("the ended watch never gave its slot back")


def cursor_of(result: TurnResult) -> int:
    assert result.completed is not None
    return result.completed.cursor


def bearer(token: str) -> tuple[str, str]:
    return ("authorization", f"Bearer {token}")


HTTP_TYPES = {
    "connect": {"content-type": "application/connect+proto"},
    "grpc-web": {"content-type": "application/grpc-web+proto", "x-grpc-web": "1"},
}


@pytest.mark.parametrize("protocol", sorted(HTTP_TYPES))
def test_a_watch_over_the_http_listener_sees_a_grpc_clients_turn(
    tmp_path: Path, protocol: str
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, http2=protocol == "connect") as web:
            env = web.env
            env.service.watch_settings = WatchSettings(heartbeat=0.2)
            sid = (await env.client.create_session("support")).session_id
            request = pb.WatchSessionRequest(session_id=sid).SerializeToString()
            async with web.http.stream(
                "POST",
                SERVICE + "WatchSession",
                content=envelope(request),
                headers=HTTP_TYPES[protocol],
            ) as response:
                assert response.status_code == 200
                frames = http_items(response)
                first = await anext(frames)
                assert kind(first) == "session"
                assert first.session.cursor == 0
                done = await env.client.run_turn(sid, Submit("/start"), turn_id="web")
                items = [first]
                async for item in frames:
                    items.append(item)
                    if kind(item) == "session" and item.session.cursor == cursor_of(done):
                        break
                events = turn_events(items, "web")
                assert [e.sequence for e in events] == [1, 2, 3, 4]
                assert text(events) == done.text
                assert kind(await anext(frames)) == "heartbeat"

    run(scenario())


def test_an_unknown_session_ends_a_connect_watch_with_not_found(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            result = await stream(web.http, "WatchSession", {"sessionId": "nobody"})
            assert result.messages == []
            assert result.error is not None
            assert result.error["code"] == "not_found"
            assert reason(result.error) == "ERROR_REASON_SESSION_NOT_FOUND"

    run(scenario())


async def http_items(response: httpx.Response) -> AsyncIterator[pb.WatchSessionResponse]:
    """The messages of a binary Connect or gRPC-Web stream as they arrive; an end-of-stream
    or trailers frame ends them."""
    buffer = b""
    async for chunk in response.aiter_bytes():
        buffer += chunk
        while len(buffer) >= 5:
            flags, size = struct.unpack(">BI", buffer[:5])
            if len(buffer) < 5 + size:
                break
            payload, buffer = buffer[5 : 5 + size], buffer[5 + size :]
            if flags & (END_STREAM | TRAILERS):
                raise AssertionError(f"the watch ended: {payload!r}")
            yield pb.WatchSessionResponse.FromString(payload)


def test_a_watcher_that_stops_reading_ends_behind_after_what_was_sent(tmp_path: Path) -> None:
    async def scenario() -> None:
        limits = Limits(
            max_output_bytes=3 * MiB + MiB // 2, max_history_bytes=1000, max_history_messages=10
        )
        async with live(tmp_path, limits=limits) as env:
            env.service.watch_settings = WatchSettings(behind=0.3)
            sid = (await env.client.create_session("probe")).session_id
            # Small windows: the server's sends soon wait for this client.
            options = [("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)]
            async with grpc.aio.insecure_channel(env.target, options=options) as channel:
                watch = Watch(channel, sid)
                await watch.next()
                # A turn of 60 kB deltas up to the output limit while the watcher reads
                # nothing: the watch's sends wait for it past the bound.
                flooded = await env.client.run_turn(sid, Submit("/flood 60000"))
                assert flooded.failed is not None
                await asyncio.sleep(1.0)  # longer than the bound; not a timing assertion
                error = await watch.error()
                assert error.code == grpc.StatusCode.ABORTED
                assert error.reason == "ERROR_REASON_WATCH_BEHIND"
                sessions = [i.session.cursor for i in watch.items if kind(i) == "session"]
                assert error.metadata["cursor"] == str(sessions[-1])
                events = turn_events(watch.items, flooded.turn_id)
                assert [e.sequence for e in events] == list(range(1, len(events) + 1))
                assert events[-1].WhichOneof("event") != "failed"  # it fell behind first
                # The watch's slot is free again, and a new watch starts after its cursor.
                again = await admitted(channel, sid)
                assert again.items[0].session.cursor >= int(error.metadata["cursor"])
                again.cancel()

    run(scenario())


def test_watch_behind_is_the_contracts_aborted_reason() -> None:
    assert CODES[Reason.WATCH_BEHIND] == grpc.StatusCode.ABORTED
    assert pb.ErrorReason.Value(str(Reason.WATCH_BEHIND)) == pb.ERROR_REASON_WATCH_BEHIND
