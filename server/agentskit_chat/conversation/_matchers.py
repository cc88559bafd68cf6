"""Route matchers: command, exact, pattern (RE2, linear time) and handler."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import re2

from ._types import EMPTY_GROUPS, HandlerFn, MatchResult, RouteContext

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


def normalize_exact(text: str) -> str:
    """Unicode NFKC, trimmed, inner whitespace collapsed to one space, case-folded."""
    folded = " ".join(unicodedata.normalize("NFKC", text).split()).casefold()
    return unicodedata.normalize("NFKC", folded)


class RouteInput:
    """The input of one dispatch; derived forms are computed once, on first use."""

    __slots__ = ("_normalized", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._normalized: str | None = None

    @property
    def normalized(self) -> str:
        """`normalize_exact(text)`, cached."""
        if self._normalized is None:
            self._normalized = normalize_exact(self.text)
        return self._normalized


class Matcher:
    """Base of matchers."""

    kind: ClassVar[str] = ""

    @property
    def input_text(self) -> str:
        """The input that fires the matcher, where one text does (a renderer's button);
        empty for matchers that accept many inputs or decide in code."""
        return ""


class DeclarativeMatcher(Matcher):
    """A matcher declared as data: pure, synchronous and cheap, so replays may re-run it."""

    def match(self, route_input: RouteInput, context: RouteContext) -> Mapping[str, str] | None:
        """Groups on a match (empty when there are none), None on a miss."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class CommandMatcher(DeclarativeMatcher):
    """Matches when the input equals the command exactly."""

    command: str
    kind: ClassVar[str] = "command"

    @property
    def input_text(self) -> str:
        return self.command

    def match(self, route_input: RouteInput, context: RouteContext) -> Mapping[str, str] | None:
        return EMPTY_GROUPS if route_input.text == self.command else None


@dataclass(frozen=True, slots=True)
class ExactMatcher(DeclarativeMatcher):
    """Matches when the normalized input equals the normalized text."""

    text: str
    normalized: str = field(init=False, repr=False)
    kind: ClassVar[str] = "exact"

    def __post_init__(self) -> None:
        object.__setattr__(self, "normalized", normalize_exact(self.text))

    @property
    def input_text(self) -> str:
        return self.text

    def match(self, route_input: RouteInput, context: RouteContext) -> Mapping[str, str] | None:
        return EMPTY_GROUPS if route_input.normalized == self.normalized else None


@dataclass(frozen=True, slots=True)
class PatternMatcher(DeclarativeMatcher):
    """Full match on RE2, so no input or pattern can take more than linear time."""

    pattern: str
    error: str | None = field(init=False, repr=False, compare=False)
    group_names: frozenset[str] = field(init=False, repr=False, compare=False)
    _regex: Any = field(init=False, repr=False, compare=False)
    _groups: tuple[tuple[str, int], ...] = field(init=False, repr=False, compare=False)
    _prefix: str = field(init=False, repr=False, compare=False)
    kind: ClassVar[str] = "pattern"

    def __post_init__(self) -> None:
        regex: Any = None
        error: str | None = None
        try:
            # Compiled over UTF-8 bytes: RE2 matches code points either way, and the bytes
            # API skips the str wrapper's per-call offset bookkeeping.
            regex = re2.compile(self.pattern.encode("utf-8", "surrogatepass"), _RE2_OPTIONS)
        except re2.error as exc:
            reason = exc.args[0] if exc.args else "invalid pattern"
            error = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        groups = () if regex is None else tuple(_group_names(regex))
        object.__setattr__(self, "_regex", regex)
        object.__setattr__(self, "error", error)
        object.__setattr__(self, "_groups", groups)
        object.__setattr__(self, "group_names", frozenset(name for name, _ in groups))
        object.__setattr__(self, "_prefix", _literal_prefix(regex))

    def match(self, route_input: RouteInput, context: RouteContext) -> Mapping[str, str] | None:
        text = route_input.text
        if not text.startswith(self._prefix) or self._regex is None:
            return None
        found = self._regex.fullmatch(text.encode("utf-8", "surrogatepass"))
        if found is None:
            return None
        if not self._groups:
            return EMPTY_GROUPS
        values = {}
        for name, index in self._groups:
            value = found.group(index)
            values[name] = "" if value is None else value.decode("utf-8", "surrogatepass")
        return values


def _group_names(regex: Any) -> list[tuple[str, int]]:
    return [
        (name.decode("utf-8") if isinstance(name, bytes) else name, index)
        for name, index in regex.groupindex.items()
    ]


def _literal_prefix(regex: Any) -> str:
    """A prefix every full match must start with, used to skip RE2 on obvious misses."""
    if regex is None:
        return ""
    try:
        low, high = regex.possiblematchrange(64)
    except Exception:  # RE2 declines for some patterns; then nothing is skipped.
        return ""
    common = bytearray()
    for a, b in zip(low, high, strict=False):
        if a != b:
            break
        common.append(a)
    # Stop at the last complete UTF-8 character.
    return bytes(common).decode("utf-8", "ignore")


@dataclass(frozen=True, slots=True)
class HandlerMatcher(Matcher):
    """Delegates the decision to a Python callable `(input, context)`."""

    handler: HandlerFn
    kind: ClassVar[str] = "handler"


def groups_of(result: MatchResult) -> Mapping[str, str] | None:
    """Normalize a matcher result: None or False is a miss, True is a match without groups."""
    if result is None or result is False:
        return None
    if result is True:
        return EMPTY_GROUPS
    if isinstance(result, Mapping):
        return {str(k): str(v) for k, v in result.items()}
    raise TypeError("a matcher must return a bool, a mapping of groups or None")
