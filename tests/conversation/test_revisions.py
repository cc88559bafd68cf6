"""Revisions side by side: rollout weights, declared migrations and what keeps revisions
from being served together."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from agentskit_chat.conversation import (
    ErrorCode,
    Message,
    MigrationRefusedError,
    Role,
    SessionRecord,
    create_chat_session,
    parse_definition,
    rollout_choice,
    served_together,
)

KEY = b"revisions-test-digest-key-32byte"


def first(**extra: Any) -> dict[str, Any]:
    return {
        "id": "shop",
        "revision": 1,
        "conversation": {
            "initial": "idle",
            "states": {
                "idle": {"on": {"start": "collecting"}},
                "collecting": {"on": {"finish": "complete"}},
                "complete": {"on": {"restart": "idle"}},
            },
            "routes": [
                {"id": "start", "command": "/start", "event": "start", "response": "Name?"},
                {"id": "finish", "command": "/done", "event": "finish", "response": "Done."},
                {"id": "restart", "command": "/again", "event": "restart", "response": "Again."},
            ],
        },
        **extra,
    }


def second(migration: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """Revision 2 renames `collecting` to `asking` and the route `finish` to `name`."""
    data: dict[str, Any] = {
        "id": "shop",
        "revision": 2,
        "conversation": {
            "initial": "idle",
            "states": {
                "idle": {"on": {"start": "asking"}},
                "asking": {"on": {"finish": "complete"}},
                "complete": {"on": {"restart": "idle"}},
            },
            "routes": [
                {"id": "start", "command": "/start", "event": "start", "response": "Name?"},
                {"id": "name", "command": "/done", "event": "finish", "response": "Thanks."},
                {"id": "restart", "command": "/again", "event": "restart", "response": "Again."},
            ],
        },
        **extra,
    }
    if migration is not None:
        data["migrations"] = [{"from": 1, **migration}]
    return data


MAPPED = {"states": {"collecting": "asking"}, "routes": {"finish": "name"}}


def record_after(*inputs: str) -> SessionRecord:
    """A revision 1 session's record after the user sent `inputs`, each a route command."""
    definition = parse_definition(first())
    session = create_chat_session(definition, session_id="s-1", digest_key=KEY)
    history: list[Message] = []
    for index, text in enumerate(inputs):
        history.append(Message(f"m{index}", Role.USER, text))
        session.dispatch_sync(history)
        history.append(Message(f"a{index}", Role.ASSISTANT, "answer"))
    return SessionRecord(
        session_id="s-1", definition_id="shop", revision=1, conversation=session.state
    )


def test_a_declared_migration_maps_states_and_routes_and_replays_in_the_new_revision() -> None:
    target = parse_definition(second(MAPPED))
    record = record_after("/start")
    assert record.state == "collecting"
    moved = record.migrated(target, target.migrations[1])
    assert (moved.revision, moved.state) == (2, "asking")
    (decision,) = moved.conversation.decisions.values()
    assert (decision.route_id, decision.from_state, decision.to_state) == (
        "start",
        "idle",
        "asking",
    )
    done = record_after("/start", "/done").migrated(target, target.migrations[1])
    assert [d.route_id for d in done.conversation.decisions.values()] == ["start", "name"]
    assert done.state == "complete"


@pytest.mark.parametrize(
    ("migration", "inputs", "code"),
    [
        ({"routes": {"finish": "name"}}, ("/start",), "unknown_state"),  # collecting unmapped
        ({"states": {"collecting": "asking"}}, ("/start", "/done"), "unknown_route"),
        ({"states": {"collecting": "asking"}, "routes": {"start": None}}, ("/start",), "replay"),
    ],
    ids=["state", "route", "replay"],
)
def test_a_session_whose_decisions_do_not_carry_over_is_refused_with_a_code(
    migration: dict[str, Any], inputs: tuple[str, ...], code: str
) -> None:
    target = parse_definition(second(migration))
    record = record_after(*inputs)
    with pytest.raises(MigrationRefusedError) as refused:
        record.migrated(target, target.migrations[1])
    assert refused.value.code == code


def test_new_sessions_split_by_weight_the_same_way_every_time() -> None:
    weighted = [(1, 75), (2, 25)]
    picks = Counter(rollout_choice(f"s-{n}", weighted, 2) for n in range(4000))
    assert 0.70 < picks[1] / 4000 < 0.80
    assert picks[1] + picks[2] == 4000
    assert [rollout_choice(f"s-{n}", weighted, 2) for n in range(50)] == [
        rollout_choice(f"s-{n}", list(reversed(weighted)), 2) for n in range(50)
    ]
    assert rollout_choice("s-1", [(1, 0), (2, 0)], 2) == 2
    assert {rollout_choice(f"s-{n}", [(1, 100), (2, 0)], 2) for n in range(200)} == {1}


def test_revisions_served_together_must_differ_and_their_migrations_must_fit() -> None:
    one, two = parse_definition(first(), file="a.yaml"), parse_definition(second(MAPPED))
    assert served_together([one, two]) == []
    again = parse_definition(first(), file="b.yaml")
    (duplicate,) = served_together([one, again])
    assert (duplicate.code, duplicate.file, duplicate.path) == (
        ErrorCode.DUPLICATE_DEFINITION,
        "b.yaml",
        "revision",
    )
    wrong = parse_definition(second({"states": {"missing": "asking"}}), file="c.yaml")
    (problem,) = served_together([one, wrong])
    assert (problem.code, problem.file, problem.path) == (
        ErrorCode.INVALID_MIGRATION,
        "c.yaml",
        "migrations[0].states.missing",
    )
    assert served_together([wrong]) == []  # revision 1 not served: nothing to check against
