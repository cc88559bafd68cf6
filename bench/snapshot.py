"""Reads beside writes: `GetSession` and turns on the same sessions, from several processes,
through several replicas sharing one store, counting the calls that fail falsely.

A turn running beside another on the same session may lose (ABORTED: the session is busy,
or CONFLICT): that is its contract, and the client retries. What must never happen is a
read that reports damage that is not there: `GetSession` or a turn answering
FAILED_PRECONDITION (SESSION_CORRUPT, `history_mismatch`) because it read the session
record and its messages on either side of another turn's commit (the next call would
succeed, the history intact). A turn answering FAILED_PRECONDITION, INTERNAL or UNKNOWN,
and a `GetSession` answering anything but a whole history, count as false errors.

Each worker process drives both kinds of call on the same sessions at once, moving to the
next session after a bounded number of calls (a server-held history grows with every turn,
and a session read in full on every call should not). The store is PostgreSQL by default
(a throwaway cluster on loopback, bench/_postgres.py), or SQLite (one file shared by the
replicas) or memory (one replica).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Final

import grpc
from google.rpc import error_details_pb2, status_pb2

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc

from ._postgres import Cluster, cluster
from ._servers import bench_env, running

ROOT: Final = Path(__file__).resolve().parents[1]
DEFINITIONS: Final = Path(__file__).resolve().with_name("definitions")
FALSE: Final = frozenset({"FAILED_PRECONDITION", "INTERNAL", "UNKNOWN"})
"""Status codes no turn of this load may answer (ABORTED is a turn meeting another on its
session: busy, or a lost compare-and-set). `GetSession` must always succeed."""


@dataclass(frozen=True, slots=True)
class Config:
    """Total calls, worker processes, replicas, concurrent callers per process and kind."""

    store: str = "postgresql"
    calls: int = 20_000
    processes: int = 4
    replicas: int = 3
    readers: int = 4
    writers: int = 4
    per_session: int = 200
    """Calls on one session by one process before it moves to the next: with every turn
    adding two messages, a session stays below the 1,000 messages a history may hold."""


QUICK: Final = Config(calls=2_000, processes=3, replicas=2)


@dataclass(frozen=True, slots=True)
class Job:
    """One worker process's share: replica addresses, sessions in order, calls."""

    addresses: tuple[str, ...]
    sessions: tuple[str, ...]
    calls: int
    readers: int
    writers: int
    per_session: int
    tag: str


def work(job: Job) -> dict[str, int]:
    """Run one worker process's calls; outcome counts keyed `kind:CODE`."""
    return asyncio.run(_work(job))


