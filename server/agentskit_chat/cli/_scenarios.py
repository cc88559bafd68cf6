"""`agentskit-chat test`: run conversation test files in-process or against a live server.

In-process, each file's cases talk to the definitions of `--definitions` (by default the
directory holding the file) through the application service, with a memory store and a
scripted model instead of the configured one. With `--target`, they talk to a live server
through the Python client. Exit status: 0 when every case passed, 1 when one failed or
could not run, 2 when a test file or a definition is invalid (nothing runs then).

With `--compare OLD NEW` or `--revisions OLD,NEW`, the cases run on two revisions and the
turns that change are listed instead (see `_scenario_compare`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from agentskit_chat.conversation import ConfigError
from agentskit_chat.models import AdapterRegistry
from agentskit_chat.scenarios import (
    CaseResult,
    InProcessTarget,
    RemoteTarget,
    Target,
    TestFile,
    TestFileError,
    find_test_files,
    junit_xml,
    load_test_file,
    run_file,
    text_report,
    totals,
)

from ._connection import add_connection_arguments, client_options
from ._definitions import gather
from ._scenario_compare import add_compare_arguments, comparing, run_compare


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `test`."""
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="test files (*.test.yaml) or directories searched for them",
    )
    parser.add_argument(
        "--target", metavar="HOST:PORT", help="run against this live server instead of in-process"
    )
    parser.add_argument(
        "--definitions",
        type=Path,
        metavar="DIR",
        help="in-process: the definitions directory [the directory of each test file]",
    )
    parser.add_argument(
        "--definitions-module",
        action="append",
        default=[],
        metavar="MODULE",
        help="in-process: also host the chats a Python module defines; repeatable",
    )
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write a JUnit XML report")
    add_compare_arguments(parser)
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Load every file, run every case, report; see the module documentation for the status."""
    files = find_test_files(args.paths)
    if not files:
        print("test: no test files (*.test.yaml) found", file=sys.stderr)
        return 2
    loaded: list[TestFile] = []
    problems: list[str] = []
    for path in files:
        try:
            loaded.append(load_test_file(path))
        except TestFileError as exc:
            problems.extend(str(problem) for problem in exc.problems)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    if comparing(args):
        return run_compare(args, loaded)
    try:
        results = asyncio.run(_run_all(args, loaded))
    except (ConfigError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.junit is not None:  # first: the report is written even if stdout is closed early
        args.junit.parent.mkdir(parents=True, exist_ok=True)
        args.junit.write_bytes(junit_xml(results))
    sys.stdout.write(text_report(results))
    _, failed, errors = totals(results)
    return 1 if failed or errors else 0


async def _run_all(args: argparse.Namespace, files: Sequence[TestFile]) -> list[CaseResult]:
    results: list[CaseResult] = []
    if args.target:
        options = client_options(args)
        remote = RemoteTarget(args.target, tls=options.tls, token=options.token)
        try:
            for test_file in files:
                results.extend(await run_file(remote, test_file))
        finally:
            await remote.close()
        return results
    targets: dict[Path | None, Target] = {}
    try:
        for test_file in files:
            directory = args.definitions or Path(test_file.path).parent
            target = targets.get(directory)
            if target is None:
                hosted = gather(directory, args.definitions_module, AdapterRegistry())
                target = targets[directory] = InProcessTarget(hosted)
            results.extend(await run_file(target, test_file))
    finally:
        for target in targets.values():
            await target.close()
    return results
