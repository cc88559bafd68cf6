"""`agentskit-chat test --compare OLD NEW` and `--revisions OLD,NEW`: the conversation
tests run on two revisions of the chats, and every turn that changes kind, route or state
is listed.

- `--revisions 1,2`: the definitions directory (`--definitions`, else each test file's
  directory) serves both revisions side by side; each case runs once in a session pinned
  to each revision.
- `--compare OLD NEW`: two definition files or directories, such as the chat before and
  after an edit; each side serves the newest revision of each id it holds.

Each side runs in-process (memory store, scripted model), and no session ever migrates
during a comparison: a side serves one revision of the compared chat. Expectations are not
checked. A rename the newer revision's migration declares (a route or state it maps) is
shown but is not a change. The exit status reads like `diff`'s: 0 when no turn changed
(renames aside), 1 when a turn changed, 2 when a file or definition is invalid, a case
could not run, or no case was compared (every one skipped because a side does not serve
its chat).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentskit_chat.conversation import ChatDefinition, ConfigError, Migration, load_definition
from agentskit_chat.models import AdapterRegistry
from agentskit_chat.scenarios import (
    CaseComparison,
    InProcessTarget,
    TestFile,
    compare_file,
    comparison_report,
    comparison_totals,
)

from ._definitions import gather
from ._revision_pair import revision_pair


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """`--compare` and `--revisions`, one or the other."""
    sides = parser.add_mutually_exclusive_group()
    sides.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("OLD", "NEW"),
        help="run the tests on two definition files or directories and list the turns "
        "that change kind, route or state",
    )
    sides.add_argument(
        "--revisions",
        type=revision_pair,
        metavar="OLD,NEW",
        help="run the tests on two revisions served side by side in the definitions "
        "directory and list the turns that change kind, route or state",
    )


def comparing(args: argparse.Namespace) -> bool:
    """Whether the command compares two revisions."""
    return args.compare is not None or args.revisions is not None


def run_compare(args: argparse.Namespace, files: Sequence[TestFile]) -> int:
    """Compare, report; see the module documentation for the status."""
    if args.target or args.junit:
        print(
            "test: --compare and --revisions run in-process, without --target or --junit",
            file=sys.stderr,
        )
        return 2
    if args.compare is not None and args.definitions is not None:
        print("test: --compare names the definitions; leave out --definitions", file=sys.stderr)
        return 2
    try:
        results = asyncio.run(_compare_all(args, files))
    except (ConfigError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    old, new = (
        (f"revision {args.revisions[0]}", f"revision {args.revisions[1]}")
        if args.revisions is not None
        else (str(args.compare[0]), str(args.compare[1]))
    )
    sys.stdout.write(comparison_report(results, old, new))
    same, changed, _, errors = comparison_totals(results)
    if errors or same + changed == 0:
        return 2
    return 1 if changed else 0


@dataclass(frozen=True, slots=True)
class _Sides:
    old: InProcessTarget
    new: InProcessTarget
    migrations: dict[str, Migration]
    """The new side's migration from the old side's revision, by definition id."""

    async def close(self) -> None:
        await self.old.close()
        await self.new.close()


async def _compare_all(args: argparse.Namespace, files: Sequence[TestFile]) -> list[CaseComparison]:
    results: list[CaseComparison] = []
    sides: dict[Path | None, _Sides] = {}
    try:
        for test_file in files:
            key = None if args.compare is not None else _directory(args, test_file)
            pair = sides.get(key)
            if pair is None:
                pair = sides[key] = _build(args, key)
            results.extend(await compare_file(pair.old, pair.new, test_file, pair.migrations))
    finally:
        for pair in sides.values():
            await pair.close()
    return results


def _directory(args: argparse.Namespace, test_file: TestFile) -> Path:
    directory: Path = args.definitions or Path(test_file.path).parent
    return directory


def _build(args: argparse.Namespace, directory: Path | None) -> _Sides:
    modules: Sequence[str] = args.definitions_module
    if directory is None:
        old_path, new_path = args.compare
        before, after = _newest(_side(old_path, modules)), _newest(_side(new_path, modules))
        return _Sides(InProcessTarget(before), InProcessTarget(after), _migrations(before, after))
    hosted = gather(directory, modules, AdapterRegistry())
    old, new = args.revisions
    before, after = _pinned(hosted, old), _pinned(hosted, new)
    return _Sides(
        InProcessTarget(before, revision=old),
        InProcessTarget(after, revision=new),
        _migrations(
            [d for d in before if d.revision == old], [d for d in after if d.revision == new]
        ),
    )


def _migrations(
    before: Sequence[ChatDefinition], after: Sequence[ChatDefinition]
) -> dict[str, Migration]:
    """By id, the migration the new side's revision declares from the old side's."""
    older = {d.id: d.revision for d in before}
    found: dict[str, Migration] = {}
    for definition in after:
        migration = definition.migrations.get(older.get(definition.id, -1))
        if migration is not None:
            found[definition.id] = migration
    return found


def _side(path: Path, modules: Sequence[str]) -> list[ChatDefinition]:
    if path.is_dir():
        return gather(path, modules, AdapterRegistry())
    return [load_definition(path), *gather(None, modules, AdapterRegistry())]


def _newest(definitions: Sequence[ChatDefinition]) -> list[ChatDefinition]:
    """The newest revision of each id: one revision per chat, so nothing migrates."""
    newest: dict[str, ChatDefinition] = {}
    for definition in definitions:
        if definition.id not in newest or newest[definition.id].revision < definition.revision:
            newest[definition.id] = definition
    return list(newest.values())


def _pinned(definitions: Sequence[ChatDefinition], revision: int) -> list[ChatDefinition]:
    """Revision `revision` alone of each id that has it, so nothing migrates; the other
    ids as they are (their sessions are refused: they lack the revision)."""
    having = {d.id for d in definitions if d.revision == revision}
    return [d for d in definitions if d.id not in having or d.revision == revision]
