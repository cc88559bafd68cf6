"""Two revisions side by side: every case runs on an old and a new target, and each step's
kind, route and state are compared. Expectations are not checked; what is reported is
what changes between the two.

When the newer revision declares a migration from the older one, a route or state it
renames is not a change: the report shows the rename, and only what the migration does
not explain counts.

A case whose definition one side does not serve (`DEFINITION_NOT_FOUND`,
`REVISION_MISMATCH`) is skipped, not failed: a directory's other chats are not part of
the comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass

from agentskit_chat.conversation import Migration

from ._observe import Observation
from ._runner import StepError, perform
from ._spec import Case, TestFile
from ._targets import Target

_NOT_SERVED = frozenset({"DEFINITION_NOT_FOUND", "REVISION_MISMATCH"})


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one side observed at a step: the three things a comparison looks at."""

    kind: str
    """The turn's kind; `failed (code)` or `refused (reason)` when it did not complete,
    `no turn` for a truncation and `not run (why)` for a step that could not run."""
    route: str | None
    state: str

    @classmethod
    def of(cls, observed: Observation) -> Outcome:
        """The outcome of a step's observation."""
        if observed.error is not None:
            return cls(f"refused ({observed.error})", None, observed.state)
        if observed.failed is not None:
            return cls(f"failed ({observed.failed})", observed.route, observed.state)
        return cls(observed.kind or "no turn", observed.route, observed.state)

    def renamed(self, migration: Migration | None) -> Outcome:
        """This outcome in the names `migration` gives its route and state."""
        if migration is None:
            return self
        route = None if self.route is None else migration.route(self.route)
        state = migration.state(self.state) if self.state else self.state
        return Outcome(self.kind, route, state)


@dataclass(frozen=True, slots=True)
class StepChange:
    """A step whose kind, route or state differs between the two sides."""

    index: int
    """1-based position of the step in its case."""
    title: str
    """The step's description, as the test report prints it."""
    old: Outcome
    new: Outcome
    migration: Migration | None = None
    """The newer revision's migration from the older one, if it declares one."""

    @property
    def fields(self) -> tuple[str, ...]:
        """What changed beyond the migration's renames: some of `kind`, `route`, `state`."""
        return _differ(self.old.renamed(self.migration), self.new)

    @property
    def renames(self) -> tuple[str, ...]:
        """What differs only by a rename the migration declares."""
        return tuple(name for name in _differ(self.old, self.new) if name not in self.fields)


@dataclass(frozen=True, slots=True)
class CaseComparison:
    """One case run on both sides."""

    file: str
    name: str
    steps: int
    changes: tuple[StepChange, ...] = ()
    """The steps that differ, in order, renames included; empty when the case behaves
    the same."""
    skipped: str = ""
    """Why the case was not compared: a side does not serve its definition."""
    error: str = ""
    """Why the case could not run on a side (an unreachable target, a refused session)."""

    @property
    def changed(self) -> bool:
        """True when a step changed beyond the migration's renames."""
        return any(change.fields for change in self.changes)


async def compare_file(
    old: Target,
    new: Target,
    test_file: TestFile,
    migrations: Mapping[str, Migration] | None = None,
) -> list[CaseComparison]:
    """Every case of `test_file`, run on `old` and on `new`, in order; `migrations` holds
    the newer revision's migration from the older one by definition id."""
    found = migrations or {}
    return [
        await compare_case(old, new, test_file.path, case, found.get(case.definition))
        for case in test_file.cases
    ]


async def compare_case(
    old: Target, new: Target, file: str, case: Case, migration: Migration | None = None
) -> CaseComparison:
    """One case in a new session on each side; the steps that differ."""
    observed: list[list[Outcome]] = []
    for side, target in (("old", old), ("new", new)):
        outcomes, refused = await _observe(target, case)
        if refused in _NOT_SERVED:
            return CaseComparison(
                file, case.name, len(case.steps), skipped=f"the {side} side does not serve it"
            )
        if refused is not None:
            return CaseComparison(file, case.name, len(case.steps), error=f"{side}: {refused}")
        observed.append(outcomes)
    changes = tuple(
        StepChange(index, step.title, before, after, migration)
        for index, (step, before, after) in enumerate(
            zip(case.steps, observed[0], observed[1], strict=True), 1
        )
        if before != after
    )
    return CaseComparison(file, case.name, len(case.steps), changes)


