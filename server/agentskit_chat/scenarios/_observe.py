"""What a step produced, and how it differs from what the step expects."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Observation:
    """The observable outcome of one step, from either kind of target."""

    state: str = ""
    """The conversation state after the step."""
    actions: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    kind: str | None = None
    """The turn's kind; None when no turn ran (truncate, a refused request)."""
    route: str | None = None
    from_state: str | None = None
    replayed: bool | None = None
    text: str | None = None
    """The answer's full text; None when no turn completed."""
    failed: str | None = None
    """The code of a turn that failed (`route_failed`, `model_failed`, ...)."""
    error: str | None = None
    """The reason a request was refused, without the `ERROR_REASON_` prefix."""

    def value(self, name: str) -> Any:
        """The observed value an expectation named `name` is compared with."""
        return self.text if name == "text_matches" else getattr(self, name)


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One expectation the observation does not meet."""

    name: str
    expected: Any
    actual: Any

    def lines(self) -> list[str]:
        """A readable account: a line diff for texts, expected and actual otherwise."""
        if self.name == "text" and isinstance(self.actual, str):
            diff = difflib.ndiff(str(self.expected).splitlines(), self.actual.splitlines())
            return ["text  (- expected, + actual)", *(f"  {line.rstrip()}" for line in diff)]
        if self.name == "text_matches":
            return [
                f"text does not match /{self.expected}/",
                f"  actual   {self.actual!r}",
            ]
        return [
            f"{self.name}",
            f"  expected {_show(self.expected)}",
            f"  actual   {_show(self.actual)}",
        ]

    def summary(self) -> str:
        """One line, for a JUnit failure message."""
        return f"{self.name}: expected {_show(self.expected)}, got {_show(self.actual)}"


def _show(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return repr(value)


def compare(
    expect: Mapping[str, Any], observed: Observation, *, skip: frozenset[str] = frozenset()
) -> list[Mismatch]:
    """Every expectation of `expect` (except those in `skip`) that `observed` does not meet.

    An unexpected refusal or turn failure is reported even when the step did not ask about
    it, since nothing else the step expects can hold then.
    """
    found: list[Mismatch] = []
    for name in ("error", "failed"):
        if name not in expect and observed.value(name) is not None:
            found.append(Mismatch(name, None, observed.value(name)))
    for name, expected in expect.items():
        if name in skip:
            continue
        actual = observed.value(name)
        if name == "text_matches":
            if actual is None or re.search(expected, actual) is None:
                found.append(Mismatch(name, expected, actual))
        elif actual != expected:
            found.append(Mismatch(name, expected, actual))
    return found
