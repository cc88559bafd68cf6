"""Load definitions from YAML or JSON files, directories or plain mappings."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from ._build import build_definition
from ._builders import to_kind, to_response
from ._definition import DEFAULT_MODEL, ChatDefinition, ConversationSpec, Route, StateSpec
from ._errors import ConfigError, Diagnostic, ErrorCode
from ._matchers import CommandMatcher, ExactMatcher, Matcher, PatternMatcher
from ._responses import Response
from ._validation import Draft, MissingMatcher, MissingResponse
from ._yaml import DuplicateKeyError, load_yaml

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}
_TOP_KEYS = frozenset({"$schema", "id", "revision", "description", "model", "conversation"})
_CONVERSATION_KEYS = frozenset({"initial", "states", "routes"})
_STATE_KEYS = frozenset({"on", "actions"})
_MATCHER_KEYS = ("command", "exact", "pattern")
_ROUTE_KEYS = frozenset({"id", "event", "states", "kind", "response", *_MATCHER_KEYS})


def load_definition(path: str | Path) -> ChatDefinition:
    """Load one chat from a .yaml, .yml or .json file; raises ConfigError."""
    file = str(path)
    data, problem = _read(Path(path))
    if problem is not None:
        raise ConfigError([problem])
    return parse_definition(data, file=file)


def load_definitions(directory: str | Path) -> dict[str, ChatDefinition]:
    """Load every chat file of a directory (sorted by name); one ConfigError lists all problems."""
    root = Path(directory)
    if not root.is_dir():
        raise ConfigError([Diagnostic(ErrorCode.READ_ERROR, str(root), "", "not a directory")])
    loaded: dict[str, ChatDefinition] = {}
    problems: list[Diagnostic] = []
    for path in sorted(p for p in root.iterdir() if p.suffix in SUFFIXES and p.is_file()):
        try:
            definition = load_definition(path)
        except ConfigError as exc:
            problems.extend(exc.diagnostics)
            continue
        if definition.id in loaded:
            other = loaded[definition.id].source
            problems.append(
                Diagnostic(
                    ErrorCode.DUPLICATE_DEFINITION,
                    str(path),
                    "id",
                    f"definition id {definition.id!r} is also defined in {other}",
                )
            )
            continue
        loaded[definition.id] = definition
    if problems:
        raise ConfigError(problems)
    return loaded


def parse_definition(data: Any, *, file: str = "<memory>") -> ChatDefinition:
    """Validate and compile a chat from decoded YAML/JSON data; raises ConfigError."""
    reader = _Reader(file)
    draft, description = reader.draft(data)
    if draft is None:
        raise ConfigError(reader.diagnostics)
    return build_definition(
        draft,
        file=file,
        description=description,
        earlier=reader.diagnostics,
        suppressed=frozenset(reader.failed),
    )


def _read(path: Path) -> tuple[Any, Diagnostic | None]:
    file = str(path)
    kind = SUFFIXES.get(path.suffix)
    if kind is None:
        return None, Diagnostic(
            ErrorCode.UNSUPPORTED_FORMAT, file, "", "definitions must be .yaml, .yml or .json files"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, Diagnostic(ErrorCode.READ_ERROR, file, "", f"cannot read file: {exc}")
    try:
        data = load_yaml(text) if kind == "yaml" else json.loads(text, object_pairs_hook=_unique)
    except DuplicateKeyError as exc:
        return None, Diagnostic(ErrorCode.DUPLICATE_KEY, file, "", str(exc))
    except (yaml.YAMLError, ValueError) as exc:
        return None, Diagnostic(ErrorCode.PARSE_ERROR, file, "", _first_line(exc))
    return data, None


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _first_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:200] or type(exc).__name__


class _Reader:
    """Checks the structure of decoded data and builds a draft with placeholders where it fails."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.diagnostics: list[Diagnostic] = []
        self.failed: set[str] = set()

    def report(self, code: ErrorCode, path: str, message: str, *, suppress: bool = True) -> None:
        """Record a diagnostic; with `suppress`, semantic checks at or below `path` are skipped."""
        self.diagnostics.append(Diagnostic(code, self.file, path, message))
        if suppress:
            self.failed.add(path)

    def mapping(
        self,
        value: Any,
        path: str,
        allowed: frozenset[str] | None,
        required: tuple[str, ...] = (),
    ) -> dict[str, Any] | None:
        """The mapping at `path` with unknown keys reported; None when it is not a mapping."""
        if not isinstance(value, Mapping):
            self.report(ErrorCode.INVALID_TYPE, path or "(root)", "expected a mapping")
            return None
        result: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                self.report(ErrorCode.INVALID_TYPE, _join(path, str(key)), "keys must be strings")
            elif allowed is not None and key not in allowed:
                self.report(ErrorCode.UNKNOWN_KEY, _join(path, key), f"unknown key {key!r}")
            else:
                result[key] = item
        for key in required:
            if key not in result and _join(path, key) not in self.failed:
                self.report(
                    ErrorCode.MISSING_KEY, _join(path, key), f"missing required key {key!r}"
                )
        return result

    def string(self, value: Any, path: str, default: str = "") -> str:
        if value is None and path in self.failed:
            return default
        if isinstance(value, str):
            return value
        self.report(ErrorCode.INVALID_TYPE, path, "expected a string")
        return default

    def strings(self, value: Any, path: str) -> tuple[str, ...] | None:
        if not isinstance(value, list):
            self.report(ErrorCode.INVALID_TYPE, path, "expected a list of strings")
            return None
        return tuple(self.string(item, f"{path}[{i}]") for i, item in enumerate(value))

    def draft(self, data: Any) -> tuple[Draft | None, str]:
        top = self.mapping(data, "", _TOP_KEYS, ("id", "revision", "conversation"))
        if top is None:
            return None, ""
        definition_id = self.string(top.get("id"), "id")
        description = self.string(top.get("description", ""), "description")
        model = top.get("model", DEFAULT_MODEL)
        conversation = self.conversation(top.get("conversation"))
        revision = top.get("revision")
        if conversation is None:
            return None, description
        return Draft(definition_id, revision, model, conversation), description

    def conversation(self, value: Any) -> ConversationSpec | None:
        if value is None and "conversation" in self.failed:
            return None
        body = self.mapping(value, "conversation", _CONVERSATION_KEYS, ("initial", "states"))
        if body is None:
            return None
        initial = self.string(body.get("initial"), "conversation.initial")
        states: dict[str, StateSpec] = {}
        raw_states = body.get("states")
        if raw_states is not None or "conversation.states" not in self.failed:
            raw = self.mapping(raw_states, "conversation.states", None)
            for name, state in (raw or {}).items():
                states[name] = self.state(state, f"conversation.states.{name}")
        routes: list[Route] = []
        raw_routes = body.get("routes", [])
        if isinstance(raw_routes, list):
            routes = [self.route(r, f"conversation.routes[{i}]") for i, r in enumerate(raw_routes)]
        else:
            self.report(ErrorCode.INVALID_TYPE, "conversation.routes", "expected a list of routes")
        return ConversationSpec(initial, MappingProxyType(states), tuple(routes))

    def state(self, value: Any, path: str) -> StateSpec:
        body = self.mapping({} if value is None else value, path, _STATE_KEYS) or {}
        on: dict[str, str] = {}
        raw_on = self.mapping(body.get("on", {}), f"{path}.on", None) or {}
        for event, target in raw_on.items():
            on[event] = self.string(target, f"{path}.on.{event}")
        actions = self.strings(body.get("actions", []), f"{path}.actions") or ()
        return StateSpec(on=MappingProxyType(on), actions=actions)

    def route(self, value: Any, path: str) -> Route:
        body = self.mapping(value, path, _ROUTE_KEYS, ("id", "event", "response"))
        if body is None:
            return Route("", "", MissingMatcher(), MissingResponse())
        states = body.get("states")
        return Route(
            id=self.string(body.get("id"), f"{path}.id"),
            event=self.string(body.get("event"), f"{path}.event"),
            matcher=self.matcher(body, path),
            response=self.response(body.get("response"), f"{path}.response"),
            states=None if states is None else self.strings(states, f"{path}.states"),
            kind=to_kind(self.string(body.get("kind", "deterministic"), f"{path}.kind")),
        )

    def matcher(self, body: dict[str, Any], path: str) -> Matcher:
        present = [key for key in _MATCHER_KEYS if key in body]
        if len(present) != 1:
            found = ", ".join(present) or "none"
            self.report(
                ErrorCode.MATCHER_COUNT,
                path,
                f"a route needs exactly one of command, exact or pattern (found: {found})",
                suppress=False,
            )
            return MissingMatcher()
        key = present[0]
        text = self.string(body[key], f"{path}.{key}")
        if key == "command":
            return CommandMatcher(text)
        return ExactMatcher(text) if key == "exact" else PatternMatcher(text)

    def response(self, value: Any, path: str) -> Response:
        if value is None:
            return MissingResponse()
        if not isinstance(value, str):
            self.report(ErrorCode.INVALID_TYPE, path, "expected a string")
            return MissingResponse()
        return to_response(value)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