async def _observe(target: Target, case: Case) -> tuple[list[Outcome], str | None]:
    """Each step's outcome, every step run whatever it observes; or the reason the case
    could not run (a refused session's reason, or the target's error)."""
    session_id, refused = await target.start_session(case.definition)
    if refused is not None:
        return [], refused
    outcomes: list[Outcome] = []
    try:
        for step in case.steps:
            try:
                outcomes.append(Outcome.of(await perform(target, session_id, step)))
            except StepError as problem:
                outcomes.append(Outcome(f"not run ({problem})", None, ""))
    except Exception as exc:  # a broken target must fail the case, not the run
        return [], f"{type(exc).__name__}: {exc}"
    finally:
        with suppress(Exception):  # the outcomes are already decided
            await target.end_session(session_id)
    return outcomes, None


def comparison_totals(results: Sequence[CaseComparison]) -> tuple[int, int, int, int]:
    """Same (renames aside), changed, skipped and errored cases."""
    changed = sum(r.changed for r in results)
    skipped = sum(bool(r.skipped) for r in results)
    errors = sum(bool(r.error) for r in results)
    return len(results) - changed - skipped - errors, changed, skipped, errors


def comparison_report(results: Sequence[CaseComparison], old: str, new: str) -> str:
    """One line per case under its file; a changed case lists each changed step with its
    old and new kind, route and state (`->` between them where they differ)."""
    lines = [f"comparing {old} -> {new}"]
    current = None
    for result in results:
        if result.file != current:
            current = result.file
            lines.append(result.file)
        lines.extend(_case_lines(result))
    same, changed, skipped, errors = comparison_totals(results)
    turns = sum(bool(c.fields) for r in results for c in r.changes)
    renamed = sum(bool(r.changes) and not r.changed for r in results)
    summary = f"{same} same" + (f" ({renamed} renamed by the migration)" if renamed else "")
    summary += f", {changed} changed ({turns} turn{'s' if turns != 1 else ''})"
    if skipped:
        summary += f", {skipped} skipped"
    if errors:
        summary += f", {errors} error{'s' if errors != 1 else ''}"
    lines.append(summary)
    return "\n".join(lines) + "\n"


def _case_lines(result: CaseComparison) -> list[str]:
    if result.error:
        return [f"  ERROR    {result.name}", f"           {result.error}"]
    if result.skipped:
        return [f"  skip     {result.name}: {result.skipped}"]
    plural = "s" if result.steps != 1 else ""
    if not result.changes:
        return [f"  same     {result.name} ({result.steps} step{plural})"]
    if not result.changed:
        lines = [f"  renamed  {result.name} ({result.steps} step{plural})"]
    else:
        lines = [f"  CHANGED  {result.name}"]
    for change in result.changes:
        lines.append(f"           step {change.index} of {result.steps}: {change.title}")
        for name in ("kind", "route", "state"):
            before = _show(getattr(change.old, name))
            after = _show(getattr(change.new, name))
            value = f"{before} -> {after}" if before != after else before
            if name in change.renames:
                value += "  (renamed by the migration)"
            lines.append(f"             {name:<5}  {value}")
    return lines


def _differ(old: Outcome, new: Outcome) -> tuple[str, ...]:
    return tuple(
        name
        for name, before, after in (
            ("kind", old.kind, new.kind),
            ("route", old.route, new.route),
            ("state", old.state, new.state),
        )
        if before != after
    )


def _show(value: str | None) -> str:
    return "none" if value is None else value or "-"
