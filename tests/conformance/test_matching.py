"""The corpus's matching rules, which every runner implements the same way."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from .harness import CORPUS
from .matching import lookup, match

CASES = yaml.safe_load((CORPUS / "matching-cases.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_the_shared_matching_cases(case: dict[str, Any]) -> None:
    assert (match(case["expected"], case["actual"]) == []) is case["matches"]


def test_a_mapping_matches_a_superset_and_names_what_differs() -> None:
    observed = {"decision": {"kind": "TURN_KIND_AGENTIC", "fromState": "idle"}, "extra": 1}
    assert match({"decision": {"kind": "TURN_KIND_AGENTIC"}}, observed) == []
    assert match({"decision": {"kind": "TURN_KIND_DETERMINISTIC"}}, observed) == [
        "decision.kind: expected 'TURN_KIND_DETERMINISTIC', got 'TURN_KIND_AGENTIC'"
    ]


def test_defaults_match_absent_keys_but_other_values_do_not() -> None:
    defaults: tuple[object, ...] = (False, 0, "", [], {})
    for default in defaults:
        assert match({"replayed": default}, {}) == []
    assert match({"replayed": True}, {}) == ["replayed: missing (expected True)"]
    assert match({"cursor": 2}, {}) != []


def test_absent_and_present() -> None:
    assert match({"routeId": "absent"}, {}) == []
    assert match({"routeId": "absent"}, {"routeId": "start"}) != []
    assert match({"routeId": "present"}, {"routeId": "start"}) == []
    assert match({"routeId": "present"}, {}) != []


def test_numbers_match_their_proto_json_strings_and_booleans_stay_booleans() -> None:
    assert match({"cursor": 2}, {"cursor": "2"}) == []
    assert match({"cursor": 2}, {"cursor": "3"}) != []
    assert match({"duplicate": True}, {"duplicate": 1}) != []


def test_lists_match_item_by_item_with_the_same_length() -> None:
    assert match({"actions": ["a", "b"]}, {"actions": ["a", "b"]}) == []
    assert match({"actions": ["a"]}, {"actions": ["a", "b"]}) != []
    assert match({"actions": ["b", "a"]}, {"actions": ["a", "b"]}) != []


@pytest.mark.parametrize(
    ("pattern", "kinds", "fits"),
    [
        (
            ["started", "decision", "delta+", "completed"],
            ["started", "decision", "completed"],
            False,
        ),
        (
            ["started", "decision", "delta+", "completed"],
            ["started", "decision", "delta", "delta", "completed"],
            True,
        ),
        (["started", "decision", "delta*", "failed"], ["started", "decision", "failed"], True),
        ([], [], True),
        ([], ["started"], False),
        (["started", "decision*"], ["started"], True),
    ],
)
def test_event_patterns(pattern: list[str], kinds: list[str], fits: bool) -> None:
    assert (match({"events": pattern}, {"events": kinds}) == []) is fits


def test_lookup_follows_keys_and_list_indexes() -> None:
    observed = {"messages": [{"id": "u1"}, {"id": "a1"}], "session": {"cursor": "2"}}
    assert lookup(observed, "messages.1.id") == "a1"
    assert lookup(observed, "session.cursor") == "2"
    with pytest.raises(KeyError):
        lookup(observed, "messages.2.id")
