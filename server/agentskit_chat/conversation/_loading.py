"""Load definitions from YAML or JSON files, directories or plain mappings."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from ._definition import ChatDefinition, compile_conversation, freeze
from ._errors import ConfigError, Diagnostic, ErrorCode
from ._migration import Migration
from ._reader import Reader
from ._revisions import migration_issues, served_together
from ._statechart import compile_statechart
from ._validation import Draft, diagnostics_for
from ._yaml import DuplicateKeyError, load_yaml

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}
TEST_FILE_MARK = ".test"
"""A file named like `support.test.yaml` holds conversation tests, not a definition."""


def is_definition_file(path: Path) -> bool:
    """Whether `path` is a definition file of a directory (conversation tests are not)."""
    return path.suffix in SUFFIXES and not path.stem.endswith(TEST_FILE_MARK) and path.is_file()


def load_definition(path: str | Path) -> ChatDefinition:
    """Load one chat from a .yaml, .yml or .json file; raises ConfigError."""
    file = str(path)
    data, problem = _read(Path(path))
    if problem is not None:
        raise ConfigError([problem])
    definition = parse_definition(data, file=file)
    return replace(definition, document=canonical_document(data))


def canonical_document(data: Any) -> str | None:
    """`data` as canonical JSON text (sorted keys, no spaces), or None when JSON cannot
    carry it unchanged (a YAML date, a key that is not a string)."""
    try:
        text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return text if json.loads(text) == data else None


def definition_of_document(document: str, *, source: str) -> ChatDefinition:
    """The definition a `document` (see `canonical_document`) describes, validated as a
    file is; raises ConfigError."""
    try:
        data = json.loads(document, object_pairs_hook=_unique)
    except ValueError as exc:
        problem = Diagnostic(ErrorCode.PARSE_ERROR, source, "", _first_line(exc))
        raise ConfigError([problem]) from None
    return replace(parse_definition(data, file=source), document=document)


def load_definitions(directory: str | Path) -> dict[str, ChatDefinition]:
    """Load every chat file of a directory (sorted by name): the newest revision of each
    id (see `load_revisions` for all of them); one ConfigError lists all problems."""
    newest: dict[str, ChatDefinition] = {}
    for definition in load_revisions(directory):
        if definition.id not in newest or newest[definition.id].revision < definition.revision:
            newest[definition.id] = definition
    return newest


def load_revisions(directory: str | Path) -> list[ChatDefinition]:
    """Load every chat file of a directory (sorted by name), several revisions of an id
    side by side; one ConfigError lists all problems."""
    root = Path(directory)
    if not root.is_dir():
        raise ConfigError([Diagnostic(ErrorCode.READ_ERROR, str(root), "", "not a directory")])
    loaded: list[ChatDefinition] = []
    problems: list[Diagnostic] = []
    for path in sorted(p for p in root.iterdir() if is_definition_file(p)):
        try:
            loaded.append(load_definition(path))
        except ConfigError as exc:
            problems.extend(exc.diagnostics)
    problems.extend(served_together(loaded))
    if problems:
        raise ConfigError(problems)
    return loaded


def parse_definition(data: Any, *, file: str = "<memory>") -> ChatDefinition:
    """Validate and compile a chat from decoded YAML/JSON data; raises ConfigError."""
    reader = Reader(file)
    draft, description = reader.draft(data)
    if draft is None:
        raise ConfigError(reader.diagnostics)
    definition = build_definition(
        draft,
        file=file,
        description=description,
        earlier=reader.diagnostics,
        suppressed=frozenset(reader.failed),
        approvals=reader.approvals,
        rollout=reader.rollout,
        migrations=reader.migrations,
    )
    return replace(
        definition,
        mcp_servers=MappingProxyType(reader.mcp_servers),
        server_tools=MappingProxyType(reader.server_tools),
    )


def define_chat(
    *,
    id: str,
    conversation: Mapping[str, Any],
    revision: int = 1,
    model: Mapping[str, Any] | None = None,
    description: str = "",
    source: str = "<code>",
    tools: Mapping[str, Mapping[str, Any]] | None = None,
) -> ChatDefinition:
    """Validate and compile a chat defined in code; raises ConfigError listing every problem.

    `conversation` holds `initial`, `states` (name → `{"on": {event: target}, "actions": [...]}`)
    and `routes`: Route values from `command_route`, `exact_route`, `pattern_route` and
    `handler_route`, or mappings as in a definition file. `tools` maps tool names to their
    policy, as in a definition file (`{"delete_order": {"approval": True}}`).
    """
    data: dict[str, Any] = {"id": id, "revision": revision, "conversation": conversation}
    if tools is not None:
        data["tools"] = tools
    if model is not None:
        data["model"] = model
    if description:
        data["description"] = description
    return parse_definition(data, file=source)


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


def build_definition(
    draft: Draft,
    *,
    file: str,
    description: str = "",
    earlier: Iterable[Diagnostic] = (),
    suppressed: frozenset[str] = frozenset(),
    approvals: frozenset[str] = frozenset(),
    rollout: int | None = None,
    migrations: Mapping[int, Migration] | None = None,
) -> ChatDefinition:
    """Validate and compile `draft`; raises ConfigError listing every problem found."""
    migrations = dict(migrations or {})
    found = [*earlier, *diagnostics_for(draft, file, suppressed)]
    found.extend(
        Diagnostic(code, file, path, message)
        for code, path, message in migration_issues(migrations, draft.conversation, draft.revision)
    )
    if found:
        raise ConfigError(found)
    spec = draft.conversation
    chart = compile_statechart(spec.initial, {name: s.on for name, s in spec.states.items()})
    return ChatDefinition(
        id=draft.id,
        revision=draft.revision,
        conversation=spec,
        compiled=compile_conversation(spec, chart),
        model=freeze(draft.model),
        description=description,
        source=file,
        approvals=approvals,
        rollout=rollout,
        migrations=MappingProxyType(migrations),
    )
