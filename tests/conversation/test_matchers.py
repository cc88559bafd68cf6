"""Matchers: command equality, normalized exact text, RE2 full match, handlers."""

from __future__ import annotations

import pytest

from agentskit_chat.conversation import RouteContext, normalize_exact
from agentskit_chat.conversation._matchers import (
    CommandMatcher,
    ExactMatcher,
    PatternMatcher,
    RouteInput,
    groups_of,
)

CONTEXT = RouteContext(session_id="s", message_id="m")


def matches(matcher: object, text: str) -> object:
    return matcher.match(RouteInput(text), CONTEXT)  # type: ignore[attr-defined]


def test_command_is_exact_equality() -> None:
    matcher = CommandMatcher("/start")
    assert matches(matcher, "/start") == {}
    for other in ("/start ", " /start", "/START", "/starts"):
        assert matches(matcher, other) is None


@pytest.mark.parametrize(
    ("declared", "typed"),
    [
        ("Track order", "  track   ORDER "),
        ("Straße", "STRASSE"),
        ("/help", "\uff0f\uff48\uff45\uff4c\uff50"),  # full-width forms fold under NFKC
        ("café", "cafe\u0301"),  # combining accent composes
        ("new line", "new\n\tline"),
    ],
)
def test_exact_normalizes_both_sides(declared: str, typed: str) -> None:
    assert matches(ExactMatcher(declared), typed) == {}


def test_exact_still_distinguishes_different_words() -> None:
    assert matches(ExactMatcher("track order"), "track orders") is None
    assert normalize_exact("  A\u00a0B ") == "a b"


def test_pattern_must_match_the_whole_input() -> None:
    matcher = PatternMatcher(r"/name (?P<name>\S.*)")
    assert matches(matcher, "/name Ada Lovelace") == {"name": "Ada Lovelace"}
    assert matches(matcher, "say /name Ada") is None
    assert matches(PatternMatcher("/start"), "/start now") is None
    assert matches(matcher, "/name ") is None


def test_pattern_optional_group_that_did_not_take_part_is_empty() -> None:
    matcher = PatternMatcher(r"/order(?: #(?P<number>\d+))?")
    assert matches(matcher, "/order") == {"number": ""}
    assert matches(matcher, "/order #42") == {"number": "42"}


def test_pattern_literal_prefix_skip_does_not_change_results() -> None:
    matcher = PatternMatcher(r"/näme (?P<n>.+)")
    assert matches(matcher, "/näme Zoë") == {"n": "Zoë"}
    assert matches(matcher, "/name Zoe") is None
    case_free = PatternMatcher(r"(?i)hello")
    assert matches(case_free, "HeLLo") == {}


def test_pathological_pattern_and_input_complete() -> None:
    # Exponential on a backtracking engine; RE2 answers in linear time.
    matcher = PatternMatcher(r"(a+)+$")
    assert matches(matcher, "a" * 50_000 + "b") is None
    assert PatternMatcher(r"(x+x+)+y").error is None


def test_backtracking_only_features_are_invalid() -> None:
    assert PatternMatcher(r"(?=look)ahead").error
    assert PatternMatcher(r"(a)\1").error


def test_handler_results_normalize() -> None:
    assert groups_of(True) == {}
    assert groups_of(False) is None
    assert groups_of(None) is None
    assert groups_of({"a": 1}) == {"a": "1"}  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        groups_of("yes")  # type: ignore[arg-type]
