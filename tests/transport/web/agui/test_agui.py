"""The AG-UI front through a live listener: runs of server- and client-held threads, the
events and their ids, repeated runs, failures and reopened threads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import Limits, Rate, RateLimits, Reason, ServiceError
from agentskit_chat.transport._rpcs import ChatRpcs
from tests.transport.conftest import CANARY, run
from tests.transport.web.agui.runs import post_run, run_input, user
from tests.transport.web.conftest import web_live
from tests.waiting import EVENT_WAIT, longer_deadlines, until


def test_a_new_thread_is_client_held_and_streams_the_model_answer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-1", "run-1", [user("u1", "hello")])
            answer = await post_run(web.http, "probe", body)
            assert answer.status == 200
            assert answer.headers["content-type"] == "text/event-stream"
            assert answer.types == [
                "RUN_STARTED",
                "STATE_SNAPSHOT",
                "CUSTOM",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "RUN_FINISHED",
            ]
            assert answer.text() == "model answer"
            (started,) = answer.of("RUN_STARTED")
            assert (started["threadId"], started["runId"]) == ("thread-1", "run-1")
            (snapshot,) = answer.of("STATE_SNAPSHOT")
            assert snapshot["snapshot"]["state"] == "idle"
            assert snapshot["snapshot"]["definitionId"] == "probe"
            (decision,) = answer.of("CUSTOM")
            assert decision["name"] == "agentskit.decision"
            assert decision["value"] == {
                "kind": "agentic",
                "route": "",
                "from": "idle",
                "to": "idle",
                "replayed": False,
                "turnId": "run-1",
                "sessionId": "thread-1",
            }
            ids = [event_id for event_id, _ in answer.events]
            assert ids[:2] == ["0.0", "0.1"]
            positions = [tuple(int(p) for p in str(i).split(".")) for i in ids]
            assert positions == sorted(positions)
            assert len(set(positions)) == len(positions)
            (done,) = answer.of("RUN_FINISHED")
            message_ids = {e["messageId"] for e in answer.text_events()}
            assert message_ids == {done["result"]["assistantMessageId"]}
            got = await web.env.client.get_session("thread-1")
            assert got.session.history_mode.name == "CLIENT"
            assert got.messages == ()

    run(scenario())


def test_a_server_held_thread_takes_only_the_new_message_and_shows_the_transition(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("support")).session_id
            ignored = user("old", "this history is not the server's")
            body = run_input(sid, "r1", [ignored, user("u1", "/start")], state={"state": "x"})
            answer = await post_run(web.http, "support", body)
            assert answer.status == 200, answer.body
            (snapshot,) = answer.of("STATE_SNAPSHOT")
            assert snapshot["snapshot"] == {
                "definitionId": "support",
                "revision": 1,
                "state": "idle",
                "allowedEvents": ["start"],
                "actions": ["start"],
                "commands": [{"route": "start", "input": "/start", "event": "start"}],
            }
            (decision,) = answer.of("CUSTOM")
            assert decision["value"]["kind"] == "deterministic"
            assert decision["value"]["route"] == "start"
            assert (decision["value"]["from"], decision["value"]["to"]) == ("idle", "collecting")
            assert answer.text() == "What is your name?"
            (delta,) = answer.of("STATE_DELTA")
            patched = dict(snapshot["snapshot"])
            for operation in delta["delta"]:
                assert operation["op"] == "replace"
                patched[operation["path"].lstrip("/")] = operation["value"]
            assert patched["state"] == "collecting"
            assert patched["allowedEvents"] == ["finish"]
            assert patched["commands"] == []
            assert answer.types.index("STATE_DELTA") < answer.types.index("RUN_FINISHED")
            got = await web.env.client.get_session(sid)
            assert next(m.id for m in got.messages) == "u1"
            assert len(got.messages) == 2
            # Reopened with no new user message: the stored history, no turn.
            reopen = await post_run(web.http, "support", run_input(sid, "r2"))
            assert reopen.types == [
                "RUN_STARTED",
                "STATE_SNAPSHOT",
                "MESSAGES_SNAPSHOT",
                "RUN_FINISHED",
            ]
            (history,) = reopen.of("MESSAGES_SNAPSHOT")
            assert [(m["id"], m["role"]) for m in history["messages"]] == [
                ("u1", "user"),
                (got.messages[1].id, "assistant"),
            ]
            assert reopen.of("STATE_SNAPSHOT")[0]["snapshot"]["state"] == "collecting"
            assert (await web.env.client.get_session(sid)).session.cursor == got.session.cursor

    run(scenario())


def test_a_repeated_run_repeats_its_outcome_and_a_regenerate_runs_again(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("probe")).session_id
            body = run_input(sid, "r1", [user("u1", "/count")])
            first = await post_run(web.http, "probe", body)
            assert first.text() == "counted 1"
            again = await post_run(web.http, "probe", body)
            assert again.text() == "counted 1"
            assert web.env.probe.route_calls == ["count"]
            # A new run id for the same (answered) user message regenerates its answer.
            regenerate = await post_run(web.http, "probe", run_input(sid, "r2", body["messages"]))
            assert regenerate.status == 200
            (decision,) = regenerate.of("CUSTOM")
            assert decision["value"]["replayed"] is True
            assert web.env.probe.route_calls == ["count"]
            got = await web.env.client.get_session(sid)
            assert next(m.id for m in got.messages) == "u1"
            assert len(got.messages) == 2

    run(scenario())


def test_a_failed_turn_ends_with_run_error_and_its_code(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-f", "r1", [user("u1", "/fail-model")])
            answer = await post_run(web.http, "probe", body)
            assert answer.status == 200
            assert answer.types[-1] == "RUN_ERROR"
            assert "RUN_FINISHED" not in answer.types
            error = answer.of("RUN_ERROR")[0]
            assert error["code"] == "model_server_error"
            assert CANARY not in error["message"]
            boom = await post_run(
                web.http, "probe", run_input("thread-b", "r1", [user("u", "/boom")])
            )
            failed = boom.of("RUN_ERROR")[0]
            assert failed["code"] == "route_failed"
            assert CANARY not in str(boom.events)

    run(scenario())


def test_limits_apply_to_agui_runs(tmp_path: Path) -> None:
    async def scenario() -> None:
        limits = Limits(max_input_bytes=64)
        async with web_live(tmp_path, limits=limits) as web:
            before = web.env.dump()
            body = run_input("thread-l", "r1", [user("u1", "x" * 200)])
            answer = await post_run(web.http, "probe", body)
            assert answer.status == 413  # a smaller message mends it, not a retry
            assert json.loads(answer.body)["error"]["code"] == "limit_exceeded"
            assert b"xxxx" not in answer.body
            assert web.env.dump() == before  # The thread it would have created is not kept.

    run(scenario())


def test_a_thread_of_another_definition_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("support")).session_id
            before = web.env.dump()
            answer = await post_run(web.http, "probe", run_input(sid, "r", [user("u", "hi")]))
            assert answer.status == 409
            assert web.env.dump() == before
            missing = await post_run(web.http, "nothing", run_input(sid, "r", [user("u", "hi")]))
            assert missing.status == 404

    run(scenario())


def test_an_edited_message_of_a_server_held_thread_is_answered_again(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("support")).session_id
            first = await post_run(
                web.http, "support", run_input(sid, "r1", [user("u1", "/start")])
            )
            assert first.text() == "What is your name?"
            # The same message id with other text: an edit of it, answered anew.
            edited = await post_run(
                web.http, "support", run_input(sid, "r2", [user("u1", "hello")])
            )
            assert edited.status == 200, edited.body
            (decision,) = edited.of("CUSTOM")
            assert decision["value"]["kind"] == "agentic"
            got = await web.env.client.get_session(sid)
            assert (got.messages[0].id, got.messages[0].content) == ("u1", "hello")
            assert len(got.messages) == 2

    run(scenario())


def test_a_run_id_still_running_is_followed_not_run_twice(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-twice", "r1", [user("u1", "/slow")])
            first = asyncio.ensure_future(post_run(web.http, "probe", body))
            await web.env.probe.entered.wait()
            second = asyncio.ensure_future(post_run(web.http, "probe", body))
            await until(lambda: web.env.service.watchers.count("") == 1, "the second run's watch")
            web.env.probe.gate.set()
            one, two = await first, await second
            assert one.text() == two.text() == "model answer"
            assert one.events[2:] == two.events[2:]
            assert web.env.probe.model_calls == [1]

    run(scenario())


def test_the_turn_deadline_ends_a_run_with_run_error(tmp_path: Path) -> None:
    async def attempt(folder: Path, timeout: float) -> bool:
        limits = Limits(turn_timeout=timeout, lease_ttl=max(5.0, 2 * timeout))
        async with web_live(folder, limits=limits) as web:
            body = run_input("thread-late", "r1", [user("u1", "/slow")])
            late = await post_run(web.http, "probe", body)
            assert late.types[-1] == "RUN_ERROR"
            assert late.of("RUN_ERROR")[0]["code"] == "deadline_exceeded"
            _assert_ids_increase(late.events)
            if not web.env.probe.entered.is_set():
                return False  # the turn timed out before it reached the model: try longer
            await asyncio.wait_for(web.env.probe.model_closed.wait(), EVENT_WAIT)
            web.env.probe.gate.set()
            again = await post_run(
                web.http, "probe", run_input("thread-late", "r2", body["messages"])
            )
            assert again.text() == "model answer"
            return True

    run(longer_deadlines(tmp_path, attempt))


def test_two_runs_opening_one_new_thread_at_once_share_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            history = [user("u1", "/count")]
            answers = await asyncio.gather(
                *(
                    post_run(web.http, "probe", run_input("thread-race", f"r{n}", history))
                    for n in range(4)
                )
            )
            statuses = sorted(answer.status for answer in answers)
            assert set(statuses) <= {200, 409}, [a.body for a in answers]
            assert statuses[0] == 200
            for answer in answers:
                if answer.status == 409:
                    code = json.loads(answer.body)["error"]["code"]
                    assert code in {"session_busy", "conflict"}
                else:
                    assert answer.types[-1] == "RUN_FINISHED", answer.types
                    assert answer.text().startswith("counted ")
            got = await web.env.client.get_session("thread-race")
            assert got.session.history_mode.name == "CLIENT"
            ran = await web.env.client.list_turns("thread-race")
            finished = [a for a in answers if a.status == 200]
            assert len(ran.turns) == len(finished)

    run(scenario())


def test_a_refused_run_never_deletes_a_thread_another_run_is_using(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            # Run A creates the thread and is held there (a fault no real timing makes
            # certain), while run B finds the thread and takes its lease; A is refused.
            service = web.env.service
            original = service.create_session
            created, release = asyncio.Event(), asyncio.Event()

            async def held_create(*args: Any, **kwargs: Any) -> Any:
                view = await original(*args, **kwargs)
                created.set()
                await release.wait()
                return view

            service.create_session = held_create  # type: ignore[method-assign]
            history = [user("u1", "/slow")]
            a = asyncio.ensure_future(
                post_run(web.http, "probe", run_input("thread-held", "rA", history))
            )
            await created.wait()
            service.create_session = original  # type: ignore[method-assign]
            b = asyncio.ensure_future(
                post_run(web.http, "probe", run_input("thread-held", "rB", history))
            )
            await web.env.probe.entered.wait()  # B's turn holds the lease
            release.set()
            refused = await a
            assert refused.status == 409, refused.body
            assert json.loads(refused.body)["error"]["code"] == "session_busy"
            got = await web.env.client.get_session("thread-held")  # still there
            assert got.session.history_mode.name == "CLIENT"
            web.env.probe.gate.set()
            answered = await b
            assert answered.types[-1] == "RUN_FINISHED", answered.types
            assert answered.text() == "model answer"
            turns = await web.env.client.list_turns("thread-held")
            assert [t.turn_id for t in turns.turns] == ["rB"]

    run(scenario())


def test_a_thread_created_for_a_refused_turn_is_not_kept(tmp_path: Path) -> None:
    rates = RateLimits(turns=Rate(per_second=0.001, burst=1))

    async def scenario() -> None:
        async with web_live(tmp_path, rates=rates) as web:
            first = await post_run(web.http, "probe", run_input("t-1", "r1", [user("u", "/count")]))
            assert first.types[-1] == "RUN_FINISHED"
            before = web.env.dump()
            limited = run_input("t-2", "r1", [user("u", "/count")])
            refused = await post_run(web.http, "probe", limited)
            assert refused.status == 429
            assert json.loads(refused.body)["error"]["code"] == "rate_limited"
            assert int(refused.headers["retry-after"]) >= 1
            assert web.env.dump() == before  # t-2 was created for the turn, then deleted

    run(scenario())


def test_a_call_failing_mid_turn_ends_with_a_run_error_after_every_event_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = ChatRpcs.stream_turn

    async def cut(
        self: ChatRpcs, request: pb.StreamTurnRequest, stalled: Any = None
    ) -> AsyncIterator[pb.StreamTurnResponse]:
        # The store failing under a running call: a fault no real setup makes on cue.
        async with aclosing(original(self, request, stalled)) as events:
            async for event in events:
                yield event
                if event.WhichOneof("event") == "delta":
                    raise ServiceError(Reason.STORE_UNAVAILABLE, "the store is unavailable")

    monkeypatch.setattr(ChatRpcs, "stream_turn", cut)

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-cut", "r1", [user("u1", "hello")])
            cut_run = await post_run(
                web.http, "probe", body, {"agentskit-on-disconnect": "continue"}
            )
            assert cut_run.types[-1] == "RUN_ERROR"
            assert cut_run.of("RUN_ERROR")[0]["code"] == "store_unavailable"
            assert "TEXT_MESSAGE_CONTENT" in cut_run.types
            _assert_ids_increase(cut_run.events)
            # A reconnect from the error's id sends only what the client does not have.
            last_id = cut_run.events[-1][0]
            assert last_id is not None
            rest = await post_run(web.http, "probe", body, {"last-event-id": last_id})
            assert rest.status == 200
            sent = {event_id for event_id, _ in cut_run.events}
            assert not sent & {event_id for event_id, _ in rest.events}, rest.events
            assert rest.types[-1] == "RUN_FINISHED"
            assert "RUN_STARTED" not in rest.types

    run(scenario())


def test_a_run_failing_unexpectedly_does_not_keep_the_thread_it_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(
        self: ChatRpcs, request: pb.StreamTurnRequest, stalled: Any = None
    ) -> AsyncIterator[pb.StreamTurnResponse]:
        # A bug under the call, before its first event: no real input makes one on cue.
        raise RuntimeError(CANARY)
        yield pb.StreamTurnResponse()  # pragma: no cover (makes this a generator)

    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            before = web.env.dump()
            monkeypatch.setattr(ChatRpcs, "stream_turn", broken)
            body = run_input("thread-bug", "r1", [user("u1", "/count")])
            failed = await post_run(web.http, "probe", body)
            assert failed.status == 500
            assert json.loads(failed.body)["error"]["code"] == "internal"
            assert CANARY not in failed.body.decode()
            assert web.env.dump() == before
            monkeypatch.undo()
            again = await post_run(web.http, "probe", body)
            assert again.types[-1] == "RUN_FINISHED"

    run(scenario())


def _assert_ids_increase(events: list[tuple[str | None, dict[str, Any]]]) -> None:
    ids = [tuple(int(part) for part in str(event_id).split(".")) for event_id, _ in events]
    assert ids == sorted(set(ids)), ids
