"""What the benchmarks' command lines share: their common options, and the end of a run
(the figures written as JSON where asked, then the verdict on failed calls)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from ._turns import Load

SMOKE: Final = "one short round (smoke run)"
UNPINNED: Final = "leave server and load placement to the scheduler"


def add_run_options(parser: argparse.ArgumentParser, *, rounds: int, quick: str = SMOKE) -> None:
    """`--quick` (a smoke run, described by `quick`) and `--rounds` (default `rounds`)."""
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--rounds", type=int, help=f"rounds [{rounds}]")


def add_output_options(parser: argparse.ArgumentParser, *, unpinned: str | None = UNPINNED) -> None:
    """`--json PATH`, and `--no-pin` (described by `unpinned`) unless it is None."""
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    if unpinned is not None:
        parser.add_argument("--no-pin", action="store_true", help=unpinned)


def load_from(args: argparse.Namespace, base: Load) -> dict[str, Any]:
    """`Load`'s fields as `--clients`, `--rounds`, `--seconds` and `--warmup` set them,
    where the parser has them and they are given; the others from `base`."""
    names = ("clients", "rounds", "seconds", "warmup")
    return {name: getattr(args, name, None) or getattr(base, name) for name in names}


def finish(
    data: Mapping[str, Any],
    path: Path | None,
    failed: int,
    first: str | None,
    noun: str,
    *,
    stream: TextIO | None = None,
) -> int:
    """Write `data` to `path` as JSON where given; then 0, or 1 after an INVALID line when
    `failed` of the `noun` failed (`first` being the first failure)."""
    if path is not None:
        path.write_text(json.dumps(data, indent=2) + "\n")
    if failed:
        print(f"INVALID: {failed} {noun} failed (first: {first})", file=stream or sys.stdout)
        return 1
    return 0


def first_of(failures: Sequence[str]) -> tuple[int, str | None]:
    """(how many, the first) of `failures`."""
    return len(failures), failures[0] if failures else None
