"""Benchmarks that compare paths one run at a time (model.py, tools.py): their command
line, the alternating order of their runs, and the shape of their report.

Runs alternate which path goes first, so that neither always runs on a warmer (or
colder) server; the warm-up runs are untimed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol, TypeVar

from . import _cli


@dataclass(frozen=True, slots=True)
class Runs:
    """How many timed runs each path gets, and the untimed warm-up runs before them."""

    noun: str
    """What a run is called (`calls`, `rounds`): its option and its key in the figures."""
    count: int
    """Timed runs per path."""
    warmup: int
    """Untimed runs per path before them."""

    def data(self) -> dict[str, int]:
        """The runs as the figures give them (`{"calls": 300, "warmup": 30}`)."""
        return {self.noun: self.count, "warmup": self.warmup}


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the report's table."""

    heading: str
    key: str
    """The key of its figure in a path's summary."""
    width: int
    form: str = ".2f"
    """How the figure is written (a format spec without the width)."""


class Failing(Protocol):
    """A path's figures: what went wrong with its runs, among the rest."""

    failures: list[str]


Figures = TypeVar("Figures", bound=Failing)


def alternating(paths: Sequence[str], runs: Runs) -> Iterator[tuple[str, bool]]:
    """Each path once a round, in `paths` order every other round and reversed in the
    others, with whether the round is timed (after the warm-up rounds)."""
    for index in range(runs.warmup + runs.count):
        for path in paths if index % 2 else paths[::-1]:
            yield path, index >= runs.warmup


QUICK_NOTE: Final = " (--quick: too few samples to trust)"
"""What a report adds to its verdict after a `--quick` run."""


def machine(*more: str) -> str:
    """What the figures were measured on: `N CPUs, Python X.Y.Z` and `more`."""
    return ", ".join((f"{os.cpu_count()} CPUs", f"Python {platform.python_version()}", *more))


def table(title: str, width: int, columns: Sequence[Column], rows: Mapping[str, Any]) -> None:
    """Print the table: a row per path of `rows` (its name in `width`), a column each."""
    print(f"  {title:<{width}} " + " ".join(f"{c.heading:>{c.width}}" for c in columns))
    for path, row in rows.items():
        figures = (format(row[c.key], f">{c.width}{c.form}") for c in columns)
        print(f"  {path:<{width}} " + " ".join(figures))


def main(
    argv: Sequence[str] | None,
    description: str | None,
    full: Runs,
    quick: Runs,
    measure: Callable[[Runs], Coroutine[Any, Any, Mapping[str, Figures]]],
    report: Callable[[Mapping[str, Figures], Runs, bool], dict[str, Any]],
) -> int:
    """Run a benchmark from its command line (`--quick`, `--<noun>`, `--json`): measure,
    report, write the figures where asked; 1 when any run failed, else 0."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=f"a few {full.noun} (smoke run)")
    parser.add_argument(
        f"--{full.noun}", type=int, help=f"measured {full.noun} per path [{full.count}]"
    )
    _cli.add_output_options(parser, unpinned=None)
    args = parser.parse_args(argv)
    base = quick if args.quick else full
    runs = replace(base, count=getattr(args, full.noun) or base.count)
    figures = asyncio.run(measure(runs))
    data = report(figures, runs, args.quick)
    failures = [problem for f in figures.values() for problem in f.failures]
    return _cli.finish(data, args.json, *_cli.first_of(failures), full.noun)
