"""The rollout split: which revision new sessions get when several revisions are weighted.

Two `serve` processes, each on a SQLite store of its own, serve the same revisions of one
chat (revision 1 with `rollout: 80` and revision 2 with `rollout: 20` by default; see
docs/how-to/revisions.md). `--sessions` new sessions (10,000) are created on the first,
with ids the server makes up, and each revision's measured share is printed beside its
weight, with the deviation in percentage points and in standard deviations of a binomial
draw of that many sessions. Then `--same` session ids (1,000), chosen here, are created on
both servers: a stable hash of the id picks the revision, so both must agree on each.

The run fails (exit status 1) when a share is more than SIGMAS standard deviations off its
weight, which chance alone does less than once in 10^8 runs, or when the servers disagree.

    python -m bench.rollout [--quick] [--sessions N] [--same N] [--weights 80,20] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from agentskit_chat_client import ChatClient

from . import _cli
from ._servers import ROOT, bench_env, running

DEFINITION: Final = "split"
SIGMAS: Final = 6.0
"""A share further than this many standard deviations from its weight fails the run."""
IN_FLIGHT: Final = 64
"""CreateSession calls under way at once."""
REVISION: Final = """\
id: split
revision: {revision}
rollout: {weight}
model: {{adapter: offline}}
conversation:
  initial: open
  states: {{open: {{}}}}
"""


@dataclass(frozen=True, slots=True)
class Config:
    """New sessions to split, ids to create on both servers, and the revisions' weights."""

    sessions: int = 10_000
    same: int = 1_000
    weights: tuple[int, ...] = (80, 20)


QUICK: Final = Config(sessions=500, same=100)


@dataclass(frozen=True, slots=True)
class Share:
    """One revision's part of the new sessions."""

    revision: int
    weight: int
    sessions: int
    share: float
    """Of all new sessions, 0 to 1."""
    expected: float
    """The weight's part of the total weight, 0 to 1."""
    deviation_points: float
    """`share - expected`, in percentage points."""
    sigmas: float
    """The deviation in standard deviations of a binomial draw, signed."""


def write_revisions(directory: Path, weights: Sequence[int]) -> Path:
    """One file per revision, 1 to len(weights), each with its weight."""
    directory.mkdir(parents=True, exist_ok=True)
    for revision, weight in enumerate(weights, start=1):
        text = REVISION.format(revision=revision, weight=weight)
        (directory / f"split-{revision}.yaml").write_text(text, encoding="utf-8")
    return directory


def shares(counts: Counter[int], weights: Sequence[int]) -> list[Share]:
    """Each revision's measured share against its weight."""
    total, weight_sum = sum(counts.values()), sum(weights)
    found = []
    for revision, weight in enumerate(weights, start=1):
        expected = weight / weight_sum
        got = counts.get(revision, 0)
        spread = math.sqrt(total * expected * (1 - expected))
        off = got - total * weight / weight_sum  # exact where the weights divide the total
        sigmas = off / spread if spread else (0.0 if off == 0 else math.inf)
        share = got / total
        found.append(
            Share(revision, weight, got, share, expected, (share - expected) * 100, sigmas)
        )
    return found


async def _created(
    client: ChatClient, ids: Sequence[str | None], gate: asyncio.Semaphore
) -> list[int]:
    """Create a session for each id (None: the server picks one); their revisions."""

    async def one(session_id: str | None) -> int:
        async with gate:
            session = await client.create_session(DEFINITION, session_id=session_id)
            return session.definition_revision

    return list(await asyncio.gather(*(one(session_id) for session_id in ids)))


async def measure(config: Config) -> tuple[Counter[int], Counter[int], list[str]]:
    """(new sessions by revision, the ids created on both by the first's revision, the ids
    the servers disagree on)."""
    env = bench_env()
    async with AsyncExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rollout-bench-")))
        definitions = write_revisions(work / "definitions", config.weights)
        clients = []
        for name in ("first", "second"):
            serve = [sys.executable, "-m", "agentskit_chat.cli", "--log-level", "WARNING"]
            serve += ["serve", "--listen", "127.0.0.1:0", "--definitions", str(definitions)]
            serve += ["--state-dir", str(work / name), "--drain-delay", "0"]
            server = await stack.enter_async_context(running(name, serve, cwd=ROOT, env=env))
            clients.append(await stack.enter_async_context(ChatClient(server.address, timeout=30)))
        gate = asyncio.Semaphore(IN_FLIGHT)
        new = await _created(clients[0], [None] * config.sessions, gate)
        ids = [f"rollout-{n:06d}" for n in range(config.same)]
        first, second = [await _created(client, ids, gate) for client in clients]
    disagree = [i for i, a, b in zip(ids, first, second, strict=True) if a != b]
    return Counter(new), Counter(first), disagree


def report(
    config: Config, counts: Counter[int], same_ids: Counter[int], disagree: Sequence[str]
) -> dict[str, Any]:
    """Print the split and the agreement; the figures as plain data."""
    found = shares(counts, config.weights)
    same = sum(same_ids.values())
    print(
        f"\nRollout split: {sum(counts.values()):,} new sessions through `serve` (SQLite), "
        f"ids made up by the server, weights {'/'.join(map(str, config.weights))}"
    )
    print(
        f"  {'revision':>8} {'weight':>7} {'sessions':>9} {'share':>8} {'deviation':>10} {'sd':>6}"
    )
    for share in found:
        print(
            f"  {share.revision:>8} {share.expected:>7.1%} {share.sessions:>9,} "
            f"{share.share:>8.2%} {share.deviation_points:>+7.2f} pt {share.sigmas:>+6.2f}"
        )
    print(
        f"  sd: standard deviations of a binomial draw of {sum(counts.values()):,}; "
        f"beyond {SIGMAS:g} fails the run"
    )
    print(f"Same id on two servers: {same - len(disagree):,} of {same:,} got the same revision")
    return {
        "config": asdict(config),
        "shares": [asdict(share) for share in found],
        "same_ids": same,
        "same_ids_by_revision": {str(r): n for r, n in sorted(same_ids.items())},
        "disagreements": list(disagree),
        "bound_sigmas": SIGMAS,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the split and print it; 1 when it is off its weights or the servers
    disagree, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="500 sessions, 100 shared ids")
    parser.add_argument("--sessions", type=int, help="new sessions to split [10000]")
    parser.add_argument("--same", type=int, help="session ids created on both servers [1000]")
    parser.add_argument("--weights", help="the revisions' weights, comma separated [80,20]")
    _cli.add_output_options(parser, unpinned=None)
    args = parser.parse_args(argv)
    base = QUICK if args.quick else Config()
    weights = base.weights
    if args.weights:
        weights = tuple(int(w) for w in args.weights.split(","))
    config = Config(
        sessions=args.sessions or base.sessions,
        same=base.same if args.same is None else args.same,
        weights=weights,
    )
    counts, same_ids, disagree = asyncio.run(measure(config))
    data = report(config, counts, same_ids, disagree)
    off = [s for s in data["shares"] if abs(s["sigmas"]) > SIGMAS]
    failures = [f"revision {s['revision']}: {s['sigmas']:+.2f} sd" for s in off]
    failures += [f"session id {i}: the servers disagree" for i in disagree]
    return _cli.finish(data, args.json, *_cli.first_of(failures), "checks")


if __name__ == "__main__":
    raise SystemExit(main())
