"""The corpus's matching rules (README.md, "Matching `expect`"), shared by the Python runner
and the test that checks the rules themselves."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_DEFAULTS: tuple[object, ...] = (False, 0, "", (), {})
_ABSENT = object()


def match(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Every way `actual` falls short of `expected`; empty when it matches."""
    where = path or "observation"
    if expected == "absent":
        return [] if actual is _ABSENT else [f"{where}: expected absent, got {actual!r}"]
    if actual is _ABSENT:
        if expected == "present" or not _is_default(expected):
            return [f"{where}: missing (expected {expected!r})"]
        return []
    if expected == "present":
        return []
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [f"{where}: expected an object, got {actual!r}"]
        problems: list[str] = []
        for key, value in expected.items():
            if path == "" and key == "events":
                problems += _events(value, actual.get("events", []))
                continue
            child = f"{path}.{key}" if path else str(key)
            problems += match(value, actual.get(key, _ABSENT), child)
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return [f"{where}: expected a list, got {actual!r}"]
        if len(expected) != len(actual):
            return [f"{where}: expected {len(expected)} items, got {len(actual)}: {actual!r}"]
        return [
            p
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for p in match(e, a, f"{where}.{i}")
        ]
    if _scalar_equal(expected, actual):
        return []
    return [f"{where}: expected {expected!r}, got {actual!r}"]


def _is_default(value: object) -> bool:
    return any(type(value) is type(d) and value == d for d in _DEFAULTS) or value == []


def _scalar_equal(expected: object, actual: object) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, int | float) and isinstance(actual, str):
        return str(expected) == actual
    if isinstance(expected, str) and isinstance(actual, int | float):
        return expected == str(actual)
    return expected == actual


def _events(pattern: Sequence[str], kinds: Sequence[str]) -> list[str]:
    regex = "".join(
        f"(?:{item[:-1]},)+"
        if item.endswith("+")
        else f"(?:{item[:-1]},)*"
        if item.endswith("*")
        else f"{item},"
        for item in pattern
    )
    if re.fullmatch(regex, "".join(f"{kind}," for kind in kinds)):
        return []
    return [f"events: expected {list(pattern)}, got {list(kinds)}"]


def lookup(observation: Mapping[str, Any], path: str) -> str:
    """The value at a dot-separated path, as a string; KeyError when it is not there."""
    value: Any = observation
    for part in path.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            raise KeyError(path)
    return str(value)
