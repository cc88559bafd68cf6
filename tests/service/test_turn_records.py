"""Turn records derived from a session record: pages anchored on turns that move or go."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentskit_chat.conversation import (
    Lease,
    Message,
    Role,
    SessionRecord,
    TerminalTurn,
    create_chat_session,
    load_definition,
)
from agentskit_chat.service import Reason, ServiceError
from agentskit_chat.service._page_tokens import PageTokens
from agentskit_chat.service._turn_records import answer_origins, find_turn, list_turns

SUPPORT = load_definition(
    Path(__file__).resolve().parents[2] / "examples" / "definitions" / "support.yaml"
)
NOW = 1_700_000_000_000
SCOPE = PageTokens(b"k" * 32).scope("", "s1", "i1")


def record(turns: int, running: str | None = None) -> SessionRecord:
    base = SessionRecord.new(SUPPORT, "s1")
    for index in range(turns):
        base = base.with_turn(TerminalTurn(f"t{index}", "submit", "completed", NOW + index))
    if running is not None:
        base = base.evolve(lease=Lease(running, "here", NOW + 60_000, "retry", NOW, "u9"))
    return base


def ids(page_turns: tuple[object, ...]) -> list[str]:
    return [turn.turn_id for turn in page_turns]  # type: ignore[attr-defined]


def test_a_page_anchored_on_a_running_turn_continues_after_it_once_it_finished() -> None:
    first = list_turns(record(3, running="r"), 2, None, NOW, SCOPE)
    assert ids(first.turns) == ["r", "t2"]
    assert first.next_page_token is not None
    still_running = list_turns(record(3, running="r"), 1, None, NOW, SCOPE)
    assert still_running.next_page_token is not None
    # The running turn finished meanwhile: the next page starts after it.
    finished = record(3).with_turn(TerminalTurn("r", "retry", "completed", NOW + 10))
    after = list_turns(finished, 5, still_running.next_page_token, NOW, SCOPE)
    assert ids(after.turns) == ["t2", "t1", "t0"]
    # Still running: the next page starts at the newest finished turn.
    during = list_turns(record(3, running="r"), 5, still_running.next_page_token, NOW, SCOPE)
    assert ids(during.turns) == ["t2", "t1", "t0"]


def test_a_page_anchored_on_a_turn_no_longer_retained_is_empty() -> None:
    page = list_turns(record(3), 1, None, NOW, SCOPE)
    assert page.next_page_token is not None
    evicted = SessionRecord.new(SUPPORT, "s1").with_turn(
        TerminalTurn("later", "submit", "completed", NOW + 99)
    )
    rest = list_turns(evicted, 5, page.next_page_token, NOW, SCOPE)
    assert rest.turns == ()
    assert rest.next_page_token is None


def test_an_expired_lease_is_no_running_turn() -> None:
    expired = record(1, running="r")
    assert find_turn(expired, "r", NOW).outcome == "running"
    with pytest.raises(ServiceError) as missing:
        find_turn(expired, "r", NOW + 60_000)
    assert missing.value.reason is Reason.TURN_NOT_FOUND
    assert ids(list_turns(expired, 0, None, NOW + 60_000, SCOPE).turns) == ["t0"]


def test_origins_follow_the_decisions_even_when_an_answer_was_truncated() -> None:
    session = create_chat_session(SUPPORT, session_id="s1", digest_key=b"k" * 32)
    history = [Message("u1", Role.USER, "/start")]
    session.dispatch_sync(history)
    history += [Message("u2", Role.USER, "chat"), Message("a2", Role.ASSISTANT, "…")]
    base = SessionRecord.new(SUPPORT, "s1").evolve(conversation=session.state)
    origins = answer_origins(base, SUPPORT.conversation.initial, history)
    # u1's answer is gone, but its decision still moved the state to `collecting`.
    assert origins["a2"].kind == "agentic"
    assert (origins["a2"].from_state, origins["a2"].to_state) == ("collecting", "collecting")
    assert set(origins) == {"a2"}
