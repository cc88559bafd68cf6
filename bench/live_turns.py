"""Live turns: the server CPU a turn costs with and without continuing, and what a continued
turn writes to the store.

Every measurement runs in a child process of its own: a ChatService (no transport) over a
fresh store runs agentic turns of a scripted model streaming `CHUNKS` chunks, one after the
other, each in a session of its own, and reports the process CPU time per turn. Variants:

- `base`: the service as it was before turns could outlive their stream (the server code
  of `--baseline-ref`, extracted with `git archive`; by default BASELINE_REF, the last
  commit before turns could outlive their stream);
- `cancel`: this code, a turn that neither continues nor is watched;
- `continue`: this code, a turn started with DISCONNECT_MODE_CONTINUE, its stream read to
  the end (nothing more is stored);
- `detached`: `continue`, its stream closed after the first delta: the turn runs on
  alone and its events go to the store in batches, for a reattach on any process;
- `watched`: `cancel`, followed from its first event to its end by a watcher on another
  service over the same store (which asks for its events: they go to the store in
  batches); the watcher's CPU is included (both services run in the child).

Rounds interleave the variants (each round runs every variant once, in a rotated order),
and the table gives the median per variant and the median of same-round ratios to `base`.
The service-only figure overstates the share a real server sees (it leaves out gRPC and
the network, which cost more than the service per turn), so it is the conservative one.

For `detached`, the child also reports the store writes (batches) and bytes per turn, read
back from the store after the turn.

    .venv/bin/python -m bench.live_turns                 # SQLite, 5 rounds
    .venv/bin/python -m bench.live_turns --postgresql    # SQLite and PostgreSQL
    .venv/bin/python -m bench.live_turns --variants watched --rounds 9  # base and watched
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import AsyncGenerator
from contextlib import ExitStack, aclosing
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
EXAMPLES: Final = ROOT / "examples" / "definitions"
CHUNKS: Final = 40
CHUNK: Final = "a chunk of an agentic answer "
CHUNK_SECONDS: Final = 0.02
"""Between two chunks, as a model streams (an answer takes 0.8 s)."""
CONCURRENT: Final = 25
"""Turns running at once (each in a session of its own)."""
KEY: Final = b"live-turns-bench-digest-key-32by"
BASELINE_REF: Final = "56f65ce"
"""The service before turns could outlive their stream: what every variant is compared with."""
VARIANTS: Final = ("base", "cancel", "continue", "detached", "watched")


class Scripted:
    """A model that streams `CHUNKS` chunks at once."""

    name = "scripted"
    provider = "agentskit.bench"

    async def stream(self, request: Any) -> AsyncGenerator[Any, None]:
        from agentskit_chat.models import FinishChunk, TextChunk

        for _ in range(CHUNKS):
            yield TextChunk(CHUNK)
            await asyncio.sleep(CHUNK_SECONDS)
        yield FinishChunk("stop")

    async def close(self) -> None:
        """Nothing to release."""


async def _child(variant: str, url: str, password: str | None, turns: int) -> dict[str, Any]:
    from agentskit_chat.conversation import load_definitions
    from agentskit_chat.models import AdapterRegistry
    from agentskit_chat.service import Catalog, ChatService, Submit, TurnRequest
    from agentskit_chat.storage import HistoryMode, open_store

    definitions = list(load_definitions(EXAMPLES).values())
    assisted = dataclasses.replace(definitions[0], id="assisted", model={"adapter": "scripted"})
    store = await open_store(url, password=password, migrate=True)
    adapters = AdapterRegistry({"scripted": lambda settings: Scripted()})
    service = ChatService(Catalog([assisted]), store, digest_key=KEY, adapters=adapters)
    other = None
    extra: dict[str, Any] = {}
    if variant in ("continue", "detached"):
        from agentskit_chat.service import DisconnectMode

        extra["on_disconnect"] = DisconnectMode.CONTINUE
    if variant == "watched":
        other = ChatService(
            Catalog([assisted]), store, digest_key=KEY, adapters=adapters, holder="bench-other"
        )

    async def one(n: int) -> tuple[str, str]:
        session = await service.create_session("assisted", None, HistoryMode.SERVER)
        request = TurnRequest(session.session_id, f"t-{n}", Submit("hello"), **extra)
        watching = None
        async with aclosing(service.stream_turn(request)) as events:
            async for _, event in events:
                if other is not None and watching is None:  # the turn runs: watch it
                    watching = asyncio.ensure_future(
                        _drain(other.watch_turn(session.session_id, f"t-{n}"))
                    )
                if variant == "detached" and type(event).__name__ == "Delta":
                    break
        if watching is not None:
            await watching
        return session.session_id, f"t-{n}"

    await asyncio.gather(*(one(-1 - n) for n in range(CONCURRENT)))  # warm-up
    started = time.process_time()
    for first in range(0, turns, CONCURRENT):
        done = await asyncio.gather(*(one(n) for n in range(first, min(turns, first + CONCURRENT))))
        await service.turns.wait_idle()  # detached turns end, their last batches written
    last = done[-1]
    cpu = (time.process_time() - started) / turns
    result: dict[str, Any] = {"cpu_ms": cpu * 1000}
    if variant == "detached":
        from agentskit_chat.storage import TurnKey

        view = await service.get_turn(*last)
        key = TurnKey("", last[0], f"{last[1]}@{view.started_at_ms}")
        batches = await store.read_events(key)
        result["writes"] = len(batches)
        result["bytes"] = sum(len(b.body) for b in batches)
    await service.close()
    return result


async def _drain(stream: AsyncGenerator[Any, None]) -> int:
    async with aclosing(stream) as events:
        return len([item async for item in events])


def _baseline(ref: str, into: Path) -> Path:
    archive = into / "base.tar"
    with archive.open("wb") as handle:
        subprocess.run(["git", "archive", ref, "server"], cwd=ROOT, stdout=handle, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "server"


def _measure(
    variant: str, url: str, password: str | None, turns: int, base: Path
) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(base)] * (variant == "base") + [str(ROOT), env.get("PYTHONPATH", "")]
    )
    arguments = [sys.executable, "-m", "bench.live_turns", "--child", variant, "--url", url]
    arguments += ["--turns", str(turns)]
    if password:
        env["BENCH_STORE_PASSWORD"] = password
    done = subprocess.run(arguments, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--postgresql", action="store_true", help="measure PostgreSQL as well")
    parser.add_argument("--baseline-ref", default=BASELINE_REF)
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS[1:]),
        help="comma-separated variants to measure besides base (default: all)",
    )
    parser.add_argument("--child", choices=VARIANTS)
    parser.add_argument("--url")
    args = parser.parse_args()
    if args.child:
        password = os.environ.get("BENCH_STORE_PASSWORD")
        print(json.dumps(asyncio.run(_child(args.child, args.url, password, args.turns))))
        return
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        base = _baseline(args.baseline_ref, scratch)
        stores: list[tuple[str, Any]] = [("sqlite", None)]
        if args.postgresql:
            from ._postgres import cluster

            stores.append(("postgresql", stack.enter_context(cluster())))
        chosen = ("base", *(v for v in VARIANTS[1:] if v in args.variants.split(",")))
        for name, database in stores:
            cpu: dict[str, list[float]] = {v: [] for v in chosen}
            ratios: dict[str, list[float]] = {v: [] for v in chosen}
            written: list[dict[str, Any]] = []
            for round_ in range(args.rounds):
                order = chosen[round_ % len(chosen) :] + chosen[: round_ % len(chosen)]
                figures = {}
                for variant in order:
                    if database is None:
                        url = f"sqlite:///{scratch}/{name}-{round_}-{variant}.db"
                        password = None
                    else:
                        db = f"bench_{round_}_{variant}"
                        url, password = database.create_database(db), database.password
                    figures[variant] = _measure(variant, url, password, args.turns, base)
                    cpu[variant].append(figures[variant]["cpu_ms"])
                for variant in chosen:
                    ratios[variant].append(figures[variant]["cpu_ms"] / figures["base"]["cpu_ms"])
                if "detached" in figures:
                    written.append(figures["detached"])
            print(
                f"\n{name}: {args.turns} turns of {CHUNKS} chunks per variant, {args.rounds} rounds"
            )
            print(f"{'variant':<10} {'CPU ms/turn':>12} {'vs base':>9}   rounds (ms)")
            for variant in chosen:
                extra = statistics.median(ratios[variant]) - 1
                rounds = " ".join(f"{v:.2f}" for v in cpu[variant])
                median = statistics.median(cpu[variant])
                print(f"{variant:<10} {median:>12.3f} {extra:>+9.1%}   {rounds}")
            if written:
                writes = statistics.median(w["writes"] for w in written)
                size = statistics.median(w["bytes"] for w in written)
                print(f"store per detached turn: {writes:g} writes, {size:g} bytes")


if __name__ == "__main__":
    main()