async def _work(job: Job) -> dict[str, int]:
    counts: Counter[str] = Counter()
    issued = 0
    serial = 0
    async with AsyncExitStack() as stack:
        stubs = []
        for address in job.addresses:
            channel = grpc.aio.insecure_channel(address)
            await stack.enter_async_context(channel)
            stubs.append(chat_pb2_grpc.ChatServiceStub(channel))

        def next_call() -> tuple[int, str] | None:
            nonlocal issued
            if issued >= job.calls:
                return None
            index = issued
            issued += 1
            return index, job.sessions[(index // job.per_session) % len(job.sessions)]

        async def reader(number: int) -> None:
            while (call := next_call()) is not None:
                index, session = call
                stub = stubs[(index + number) % len(stubs)]
                try:
                    reply = await stub.GetSession(pb.GetSessionRequest(session_id=session))
                except grpc.aio.AioRpcError as exc:
                    counts[f"get:{exc.code().name}"] += 1
                    _note(counts, exc, always=True)
                    continue
                counts["get:OK"] += 1
                if len(reply.messages) % 2:
                    counts["get:odd_history"] += 1

        async def writer(number: int) -> None:
            nonlocal serial
            while (call := next_call()) is not None:
                index, session = call
                stub = stubs[(index + number) % len(stubs)]
                serial += 1
                request = pb.StreamTurnRequest(
                    session_id=session,
                    turn_id=f"{job.tag}-{serial}",
                    submit=pb.SubmitOperation(content="/ping"),
                )
                try:
                    events = [event async for event in stub.StreamTurn(request)]
                except grpc.aio.AioRpcError as exc:
                    counts[f"turn:{exc.code().name}"] += 1
                    _note(counts, exc)
                    continue
                last = events[-1].WhichOneof("event") if events else "nothing"
                counts[f"turn:{'OK' if last == 'completed' else last}"] += 1

        await asyncio.gather(
            *(reader(n) for n in range(job.readers)), *(writer(n) for n in range(job.writers))
        )
    return dict(counts)


def _note(counts: Counter[str], error: grpc.aio.AioRpcError, *, always: bool = False) -> None:
    """Count a false error's reason too (its `code` metadata, as the service sends it)."""
    if error.code().name not in FALSE and not always:  # a turn meeting another
        return
    why = "?"
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    why = f"{info.reason} {info.metadata.get('code', '')}".strip()
    counts[f"why:{why}"] += 1


def _serve(store: str, state_dir: Path, url: str) -> list[str]:
    state_dir.mkdir(parents=True, exist_ok=True)
    return [
        sys.executable,
        "-m",
        "agentskit_chat.cli",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--definitions",
        str(DEFINITIONS),
        "--state-dir",
        str(state_dir),
        "--store",
        url,
        *(["--migrate"] if store == "postgresql" else []),
    ]


async def _create(address: str, count: int) -> tuple[str, ...]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = chat_pb2_grpc.ChatServiceStub(channel)
        sessions = []
        for _ in range(count):
            reply = await stub.CreateSession(
                pb.CreateSessionRequest(definition_id="ping", history_mode=pb.HISTORY_MODE_SERVER)
            )
            sessions.append(reply.session.session_id)
    return tuple(sessions)


async def run(config: Config, postgres: Cluster | None = None) -> tuple[dict[str, int], float]:
    """Start the store (on `postgres` when given, else a cluster of its own) and the
    replicas, run the workers; (outcome counts, seconds)."""
    env = bench_env()
    env["AGENTSKIT_CHAT_DIGEST_KEY"] = secrets.token_hex(32)
    replicas = 1 if config.store == "memory" else config.replicas
    with ExitStack() as stack:
        state = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="snapshot-bench-")))
        if config.store == "postgresql":
            database = postgres or stack.enter_context(cluster())
            env["AGENTSKIT_CHAT_STORE_PASSWORD"] = database.password
            name = f"snapshot_{secrets.token_hex(3)}"
            url = database.create_database(name)
            stack.callback(database.drop_database, name)
        elif config.store == "sqlite":
            url = f"sqlite:{state / 'sessions.db'}"
        else:
            url = "memory://"
        async with AsyncExitStack() as servers:
            addresses = []
            for number in range(replicas):
                argv = _serve(config.store, state / f"replica-{number}", url)
                server = await servers.enter_async_context(
                    running(f"replica {number}", argv, cwd=ROOT, env=env)
                )
                addresses.append(server.address)
            share = -(-config.calls // config.processes)
            rounds = -(-share // config.per_session)
            sessions = await _create(addresses[0], max(1, rounds))
            jobs = [
                Job(
                    tuple(addresses[number % len(addresses) :] + addresses[: number % replicas]),
                    sessions,
                    share,
                    config.readers,
                    config.writers,
                    config.per_session,
                    f"p{number}",
                )
                for number in range(config.processes)
            ]
            start = time.perf_counter()
            loop = asyncio.get_running_loop()
            with ProcessPoolExecutor(len(jobs), mp_context=get_context("spawn")) as pool:
                results = await asyncio.gather(
                    *(loop.run_in_executor(pool, work, job) for job in jobs)
                )
            elapsed = time.perf_counter() - start
    total: Counter[str] = Counter()
    for result in results:
        total.update(result)
    return dict(total), elapsed


def false_errors(counts: dict[str, int]) -> int:
    """GetSession calls that did not answer a whole history (an error, or an odd number of
    messages: a turn adds two), and turns that answered a code this load never causes."""
    wrong = 0
    for key, n in counts.items():
        kind, outcome = key.split(":", 1)
        if (kind == "get" and outcome != "OK") or (kind == "turn" and outcome in FALSE):
            wrong += n
    return wrong


def report(counts: dict[str, int], config: Config, elapsed: float) -> dict[str, Any]:
    """Print the outcome table and verdict; the figures as plain data."""
    calls = sum(n for key, n in counts.items() if key.split(":")[0] in ("get", "turn"))
    calls -= counts.get("get:odd_history", 0)
    wrong = false_errors(counts)
    replicas = 1 if config.store == "memory" else config.replicas
    print(
        f"\nSnapshot reads: {calls:,} calls ({config.store}, {replicas} replica(s),"
        f" {config.processes} processes x {config.readers} GetSession + {config.writers}"
        f" turn callers) in {elapsed:.1f} s"
    )
    for key in sorted(counts):
        print(f"  {key:<32} {counts[key]:>8,}")
    verdict = "met" if wrong == 0 else "MISSED"
    print(f"Goal: 0 false errors; {wrong} in {calls:,} calls: {verdict}")
    return {"calls": calls, "false_errors": wrong, "counts": counts, "seconds": elapsed}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the load and print its outcome; 1 when any call failed falsely, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short run (smoke test)")
    parser.add_argument("--store", choices=("postgresql", "sqlite", "memory"))
    parser.add_argument("--calls", type=int, help="calls in all [20000]")
    parser.add_argument("--processes", type=int, help="worker processes [4]")
    parser.add_argument("--replicas", type=int, help="serve processes sharing the store [3]")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else Config()
    config = Config(
        store=args.store or base.store,
        calls=args.calls or base.calls,
        processes=args.processes or base.processes,
        replicas=args.replicas or base.replicas,
        readers=base.readers,
        writers=base.writers,
        per_session=base.per_session,
    )
    counts, elapsed = asyncio.run(run(config))
    data = report(counts, config, elapsed)
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if data["false_errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
