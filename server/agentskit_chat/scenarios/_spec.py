"""Conversation test files: cases of steps with expectations, read and checked strictly.

A file names the definition its cases talk to and lists cases; each case runs in a new
session, step by step. A step is one operation (`submit`, `retry`, `edit`, `regenerate`,
`truncate`), an optional canned `model` reply for an agentic answer, and `expect`.
Messages are referred to by position, because their ids are chosen when the test runs:
`message: 1` is the first user message (`retry`, `edit`) or the first assistant message
(`regenerate`) of the current history; without it, the last one. `truncate: {keep: N}`
keeps the first N messages of the history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import yaml

from agentskit_chat.conversation import load_yaml

OPERATIONS: Final = ("submit", "retry", "edit", "regenerate", "truncate")
EXPECTATIONS: Final = (
    "kind",
    "route",
    "from_state",
    "state",
    "replayed",
    "text",
    "text_matches",
    "actions",
    "events",
    "error",
    "failed",
)
KINDS: Final = ("deterministic", "agentic", "repaired", "fallback")
TEST_SUFFIXES: Final = (".test.yaml", ".test.yml", ".test.json")


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem of a test file, located by the path inside it."""

    file: str
    path: str
    message: str

    def __str__(self) -> str:
        return (
            f"{self.file}: {self.path}: {self.message}"
            if self.path
            else f"{self.file}: {self.message}"
        )


class TestFileError(Exception):
    """A test file cannot be read or is malformed; `problems` lists every problem found."""

    __test__ = False  # not a pytest class

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(f"{count} test file error{'s' if count != 1 else ''}:\n{lines}")


@dataclass(frozen=True, slots=True)
class Step:
    """One operation of a case and what must be observed after it."""

    operation: str
    """`submit`, `retry`, `edit`, `regenerate` or `truncate`."""
    text: str | None = None
    """The new user text of `submit` and `edit`."""
    message: int | None = None
    """1-based position of the user (retry, edit) or assistant (regenerate) message;
    None for the last one."""
    keep: int = 0
    """Messages `truncate` keeps, from the oldest."""
    model: str | None = None
    """A canned model reply for an agentic answer (in-process runs only)."""
    expect: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Expected observations by name (see EXPECTATIONS)."""

    @property
    def title(self) -> str:
        """A one-line description, e.g. `submit '/start'`."""
        parts = [self.operation]
        if self.message is not None:
            parts.append(f"message {self.message}")
        if self.operation == "truncate":
            parts.append(f"keep {self.keep}")
        if self.text is not None:
            parts.append(repr(self.text))
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Case:
    """A named sequence of steps in one new session."""

    name: str
    definition: str
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class TestFile:
    """The cases of one file."""

    __test__ = False  # not a pytest class

    path: str
    cases: tuple[Case, ...]


def find_test_files(paths: list[Path]) -> list[Path]:
    """`paths` with each directory replaced by the test files under it, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                sorted(p for p in path.rglob("*") if p.name.endswith(TEST_SUFFIXES) and p.is_file())
            )
        else:
            found.append(path)
    return found


