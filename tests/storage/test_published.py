"""The DefinitionStore contract (definitions each process publishes for the others), run
against the memory, the SQLite and the PostgreSQL backend."""

from __future__ import annotations

import pytest

from agentskit_chat.storage import FoundDefinition, PublishedDefinition, Store

from .conftest import run

NOW = 1_700_000_000_000
LATER = NOW + 60_000


def document(definition_id: str, revision: int) -> PublishedDefinition:
    text = f'{{"id": "{definition_id}", "revision": {revision}, "note": "é\\u0000"}}'
    return PublishedDefinition(definition_id, revision, text)


def find(store: Store, definition_id: str, revision: int, now: int = NOW) -> str | None:
    found = run(store.published_definition(definition_id, revision, now_ms=now))
    return None if found is None else found.document


def test_a_published_revision_reads_back_until_it_expires(store: Store) -> None:
    published = [document("support", 1), document("support", 2), document("sales", 1)]
    run(store.publish_definitions("a", published, expires_at_ms=LATER, now_ms=NOW))
    assert run(store.published_definition("support", 2, now_ms=NOW)) == FoundDefinition(
        published[1].document, LATER
    )
    assert find(store, "sales", 1) == published[2].document
    assert find(store, "support", 3) is None
    assert find(store, "other", 1) is None
    assert find(store, "support", 1, now=LATER - 1) == published[0].document
    assert find(store, "support", 1, now=LATER) is None


def test_publishing_again_replaces_the_publishers_rows_only(store: Store) -> None:
    run(store.publish_definitions("a", [document("support", 1)], expires_at_ms=LATER, now_ms=NOW))
    run(store.publish_definitions("b", [document("support", 2)], expires_at_ms=LATER, now_ms=NOW))
    run(store.publish_definitions("a", [document("support", 3)], expires_at_ms=LATER, now_ms=NOW))
    assert find(store, "support", 1) is None
    assert find(store, "support", 2) == document("support", 2).document
    assert find(store, "support", 3) == document("support", 3).document
    run(store.publish_definitions("b", [], expires_at_ms=LATER, now_ms=NOW))  # withdrawn
    assert find(store, "support", 2) is None
    assert find(store, "support", 3) is not None


def test_the_row_expiring_last_answers_when_publishers_share_a_revision(store: Store) -> None:
    first = PublishedDefinition("support", 1, '{"from": "a"}')
    second = PublishedDefinition("support", 1, '{"from": "b"}')
    run(store.publish_definitions("a", [first], expires_at_ms=LATER, now_ms=NOW))
    run(store.publish_definitions("b", [second], expires_at_ms=LATER + 5, now_ms=NOW))
    assert run(store.published_definition("support", 1, now_ms=NOW)) == FoundDefinition(
        second.document, LATER + 5
    )
    assert find(store, "support", 1, now=LATER + 5) is None


def test_a_publish_drops_every_expired_row(store: Store) -> None:
    run(store.publish_definitions("a", [document("support", 1)], expires_at_ms=NOW, now_ms=0))
    run(store.publish_definitions("b", [document("support", 2)], expires_at_ms=LATER, now_ms=NOW))
    # Read as of a moment before both expiries: the row of `a` is gone, not just hidden.
    assert find(store, "support", 1, now=0) is None
    assert find(store, "support", 2, now=0) is not None


def test_a_revision_twice_in_one_publish_is_refused_and_stores_nothing(store: Store) -> None:
    run(store.publish_definitions("a", [document("support", 1)], expires_at_ms=LATER, now_ms=NOW))
    twice = [document("support", 2), document("support", 2)]
    with pytest.raises(ValueError, match="once"):
        run(store.publish_definitions("a", twice, expires_at_ms=LATER, now_ms=NOW))
    with pytest.raises(ValueError, match="start at 1"):
        run(
            store.publish_definitions(
                "a", [document("support", 0)], expires_at_ms=LATER, now_ms=NOW
            )
        )
    assert find(store, "support", 1) == document("support", 1).document
    assert find(store, "support", 2) is None
