"""AG-UI resume: a run asked to continue outlives its connection, and the same POST with
`Last-Event-ID` continues it from the next event, losing nothing; otherwise a client that
goes away cancels its turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.transport.conftest import run
from tests.transport.web.agui.runs import post_run, run_input, user
from tests.transport.web.conftest import web_live
from tests.waiting import until

CONTINUE = {"agentskit-on-disconnect": "continue"}


def test_a_reconnect_with_last_event_id_continues_the_run_losing_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-r", "r1", [user("u1", "/slow")])
            # Cut after the first piece of the answer; the model waits on the gate.
            cut = await post_run(web.http, "probe", body, CONTINUE, stop_after=5)
            assert cut.types == [
                "RUN_STARTED",
                "STATE_SNAPSHOT",
                "CUSTOM",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
            ]
            last_id = cut.events[-1][0]
            assert last_id is not None
            resumed = asyncio.ensure_future(
                post_run(web.http, "probe", body, {"last-event-id": last_id})
            )
            # Following the running turn (a watcher of it), not replaying an end.
            await until(lambda: web.env.service.watchers.count("") == 1, "the resumed run's watch")
            assert not resumed.done()
            web.env.probe.gate.set()
            rest = await resumed
            assert rest.status == 200
            assert rest.types == ["TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"]
            whole = cut.events + rest.events
            ids = [event_id for event_id, _ in whole]
            assert len(set(ids)) == len(ids)
            assert "".join(e.get("delta", "") for _, e in whole) == "model answer"
            # The same run read whole afterwards gives the same events under the same ids.
            again = await post_run(web.http, "probe", body, {"last-event-id": "0.0"})
            assert again.events == whole[1:]
            # A resume past the end sends nothing more.
            end = await post_run(web.http, "probe", body, {"last-event-id": str(ids[-1])})
            assert (end.status, end.events) == (200, [])

    run(scenario())


def test_a_resume_of_an_unknown_run_is_not_found(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-n", "r1", [user("u1", "hi")])
            assert (await post_run(web.http, "probe", body)).status == 200
            other = run_input("thread-n", "nope", [user("u1", "hi")])
            missing = await post_run(web.http, "probe", other, {"last-event-id": "3.1"})
            assert missing.status == 404
            assert b"turn_not_found" in missing.body
            bad = await post_run(web.http, "probe", body, {"last-event-id": "three"})
            assert bad.status == 400
            assert b'"field":"Last-Event-ID"' in bad.body

    run(scenario())


def test_a_resume_under_another_definition_is_refused_as_a_run_is(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-d", "r1", [user("u1", "/count")])
            assert (await post_run(web.http, "probe", body)).types[-1] == "RUN_FINISHED"
            before = web.env.dump()
            plain = await post_run(web.http, "support", body)
            for last_id in ("0.0", "1.0"):
                resumed = await post_run(web.http, "support", body, {"last-event-id": last_id})
                assert (resumed.status, resumed.body) == (plain.status, plain.body)
                assert resumed.status == 409
                error = json.loads(resumed.body)["error"]
                assert (error["code"], error["field"]) == ("conflict", "threadId")
            assert web.env.dump() == before
            same = await post_run(web.http, "probe", body, {"last-event-id": "0.0"})
            assert same.types[-1] == "RUN_FINISHED"

    run(scenario())


def test_a_client_that_goes_away_cancels_its_turn_unless_asked_to_continue(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            body = run_input("thread-c", "r1", [user("u1", "/slow")])
            cut = await post_run(web.http, "probe", body, stop_after=5)
            assert cut.types[-1] == "TEXT_MESSAGE_CONTENT"
            await asyncio.wait_for(web.env.probe.model_closed.wait(), 60)
            # The cancelled turn id may run again, and nothing of it was kept.
            web.env.probe.gate.set()
            web.env.probe.model_closed.clear()
            again = await post_run(web.http, "probe", body)
            assert again.text() == "model answer"
            assert web.env.probe.model_calls == [1, 1]
            bad = await post_run(web.http, "probe", body, {"agentskit-on-disconnect": "maybe"})
            assert bad.status == 400
            assert b"AgentsKit-On-Disconnect" in bad.body

    run(scenario())
