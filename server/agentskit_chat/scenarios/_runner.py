"""Runs cases against a target: one new session per case, steps in order, stop at the first
step that does not meet its expectations (later steps depend on it)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass

from ._observe import Mismatch, Observation, compare
from ._spec import Case, Step, TestFile
from ._targets import Target

_TEXT_CHECKS = frozenset({"text", "text_matches"})


@dataclass(frozen=True, slots=True)
class StepFailure:
    """The step a case stopped at, and why."""

    index: int
    """1-based position of the step in its case."""
    title: str
    mismatches: tuple[Mismatch, ...] = ()
    problem: str = ""
    """A step that could not run at all, such as a message position past the history."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of one case."""

    file: str
    name: str
    steps: int
    ran: int
    """Steps that ran, the failing one included."""
    seconds: float
    failure: StepFailure | None = None
    error: str = ""
    """Why the case could not run, such as an unknown definition or an unreachable server."""
    notes: tuple[str, ...] = ()
    """Expectations left unchecked, and why."""

    @property
    def passed(self) -> bool:
        """True when every step met its expectations."""
        return self.failure is None and not self.error


async def run_file(target: Target, test_file: TestFile) -> list[CaseResult]:
    """Every case of `test_file`, in order."""
    return [await run_case(target, test_file.path, case) for case in test_file.cases]


async def run_case(target: Target, file: str, case: Case) -> CaseResult:
    """One case in a new session, which is deleted afterwards."""
    started = time.perf_counter()
    notes: list[str] = []

    def result(ran: int, failure: StepFailure | None = None, error: str = "") -> CaseResult:
        return CaseResult(
            file,
            case.name,
            len(case.steps),
            ran,
            time.perf_counter() - started,
            failure,
            error,
            tuple(notes),
        )

    session_id, refused = await target.start_session(case.definition)
    if refused is not None:
        return result(0, error=f"session of {case.definition!r} refused: {refused}")
    try:
        for index, step in enumerate(case.steps, 1):
            skip: frozenset[str] = frozenset()
            if step.model is not None and not target.canned_replies:
                skip = _TEXT_CHECKS
                if _TEXT_CHECKS & set(step.expect):
                    notes.append(f"step {index}: text not checked (canned model reply)")
            try:
                observed = await perform(target, session_id, step)
            except StepError as problem:
                return result(index, StepFailure(index, step.title, problem=str(problem)))
            mismatches = compare(step.expect, observed, skip=skip)
            if mismatches:
                return result(index, StepFailure(index, step.title, tuple(mismatches)))
        return result(len(case.steps))
    except Exception as exc:  # a broken target must fail the case, not the run
        return result(0, error=f"{type(exc).__name__}: {exc}")
    finally:
        with suppress(Exception):  # the result is already decided
            await target.end_session(session_id)


class StepError(Exception):
    """A step refers to a message the history does not have."""


async def perform(target: Target, session_id: str, step: Step) -> Observation:
    if step.operation == "submit":
        return await target.turn(session_id, step, None)
    history = await target.history(session_id)
    if step.operation == "truncate":
        if step.keep > len(history):
            raise StepError(f"the history holds {len(history)} messages, not {step.keep}")
        last_kept = history[step.keep - 1][0] if step.keep else None
        return await target.truncate(session_id, last_kept)
    role = "assistant" if step.operation == "regenerate" else "user"
    ids = [message_id for message_id, author in history if author == role]
    if step.message is not None:
        if step.message > len(ids):
            raise StepError(f"the history holds {len(ids)} {role} messages, not {step.message}")
        return await target.turn(session_id, step, ids[step.message - 1])
    if step.operation == "edit":
        if not ids:
            raise StepError("the history holds no user message to edit")
        return await target.turn(session_id, step, ids[-1])
    return await target.turn(session_id, step, None)


def totals(results: Sequence[CaseResult]) -> tuple[int, int, int]:
    """Passed, failed and errored cases."""
    passed = sum(r.passed for r in results)
    errors = sum(bool(r.error) for r in results)
    return passed, len(results) - passed - errors, errors
