"""Replacing a catalog: what changes, and which changes are refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agentskit_chat.conversation import ChatDefinition, load_definitions
from agentskit_chat.service import Catalog, CatalogChanges, CatalogRefusedError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "definitions"


def examples() -> dict[str, ChatDefinition]:
    return load_definitions(EXAMPLES)


def test_identical_definitions_change_nothing() -> None:
    assert Catalog(examples().values()).changes_to(Catalog(examples().values())) == (
        CatalogChanges()
    )


def test_changes_are_sorted_into_added_removed_revised_and_updated() -> None:
    old = {key: value for key, value in examples().items() if key in ("support", "orders")}
    support, orders = old["support"], old["orders"]
    new = [
        dataclasses.replace(support, model={"adapter": "offline", "temperature": 0.2}),
        dataclasses.replace(orders, id="orders-2"),
    ]
    changes = Catalog(old.values()).changes_to(Catalog(new))
    assert changes == CatalogChanges(added=("orders-2",), removed=("orders",), updated=("support",))
    revised = dataclasses.replace(orders, revision=2, conversation=support.conversation)
    assert Catalog(old.values()).changes_to(Catalog([support, revised])).revised == ("orders",)
    assert str(changes) == "added orders-2; removed orders; updated support"


def test_a_conversation_changed_under_the_same_revision_is_refused_by_id() -> None:
    old = examples()
    changed = dataclasses.replace(old["orders"], conversation=old["support"].conversation)
    with pytest.raises(CatalogRefusedError) as refused:
        Catalog(old.values()).changes_to(Catalog([old["support"], changed]))
    assert refused.value.definition_ids == ["orders"]
    assert "raise the revision" in str(refused.value)
