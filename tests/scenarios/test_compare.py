"""Comparing two revisions: each case runs on both, the turns that differ are listed, and a
rename the newer revision's migration declares is not a change."""

from __future__ import annotations

import asyncio

from agentskit_chat.conversation import load_yaml
from agentskit_chat.scenarios import (
    CaseComparison,
    InProcessTarget,
    Outcome,
    compare_file,
    comparison_report,
    comparison_totals,
    parse_test_file,
)
from tests.scenarios.revisions import NEW, OLD, TESTS, definition


def compared(*, with_migration: bool = True, tests: str = TESTS) -> list[CaseComparison]:
    old, new = definition(OLD), definition(NEW)
    migrations = {"support": new.migrations[1]} if with_migration else {}
    test_file = parse_test_file(load_yaml(tests), file="support.test.yaml")

    async def main() -> list[CaseComparison]:
        # both served side by side, each side pinned to one: nothing may migrate
        before = InProcessTarget([old], revision=1)
        after = InProcessTarget([new], revision=2)
        try:
            return await compare_file(before, after, test_file, migrations)
        finally:
            await before.close()
            await after.close()

    return asyncio.run(main())


def test_each_changed_turn_is_listed_with_old_and_new_kind_route_and_state() -> None:
    results = {r.name: r for r in compared()}
    (cancel,) = results["cancel while collecting"].changes
    assert (cancel.index, cancel.title) == (2, "submit '/cancel'")
    assert cancel.old == Outcome("agentic", None, "collecting")
    assert cancel.new == Outcome("deterministic", "cancel", "idle")
    assert cancel.fields == ("kind", "route", "state")
    assert results["anything else goes to the model"].changes == ()
    assert comparison_totals(list(results.values())) == (2, 1, 0, 0)


def test_a_rename_the_migration_declares_is_shown_but_not_a_change() -> None:
    results = {r.name: r for r in compared()}
    (renamed,) = results["collects a name"].changes
    assert renamed.old == Outcome("deterministic", "finish", "complete")
    assert renamed.new == Outcome("deterministic", "name", "done")
    assert (renamed.fields, renamed.renames) == ((), ("route", "state"))
    assert not results["collects a name"].changed


def test_without_a_migration_a_rename_is_a_change() -> None:
    results = {r.name: r for r in compared(with_migration=False)}
    (renamed,) = results["collects a name"].changes
    assert renamed.fields == ("route", "state")
    assert results["collects a name"].changed


def test_the_report_lists_each_changed_turn_under_its_file_and_case() -> None:
    report = comparison_report(compared(), "revision 1", "revision 2")
    assert report.splitlines() == [
        "comparing revision 1 -> revision 2",
        "support.test.yaml",
        "  renamed  collects a name (2 steps)",
        "           step 2 of 2: submit '/name Ada'",
        "             kind   deterministic",
        "             route  finish -> name  (renamed by the migration)",
        "             state  complete -> done  (renamed by the migration)",
        "  same     anything else goes to the model (1 step)",
        "  CHANGED  cancel while collecting",
        "           step 2 of 2: submit '/cancel'",
        "             kind   agentic -> deterministic",
        "             route  none -> cancel",
        "             state  collecting -> idle",
        "2 same (1 renamed by the migration), 1 changed (1 turn)",
    ]


def test_a_case_whose_chat_a_side_does_not_serve_is_skipped() -> None:
    tests = TESTS.replace("definition: support", "definition: orders")
    results = compared(tests=tests)
    assert {r.skipped for r in results} == {"the old side does not serve it"}
    assert comparison_totals(results) == (0, 0, 3, 0)
