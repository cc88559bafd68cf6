"""Revisions served side by side by the service: pinned and rolled-out new sessions, a
session kept on its revision, migrated at its next turn when the newer revision declares
it, or left where it is with the reason in its record."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentskit_chat.conversation import MigrationBlock, parse_definition
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Reason,
    ServiceError,
    Submit,
    TurnReport,
    TurnRequest,
)
from agentskit_chat.storage import HistoryMode, MemoryStore
from tests.conversation.test_revisions import MAPPED, first, second

KEY = b"revisions-service-test-key-32byt"
ONE = parse_definition(first())
TWO = parse_definition(second(MAPPED))


class Reports:
    def __init__(self) -> None:
        self.reports: list[TurnReport] = []

    def turn_finished(self, report: TurnReport) -> None:
        self.reports.append(report)


def service(*definitions: Any, store: MemoryStore | None = None) -> tuple[ChatService, Reports]:
    reports = Reports()
    chat = ChatService(
        Catalog(definitions), store or MemoryStore(), digest_key=KEY, observer=reports
    )
    return chat, reports


async def turn(chat: ChatService, session_id: str, turn_id: str, text: str) -> Completed:
    events = [e async for e in chat.run_turn(TurnRequest(session_id, turn_id, Submit(text)))]
    assert isinstance(events[-1], Completed), events[-1]
    return events[-1]


def test_a_session_keeps_its_revision_and_a_pinned_one_gets_the_revision_it_names() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        old, _ = service(ONE, store=store)
        view = await old.create_session("shop", None, HistoryMode.SERVER)
        await turn(old, view.session_id, "t1", "/start")
        new, _ = service(ONE, parse_definition(second()), store=store)  # no migration declared
        assert (await new.create_session("shop", None, HistoryMode.SERVER)).revision == 2
        pinned = await new.create_session("shop", None, HistoryMode.SERVER, revision=1)
        assert pinned.revision == 1
        done = await turn(new, view.session_id, "t2", "/done")
        assert done.snapshot.state == "complete"  # revision 1's statechart still runs it
        got = await new.get_session(view.session_id)
        assert got.session.revision == 1
        with pytest.raises(ServiceError) as refused:
            await new.create_session("shop", None, HistoryMode.SERVER, revision=3)
        assert refused.value.reason is Reason.REVISION_MISMATCH
        assert refused.value.metadata["definition_revision"] == "3"
        only_two, _ = service(parse_definition(second()), store=store)
        with pytest.raises(ServiceError) as gone:
            await only_two.get_session(view.session_id)
        assert gone.value.reason is Reason.REVISION_MISMATCH
        assert gone.value.metadata["definition_revision"] == "1"

    asyncio.run(scenario())


def test_a_session_moves_to_the_newer_revision_at_its_next_turn_as_a_stored_change() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        old, _ = service(ONE, store=store)
        view = await old.create_session("shop", None, HistoryMode.SERVER)
        await turn(old, view.session_id, "t1", "/start")
        before = await store.load(view.session_id)
        assert before is not None
        new, reports = service(ONE, TWO, store=store)
        got = await new.get_session(view.session_id)
        assert got.session.revision == 1  # reading a session moves nothing
        done = await turn(new, view.session_id, "t2", "/done")
        assert done.content == "Thanks."  # answered by revision 2's route `name`
        assert done.snapshot.state == "complete"
        after = await store.load(view.session_id)
        assert after is not None
        assert after.revision == 2
        assert after.cursor == before.cursor + 2  # the move, then the turn
        migration = reports.reports[-1].migration
        assert migration is not None
        assert (migration.from_revision, migration.to_revision, migration.outcome) == (
            1,
            2,
            "migrated",
        )
        assert reports.reports[-1].revision == 2
        await turn(new, view.session_id, "t3", "/again")
        assert reports.reports[-1].migration is None  # moved once

    asyncio.run(scenario())


def test_a_session_that_cannot_move_stays_and_its_record_says_why_once() -> None:
    broken = parse_definition(second({"routes": {"finish": "name"}}))  # `collecting` unmapped

    async def scenario() -> None:
        store = MemoryStore()
        old, _ = service(ONE, store=store)
        view = await old.create_session("shop", None, HistoryMode.SERVER)
        await turn(old, view.session_id, "t1", "/start")
        new, reports = service(ONE, broken, store=store)
        done = await turn(new, view.session_id, "t2", "/done")
        assert done.content == "Done."  # revision 1 answered
        stayed = await new.get_session(view.session_id)
        assert stayed.session.revision == 1
        assert stayed.session.blocked == MigrationBlock(2, "unknown_state")
        first_try = reports.reports[-1].migration
        assert first_try is not None
        assert (first_try.outcome, first_try.code) == ("stayed", "unknown_state")
        cursor = stayed.session.cursor
        await turn(new, view.session_id, "t3", "/again")
        again = await new.get_session(view.session_id)
        assert again.session.cursor == cursor + 1  # the turn only: the reason is not written again

    asyncio.run(scenario())


def test_new_sessions_split_by_rollout_weight_and_sessions_follow_their_share() -> None:
    half_one = parse_definition(first(rollout=50))
    half_two = parse_definition(second(MAPPED, rollout=50))

    async def scenario() -> None:
        chat, _ = service(half_one, half_two)
        views = [
            await chat.create_session("shop", f"s-{n:04d}", HistoryMode.SERVER) for n in range(200)
        ]
        revisions = [v.revision for v in views]
        assert 70 < revisions.count(1) < 130
        again, _ = service(half_one, half_two)  # another replica: the same split
        assert [again.catalog.for_new_session("shop", v.session_id).revision for v in views] == (
            revisions
        )
        served = chat.served_revisions("shop")
        assert [(s.revision, s.weight, s.migrates_from) for s in served] == [
            (1, 50, ()),
            (2, 50, (1,)),
        ]
        # A session of revision 1 whose id the rollout gives revision 2 moves; the others stay.
        pinned = [
            await chat.create_session("shop", f"p-{n:04d}", HistoryMode.SERVER, revision=1)
            for n in range(40)
        ]
        for view in pinned:
            await turn(chat, view.session_id, "t1", "/start")
        moved = [(await chat.get_session(v.session_id)).session.revision for v in pinned]
        expected = [chat.catalog.for_new_session("shop", v.session_id).revision for v in pinned]
        assert moved == expected
        assert set(moved) == {1, 2}

    asyncio.run(scenario())


def test_an_answer_whose_route_a_migration_dropped_keeps_its_recorded_origin() -> None:
    # Revision 2 starts where revision 1's `start` led, and drops that route: its decisions
    # go, and the rest replay from the new initial state.
    data = second({**MAPPED, "routes": {"finish": "name", "start": None}})
    conversation = data["conversation"]
    conversation["initial"] = "asking"
    conversation["states"] = {
        "asking": {"on": {"finish": "complete"}},
        "complete": {"on": {"restart": "asking"}},
    }
    conversation["routes"] = conversation["routes"][1:]
    dropped = parse_definition(data)

    async def scenario() -> None:
        store = MemoryStore()
        old, _ = service(ONE, store=store)
        view = await old.create_session("shop", None, HistoryMode.SERVER)
        await turn(old, view.session_id, "t1", "/start")
        await turn(old, view.session_id, "t2", "/done")
        new, reports = service(ONE, dropped, store=store)
        again = await turn(new, view.session_id, "t3", "/again")
        assert again.snapshot.state == "asking"
        assert reports.reports[-1].migration is not None
        got = await new.get_session(view.session_id)
        assert got.session.revision == 2
        answers = [got.origins[m.id] for m in got.messages if m.id in got.origins]
        assert [(o.kind, o.route_id, o.to_state) for o in answers] == [
            ("deterministic", "start", "collecting"),  # dropped from the log, as recorded
            ("deterministic", "name", "complete"),
            ("deterministic", "restart", "asking"),
        ]

    asyncio.run(scenario())


def test_a_weight_on_the_new_revision_leaves_the_rest_to_the_newest_without_one() -> None:
    canary = Catalog([ONE, parse_definition(second(MAPPED, rollout=20))])
    assert canary.weights("shop") == [(1, 80), (2, 20)]
    held = Catalog([ONE, parse_definition(second(MAPPED, rollout=0))])
    assert held.weights("shop") == [(1, 100), (2, 0)]
    assert held.migration_for(ONE, "s-any") is None  # nobody is sent to revision 2
    plain = Catalog([ONE, TWO])
    assert plain.weights("shop") == [(1, 0), (2, 100)]
    both = Catalog([parse_definition(first(rollout=70)), parse_definition(second(rollout=70))])
    assert both.weights("shop") == [(1, 70), (2, 70)]  # proportions: half each
