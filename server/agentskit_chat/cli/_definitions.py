"""Definitions a server hosts: files from a directory and chats defined in Python modules."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from agentskit_chat.conversation import (
    ChatDefinition,
    ConfigError,
    Diagnostic,
    ErrorCode,
    is_definition_file,
    load_definition,
    served_together,
)
from agentskit_chat.models import AdapterRegistry, UnknownAdapterError


def module_definitions(name: str) -> list[ChatDefinition]:
    """The chats of module `name`: its `definitions` iterable, or every module-level chat."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(
            [Diagnostic(ErrorCode.READ_ERROR, name, "", f"cannot import the module: {exc}")]
        ) from None
    declared = getattr(module, "definitions", None)
    if declared is not None:
        found = list(declared() if callable(declared) else declared)
    else:
        found = [v for v in vars(module).values() if isinstance(v, ChatDefinition)]
    if not found or not all(isinstance(d, ChatDefinition) for d in found):
        raise ConfigError(
            [
                Diagnostic(
                    ErrorCode.READ_ERROR,
                    name,
                    "definitions",
                    "the module defines no chats (expected ChatDefinition values)",
                )
            ]
        )
    return found


def gather(
    directory: Path | None, modules: Sequence[str], adapters: AdapterRegistry
) -> list[ChatDefinition]:
    """Every definition of `directory` and `modules`; one ConfigError lists all problems."""
    problems: list[Diagnostic] = []
    found: list[ChatDefinition] = []
    for name in modules:
        try:
            found.extend(module_definitions(name))
        except ConfigError as exc:
            problems.extend(exc.diagnostics)
    return _with_files(directory, found, adapters, problems)


def gather_files(
    directory: Path | None, kept: Sequence[ChatDefinition], adapters: AdapterRegistry
) -> list[ChatDefinition]:
    """The definitions of `directory` read again, plus `kept` as they are."""
    return _with_files(directory, list(kept), adapters, [])


def _with_files(
    directory: Path | None,
    found: list[ChatDefinition],
    adapters: AdapterRegistry,
    problems: list[Diagnostic],
) -> list[ChatDefinition]:
    if directory is not None:
        found = [*_directory(directory, problems), *found]
    problems.extend(_conflicts(found, adapters))
    if problems:
        raise ConfigError(problems)
    return found


def _directory(directory: Path, problems: list[Diagnostic]) -> list[ChatDefinition]:
    """Each loadable file of `directory`; the problems of the others go to `problems`."""
    if not directory.is_dir():
        problems.append(Diagnostic(ErrorCode.READ_ERROR, str(directory), "", "not a directory"))
        return []
    found: list[ChatDefinition] = []
    for path in sorted(p for p in directory.iterdir() if is_definition_file(p)):
        try:
            found.append(load_definition(path))
        except ConfigError as exc:
            problems.extend(exc.diagnostics)
    return found


def _conflicts(
    definitions: Iterable[ChatDefinition], adapters: AdapterRegistry
) -> list[Diagnostic]:
    definitions = list(definitions)
    problems = served_together(definitions)
    for definition in definitions:
        try:
            adapters.check(definition.model)
        except UnknownAdapterError as exc:
            problems.append(
                Diagnostic(ErrorCode.INVALID_MODEL, definition.source, "model.adapter", str(exc))
            )
    return problems
