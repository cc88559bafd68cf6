"""`agentskit-chat validate`: check definitions without serving them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentskit_chat.conversation import ConfigError
from agentskit_chat.models import AdapterRegistry

from ._definitions import gather


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `validate`."""
    parser.add_argument("directory", type=Path, help="directory of YAML/JSON definition files")
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
        definitions = gather(args.directory, args.definitions_module, AdapterRegistry())
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    for definition in sorted(definitions, key=lambda d: d.id):
        spec = definition.conversation
        print(
            f"ok  {definition.id} r{definition.revision}: {len(spec.states)} states, "
            f"{len(spec.routes)} routes ({definition.source})"
        )
    return 0