def load_test_file(path: Path) -> TestFile:
    """Read and check one test file; raises TestFileError listing every problem."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problem = Problem(file, "", f"cannot read the file: {exc.strerror or exc}")
        raise TestFileError([problem]) from None
    except UnicodeDecodeError:
        raise TestFileError([Problem(file, "", "the file is not UTF-8 text")]) from None
    try:
        data = json.loads(text) if path.suffix == ".json" else load_yaml(text)
    except (yaml.YAMLError, ValueError) as exc:
        message = " ".join(str(exc).split())[:200]
        raise TestFileError([Problem(file, "", f"not valid YAML/JSON: {message}")]) from None
    return parse_test_file(data, file=file)


def parse_test_file(data: Any, *, file: str = "<memory>") -> TestFile:
    """Check decoded test file data; raises TestFileError listing every problem."""
    reader = _Reader(file)
    cases = reader.file(data)
    if reader.problems:
        raise TestFileError(reader.problems)
    return TestFile(file, cases)


class _Reader:
    def __init__(self, file: str) -> None:
        self.file_name = file
        self.problems: list[Problem] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.file_name, path, message))

    def keys(self, data: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> None:
        for key in data:
            if key not in allowed and key != "$schema":
                where = f"{path}.{key}" if path else str(key)
                self.problem(where, f"unknown key; expected one of: {', '.join(allowed)}")

    def file(self, data: Any) -> tuple[Case, ...]:
        if not isinstance(data, dict):
            self.problem("", "a test file is a mapping with `definition` and `cases`")
            return ()
        self.keys(data, "", ("definition", "cases"))
        default = data.get("definition")
        if default is not None and not _text(default):
            self.problem("definition", "a definition id is a non-empty string")
            default = None
        cases = data.get("cases")
        if not isinstance(cases, list) or not cases:
            self.problem("cases", "a non-empty list of cases is required")
            return ()
        found = [self.case(raw, f"cases[{i}]", default) for i, raw in enumerate(cases)]
        names = [c.name for c in found if c is not None]
        for index, case in enumerate(found):
            if case is not None and names.count(case.name) > 1:
                self.problem(f"cases[{index}].name", "case names must be unique in a file")
        return tuple(c for c in found if c is not None)

    def case(self, data: Any, path: str, default: str | None) -> Case | None:
        if not isinstance(data, dict):
            self.problem(path, "a case is a mapping with `name` and `steps`")
            return None
        self.keys(data, path, ("name", "definition", "steps"))
        name = data.get("name")
        if not _text(name):
            self.problem(f"{path}.name", "a case needs a non-empty name")
        definition = data.get("definition", default)
        if not _text(definition):
            self.problem(f"{path}.definition", "no definition id (set it on the file or the case)")
        steps = data.get("steps")
        if not isinstance(steps, list) or not steps:
            self.problem(f"{path}.steps", "a non-empty list of steps is required")
            steps = []
        parsed = [self.step(raw, f"{path}.steps[{i}]") for i, raw in enumerate(steps)]
        if not (_text(name) and _text(definition)) or None in parsed:
            return None
        return Case(str(name), str(definition), tuple(s for s in parsed if s is not None))

    def step(self, data: Any, path: str) -> Step | None:
        if not isinstance(data, dict):
            self.problem(path, "a step is a mapping with one operation and `expect`")
            return None
        self.keys(data, path, (*OPERATIONS, "model", "expect"))
        operations = [op for op in OPERATIONS if op in data]
        if len(operations) != 1:
            self.problem(path, f"a step has exactly one of: {', '.join(OPERATIONS)}")
            return None
        operation = operations[0]
        before = len(self.problems)
        model = data.get("model")
        if model is not None and not isinstance(model, str):
            self.problem(f"{path}.model", "a canned model reply is a string")
        expect = self.expect(data.get("expect", {}), f"{path}.expect")
        step = self.operation(operation, data[operation], f"{path}.{operation}")
        if step is None or len(self.problems) > before:
            return None
        return Step(
            operation=operation,
            text=step.text,
            message=step.message,
            keep=step.keep,
            model=model,
            expect=MappingProxyType(expect),
        )

    def operation(self, operation: str, value: Any, path: str) -> Step | None:
        if operation == "submit":
            if not isinstance(value, str) or not value:
                self.problem(path, "submit takes the user's text, a non-empty string")
                return None
            return Step(operation, text=value)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.problem(path, f"{operation} takes a mapping")
            return None
        allowed = {
            "retry": ("message",),
            "regenerate": ("message",),
            "edit": ("message", "text"),
            "truncate": ("keep",),
        }[operation]
        self.keys(value, path, allowed)
        message = value.get("message")
        if message is not None and not _position(message):
            self.problem(f"{path}.message", "a message position is an integer from 1")
            return None
        if operation == "edit":
            text = value.get("text")
            if not isinstance(text, str) or not text:
                self.problem(f"{path}.text", "edit needs the new text, a non-empty string")
                return None
            return Step(operation, text=text, message=message)
        if operation == "truncate":
            keep = value.get("keep")
            if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
                self.problem(f"{path}.keep", "truncate needs `keep`, an integer from 0")
                return None
            return Step(operation, keep=keep)
        return Step(operation, message=message)

    def expect(self, data: Any, path: str) -> dict[str, Any]:
        if not isinstance(data, dict):
            self.problem(path, "expect is a mapping")
            return {}
        self.keys(data, path, EXPECTATIONS)
        checked: dict[str, Any] = {}
        for key, value in data.items():
            if key not in EXPECTATIONS:
                continue
            where = f"{path}.{key}"
            if key == "kind" and value not in KINDS:
                self.problem(where, f"kind is one of: {', '.join(KINDS)}")
            elif key == "replayed" and not isinstance(value, bool):
                self.problem(where, "replayed is true or false")
            elif key in ("actions", "events") and not (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
            ):
                self.problem(where, f"{key} is a list of strings")
            elif key == "route" and value is not None and not _text(value):
                self.problem(where, "route is a route id, or null for no route")
            elif key not in ("kind", "replayed", "actions", "events", "route") and not _text(value):
                self.problem(where, f"{key} is a non-empty string")
            elif key == "text_matches" and not _compiles(value):
                self.problem(where, "text_matches is not a valid regular expression")
            else:
                checked[key] = tuple(value) if isinstance(value, list) else value
        if "error" in checked and len(checked) > 1:
            self.problem(path, "a refused request has only `error` to check")
        return checked


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _position(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True
