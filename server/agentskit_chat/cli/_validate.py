"""`agentskit-chat validate`: check definitions without serving them.

PATH is a definition file or a directory of them, as for `graph`; the chats of
`--definitions-module` are checked with it, duplicate ids and revisions across both
included, and each revision's migrations against the older revision they name when it is
there too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentskit_chat.conversation import (
    ChatDefinition,
    ConfigError,
    Diagnostic,
    load_definition,
)
from agentskit_chat.models import AdapterRegistry

from ._definitions import gather, gather_files, module_definitions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `validate`."""
    parser.add_argument(
        "path", type=Path, help="a YAML/JSON definition file or a directory of them"
    )
    parser.add_argument(
        "--definitions-module",
        action="append",
        default=[],
        metavar="MODULE",
        help="also check the chats a Python module defines; repeatable",
    )


def run(args: argparse.Namespace) -> int:
    """Print every problem and return 1, or list the definitions and return 0."""
    try:
        definitions = _check(args.path, args.definitions_module, AdapterRegistry())
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    for definition in sorted(definitions, key=lambda d: (d.id, d.revision)):
        spec = definition.conversation
        extra = "" if definition.rollout is None else f", rollout {definition.rollout}"
        if definition.migrations:
            extra += ", migrates from " + ", ".join(f"r{r}" for r in sorted(definition.migrations))
        print(
            f"ok  {definition.id} r{definition.revision}: {len(spec.states)} states, "
            f"{len(spec.routes)} routes{extra} ({definition.source})"
        )
    return 0


def _check(path: Path, modules: list[str], adapters: AdapterRegistry) -> list[ChatDefinition]:
    """The definitions of `path` (a directory, or else one file) and `modules`; one
    ConfigError lists every problem."""
    if path.is_dir():
        return gather(path, modules, adapters)
    problems: list[Diagnostic] = []
    found: list[ChatDefinition] = []
    try:
        found.append(load_definition(path))
    except ConfigError as exc:
        problems.extend(exc.diagnostics)
    for name in modules:
        try:
            found.extend(module_definitions(name))
        except ConfigError as exc:
            problems.extend(exc.diagnostics)
    try:
        found = gather_files(None, found, adapters)  # duplicate ids, unknown adapters
    except ConfigError as exc:
        problems.extend(exc.diagnostics)
    if problems:
        raise ConfigError(problems)
    return found
