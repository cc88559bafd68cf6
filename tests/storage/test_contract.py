"""The Store contract, run against the memory, the SQLite and the PostgreSQL backend."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from agentskit_chat.storage import (
    HistoryChange,
    HistoryMode,
    MemoryStore,
    PostgresqlStore,
    SessionExistsError,
    SqliteStore,
    Store,
    StoredMessage,
    StoreUnavailableError,
)

from .conftest import message, run, session


def test_backends_satisfy_the_port_and_close_unused(tmp_path: Path) -> None:
    async def body() -> None:
        stores: list[Store] = [
            MemoryStore(),
            SqliteStore(tmp_path / "unused.db"),
            PostgresqlStore("postgresql://nobody@127.0.0.1:1/unused"),
        ]
        for unused in stores:
            await unused.close()

    run(body())
    assert not (tmp_path / "unused.db").exists()


def test_create_then_load_returns_the_session(store: Store) -> None:
    created = session(record=b"\x00\xffrecord")
    run(store.create(created))
    assert run(store.load("s1")) == created
    assert run(store.load("unknown")) is None


def test_duplicate_create_raises_and_keeps_the_first(store: Store) -> None:
    first = session(record=b"first")
    run(store.create(first))
    with pytest.raises(SessionExistsError):
        run(store.create(replace(first, record=b"second", definition_id="other")))
    assert run(store.load("s1")) == first


def test_compare_and_set_replaces_the_session(store: Store) -> None:
    run(store.create(session()))
    updated = replace(session(cursor=1, record=b"r1"), history_mode=HistoryMode.CLIENT)
    assert run(store.compare_and_set(updated, expected_cursor=0)) is True
    assert run(store.load("s1")) == updated
    again = session(cursor=2, record=b"r2")
    assert run(store.compare_and_set(again, expected_cursor=1)) is True
    assert run(store.load("s1")) == again


def test_stale_cursor_changes_nothing(store: Store) -> None:
    run(store.create(session()))
    first = session(cursor=1, record=b"r1")
    history = HistoryChange(keep=0, append=(message(1), message(2)))
    assert run(store.compare_and_set(first, expected_cursor=0, history=history)) is True
    stale = session(cursor=1, record=b"stale")
    change = HistoryChange(keep=0, append=(message(9),))
    assert run(store.compare_and_set(stale, expected_cursor=0, history=change)) is False
    assert run(store.compare_and_set(stale, expected_cursor=0)) is False
    assert run(store.load("s1")) == first
    assert list(run(store.list_messages("s1"))) == [message(1), message(2)]


def test_an_expected_record_must_be_the_stored_one(store: Store) -> None:
    run(store.create(session(record=b"r0\x00held")))
    first = session(cursor=1, record=b"r1")
    history = HistoryChange(keep=0, append=(message(1),))
    for other in (b"r0", b"r0\x00held\x00", b""):
        assert not run(
            store.compare_and_set(first, expected_cursor=0, history=history, expected_record=other)
        )
        assert not run(store.compare_and_set(first, expected_cursor=0, expected_record=other))
    assert run(store.load("s1")) == session(record=b"r0\x00held")
    assert list(run(store.list_messages("s1"))) == []
    held = b"r0\x00held"
    assert run(
        store.compare_and_set(first, expected_cursor=0, history=history, expected_record=held)
    )
    second = session(cursor=2, record=b"r2")
    assert not run(store.compare_and_set(second, expected_cursor=1, expected_record=held))
    assert run(store.compare_and_set(second, expected_cursor=1, expected_record=b"r1"))
    assert run(store.load("s1")) == second
    assert list(run(store.list_messages("s1"))) == [message(1)]


def test_another_incarnation_of_the_session_id_changes_nothing(store: Store) -> None:
    run(store.create(replace(session(), incarnation="first")))
    run(store.delete("s1"))
    second = replace(session(), incarnation="second")
    run(store.create(second))
    stale = replace(session(cursor=1, record=b"stale"), incarnation="first")
    change = HistoryChange(keep=0, append=(message(9),))
    assert run(store.compare_and_set(stale, expected_cursor=0, history=change)) is False
    assert run(store.load("s1")) == second
    assert list(run(store.list_messages("s1"))) == []
    current = replace(session(cursor=1, record=b"r1"), incarnation="second")
    assert run(store.compare_and_set(current, expected_cursor=0)) is True
    assert run(store.load("s1")) == current


def test_compare_and_set_on_a_missing_session_writes_nothing(store: Store) -> None:
    history = HistoryChange(keep=0, append=(message(1),))
    assert (
        run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=history)) is False
    )
    assert run(store.load("s1")) is None
    assert list(run(store.list_messages("s1"))) == []


@pytest.mark.parametrize(("cursor", "expected"), [(1, 1), (0, 0), (3, 1)])
def test_cursor_must_advance_by_one(store: Store, cursor: int, expected: int) -> None:
    run(store.create(session()))
    with pytest.raises(ValueError, match="expected_cursor"):
        run(store.compare_and_set(session(cursor=cursor), expected_cursor=expected))
    assert run(store.load("s1")) == session()


def test_negative_keep_is_rejected(store: Store) -> None:
    run(store.create(session()))
    history = HistoryChange(keep=-1)
    with pytest.raises(ValueError, match="keep"):
        run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=history))
    assert run(store.load("s1")) == session()


def test_keep_beyond_the_history_is_rejected_and_writes_nothing(store: Store) -> None:
    run(store.create(session()))
    one = HistoryChange(keep=0, append=(message(1),))
    run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=one))
    gap = HistoryChange(keep=2, append=(message(2),))
    with pytest.raises(ValueError, match="keep"):
        run(store.compare_and_set(session(cursor=2), expected_cursor=1, history=gap))
    assert run(store.load("s1")) == session(cursor=1)
    assert list(run(store.list_messages("s1"))) == [message(1)]


def test_history_changes_keep_then_append(store: Store) -> None:
    async def body() -> None:
        await store.create(session())
        cursor = 0

        async def change(keep: int, *numbers: int) -> list[int]:
            nonlocal cursor
            appended = tuple(message(n) for n in numbers)
            history = HistoryChange(keep=keep, append=appended)
            saved = session(cursor=cursor + 1, record=f"r{cursor + 1}".encode())
            assert await store.compare_and_set(saved, expected_cursor=cursor, history=history)
            cursor += 1
            messages = await store.list_messages("s1")
            return [int(m.message_id[1:]) for m in messages]

        assert await change(0, 1, 2) == [1, 2]
        assert await change(2, 3, 4) == [1, 2, 3, 4]
        assert await change(4) == [1, 2, 3, 4]
        assert await change(2, 5) == [1, 2, 5]
        assert await change(1) == [1]
        assert await change(0) == []
        assert await change(0, 6, 7, 8) == [6, 7, 8]
        assert await change(3, 9) == [6, 7, 8, 9]
        assert await change(0, 10) == [10]

    run(body())


def test_compare_and_set_without_history_keeps_the_messages(store: Store) -> None:
    run(store.create(session()))
    history = HistoryChange(keep=0, append=(message(1), message(2)))
    run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=history))
    assert run(store.compare_and_set(session(cursor=2), expected_cursor=1)) is True
    assert list(run(store.list_messages("s1"))) == [message(1), message(2)]


def test_messages_round_trip_unchanged(store: Store) -> None:
    run(store.create(session()))
    appended = (
        message(1, "ünïcödé ✓ \x00 nul"),
        message(2, "line\nbreak\ttab 'quotes' \"double\" ; DROP TABLE messages; --"),
        message(3, "x" * 100_000),
    )
    history = HistoryChange(keep=0, append=appended)
    run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=history))
    assert tuple(run(store.list_messages("s1"))) == appended


def test_message_ids_and_roles_round_trip_unchanged(store: Store) -> None:
    run(store.create(session()))
    odd = ('a "quoted" id', "back\\slash\\", "{braces},comma", "NULL", " padded ", "ünï ✓", "")
    appended = tuple(StoredMessage(text, text, f"text {text}") for text in odd)
    history = HistoryChange(keep=0, append=appended)
    run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=history))
    assert tuple(run(store.list_messages("s1"))) == appended
    found = run(store.load_with_messages("s1"))
    assert found is not None
    assert found[1] == appended


CALLS = json.dumps(
    {"calls": [["c1", "lookup", '{"order": "A-1", "note": "ünï ✓ {x},\\\\ \\u0000"}']]},
    separators=(",", ":"),
    ensure_ascii=False,
)
"""An assistant message's tool calls, as the service stores them: quotes, backslashes,
braces and commas, non-ASCII text and an escaped NUL."""


def tooled(n: int, tools: str) -> StoredMessage:
    return replace(message(n), tools=tools)


def test_message_tools_round_trip_through_saves_reopens_and_changes(
    store: Store, reopen: Callable[[], Store]
) -> None:
    answer = json.dumps({"call": "c1"}, separators=(",", ":"))
    first = (message(1), tooled(2, CALLS), tooled(3, answer))
    run(store.create(session()))
    history = HistoryChange(keep=0, append=first)
    assert run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=history))
    assert tuple(run(store.list_messages("s1"))) == first
    assert [m.tools for m in first] == ["", CALLS, answer]

    reopened = reopen()
    assert tuple(run(reopened.list_messages("s1"))) == first
    assert run(reopened.load_with_messages("s1")) == (session(cursor=1), first)

    # The tool message is replaced: the one appended in its place keeps its own tool data.
    again = (tooled(3, '{"call":"c2"}'), message(4))
    history = HistoryChange(keep=2, append=again)
    assert run(reopened.compare_and_set(session(cursor=2), expected_cursor=1, history=history))
    assert tuple(run(reopened.list_messages("s1"))) == first[:2] + again
    # Truncated to the first message, then an answer with tool calls appended after it.
    history = HistoryChange(keep=1, append=(tooled(5, CALLS),))
    assert run(reopened.compare_and_set(session(cursor=3), expected_cursor=2, history=history))
    expected = (message(1), tooled(5, CALLS))
    assert tuple(run(reopened.list_messages("s1"))) == expected
    assert run(reopened.load_with_messages("s1")) == (session(cursor=3), expected)
    # A save without a history change keeps the tool data.
    assert run(reopened.compare_and_set(session(cursor=4), expected_cursor=3))
    assert tuple(run(reopened.list_messages("s1"))) == expected


def test_histories_are_per_session(store: Store) -> None:
    run(store.create(session("a")))
    run(store.create(session("b")))
    run(
        store.compare_and_set(
            session("a", cursor=1),
            expected_cursor=0,
            history=HistoryChange(keep=0, append=(message(1),)),
        )
    )
    assert list(run(store.list_messages("a"))) == [message(1)]
    assert list(run(store.list_messages("b"))) == []
    assert run(store.load("b")) == session("b")


def test_delete_removes_the_session_and_its_messages(store: Store) -> None:
    run(store.create(session()))
    history = HistoryChange(keep=0, append=(message(1),))
    run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=history))
    assert run(store.delete("s1")) is True
    assert run(store.load("s1")) is None
    assert list(run(store.list_messages("s1"))) == []
    assert run(store.delete("s1")) is False
    run(store.create(session()))
    assert list(run(store.list_messages("s1"))) == []


def test_delete_at_an_expected_cursor_removes_only_at_that_cursor(store: Store) -> None:
    run(store.create(session()))
    history = HistoryChange(keep=0, append=(message(1),))
    run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=history))
    assert run(store.delete("s1", expected_cursor=0)) is False
    assert run(store.load("s1")) == session(cursor=1)
    assert list(run(store.list_messages("s1"))) == [message(1)]
    assert run(store.delete("s1", expected_cursor=1)) is True
    assert run(store.load("s1")) is None
    assert list(run(store.list_messages("s1"))) == []
    assert run(store.delete("s1", expected_cursor=1)) is False


def test_list_messages_of_an_unknown_session_is_empty(store: Store) -> None:
    assert list(run(store.list_messages("nobody"))) == []


def test_returned_values_cannot_change_the_store(store: Store) -> None:
    run(store.create(session()))
    history = HistoryChange(keep=0, append=(message(1),))
    run(store.compare_and_set(session(cursor=1), expected_cursor=0, history=history))
    messages = run(store.list_messages("s1"))
    with pytest.raises(AttributeError):
        messages.append(message(2))  # type: ignore[attr-defined]
    loaded = run(store.load("s1"))
    assert loaded is not None
    with pytest.raises(AttributeError):
        loaded.cursor = 99  # type: ignore[misc]
    assert run(store.load("s1")) == session(cursor=1)
    assert list(run(store.list_messages("s1"))) == [message(1)]


def test_concurrent_compare_and_set_has_one_winner(store: Store) -> None:
    async def body() -> list[bool]:
        await store.create(session())
        contenders = [
            store.compare_and_set(
                session(cursor=1, record=f"task {n}".encode()),
                expected_cursor=0,
                history=HistoryChange(keep=0, append=(message(n),)),
            )
            for n in range(16)
        ]
        return await asyncio.gather(*contenders)

    results = run(body())
    assert results.count(True) == 1
    winner = results.index(True)
    assert run(store.load("s1")) == session(cursor=1, record=f"task {winner}".encode())
    assert list(run(store.list_messages("s1"))) == [message(winner)]


def test_close_is_idempotent_and_later_calls_fail(store: Store) -> None:
    run(store.create(session()))
    run(store.close())
    run(store.close())
    with pytest.raises(StoreUnavailableError):
        run(store.load("s1"))
    with pytest.raises(StoreUnavailableError):
        run(store.create(session("s2")))
