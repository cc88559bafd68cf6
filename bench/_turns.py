"""What the turn benchmarks share: the `/ping` definition's turns over gRPC, clients that
rotate through server-held sessions, and timed phases with the server's CPU time.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc

ROOT: Final = Path(__file__).resolve().parents[1]
DEFINITIONS: Final = Path(__file__).resolve().with_name("definitions")
DEFINITION_ID: Final = "ping"
TURN_TEXT: Final = "/ping"
TURN_ANSWER: Final = "pong"
TURNS_PER_SESSION: Final = 50
OWN_CONNECTION: Final = (("grpc.use_local_subchannel_pool", 1),)
"""Channel options that give each client a connection of its own."""


class Worker(Protocol):
    """One client: a channel of its own and the call it repeats."""

    async def prepare(self, calls: int) -> None:
        """Get ready, outside any measurement, for about `calls` more calls."""

    async def next(self) -> None:
        """Untimed work before the next call."""

    async def call(self) -> str | None:
        """One timed call; None when it succeeded, else what went wrong."""


class SessionWorker:
    """Submits `/ping` turns to server-held sessions, a fresh one every TURNS_PER_SESSION."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.serial = 0
        self.turns = 0
        self.session = ""
        self.spare: list[str] = []

    async def create(self) -> str:
        """A new session of the ping definition."""
        raise NotImplementedError

    async def turn(self, turn_id: str) -> str | None:
        """One turn on the current session; None when it completed with the route's answer."""
        raise NotImplementedError

    async def prepare(self, calls: int) -> None:
        """Enough new sessions for `calls` turns; the next turn starts a fresh session."""
        needed = math.ceil(calls / TURNS_PER_SESSION) + 1
        self.spare.extend([await self.create() for _ in range(needed - len(self.spare))])
        self.session, self.turns = "", 0

    async def next(self) -> None:
        """Switch to a fresh session when the current one is full."""
        if not self.session or self.turns >= TURNS_PER_SESSION:
            self.session = self.spare.pop() if self.spare else await self.create()
            self.turns = 0

    async def call(self) -> str | None:
        """One turn, read to its last event."""
        self.serial += 1
        self.turns += 1
        return await self.turn(f"{self.tag}-{self.serial}")


class ChatWorker(SessionWorker):
    """Turns over the gRPC listener, through the generated stub."""

    def __init__(self, channel: grpc.aio.Channel, tag: str) -> None:
        super().__init__(tag)
        self.stub = chat_pb2_grpc.ChatServiceStub(channel)

    async def create(self) -> str:
        """A new session of the ping definition."""
        reply = await self.stub.CreateSession(pb.CreateSessionRequest(definition_id=DEFINITION_ID))
        return reply.session.session_id

    async def turn(self, turn_id: str) -> str | None:
        """One turn, read to its last event, which must complete with the route's answer."""
        request = pb.StreamTurnRequest(
            session_id=self.session, turn_id=turn_id, submit=pb.SubmitOperation(content=TURN_TEXT)
        )
        try:
            events = [event async for event in self.stub.StreamTurn(request)]
        except grpc.aio.AioRpcError as exc:
            return f"turn: {exc.code().name} {exc.details()}"
        if not events or events[-1].WhichOneof("event") != "completed":
            kinds = [event.WhichOneof("event") for event in events]
            return f"turn: events {kinds}"
        if events[-1].completed.content != TURN_ANSWER:
            return "turn: unexpected answer"
        return None


@dataclass(slots=True)
class Phase:
    """One timed phase: calls, wall time, latencies in seconds and CPU seconds used."""

    calls: int
    elapsed: float
    latencies: list[float]
    failures: list[str]
    server_cpu: float | None
    client_cpu: float


@dataclass(frozen=True, slots=True)
class Load:
    """Concurrent clients, rounds, and seconds of measurement and warm-up per target and
    round."""

    clients: int
    rounds: int
    seconds: float
    warmup: float


@dataclass(slots=True)
class Rounds:
    """A target's measured phases, round by round: calls per second, server CPU µs per
    call, the server's and the load's share of a core; every latency pooled."""

    name: str
    calls: int = 0
    failures: int = 0
    first_failure: str | None = None
    per_s: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    server_cores: list[float] = field(default_factory=list)
    client_cores: list[float] = field(default_factory=list)

    def add(self, phase: Phase) -> None:
        """Fold in one measured round."""
        self.calls += phase.calls
        self.failures += len(phase.failures)
        if phase.failures and self.first_failure is None:
            self.first_failure = phase.failures[0]
        self.per_s.append(phase.calls / phase.elapsed)
        self.latencies.extend(phase.latencies)
        if phase.server_cpu is not None:
            self.cpu_us.append(phase.server_cpu / max(phase.calls, 1) * 1e6)
            self.server_cores.append(phase.server_cpu / phase.elapsed)
        self.client_cores.append(phase.client_cpu / phase.elapsed)

    def percentile_ms(self, fraction: float) -> float:
        """Nearest-rank latency percentile in milliseconds."""
        return percentile_ms(self.latencies, fraction)


def failures_of(rows: Iterable[Rounds]) -> tuple[int, str | None]:
    """(how many calls failed, the first failure) over `rows`."""
    rows = list(rows)
    first = next((row.first_failure for row in rows if row.first_failure), None)
    return sum(row.failures for row in rows), first


async def _drive(worker: Worker, until: float, latencies: list[float], failures: list[str]) -> None:
    """Call until `until`, at least once."""
    clock = time.perf_counter
    while True:
        await worker.next()
        start = clock()
        problem = await worker.call()
        end = clock()
        latencies.append(end - start)
        if problem is not None:
            failures.append(problem)
        if end >= until:
            return


async def measure(
    workers: Sequence[Worker], server_cpu: Callable[[], float | None], seconds: float
) -> Phase:
    """Run every worker until `seconds` have passed; each finishes the call it is in.

    `server_cpu` reads the server's CPU seconds so far (None where it cannot).
    """
    per_worker: list[list[float]] = [[] for _ in workers]
    failures: list[str] = []
    server_before, client_before = server_cpu(), time.process_time()
    start = time.perf_counter()
    until = start + seconds
    await asyncio.gather(
        *(_drive(w, until, s, failures) for w, s in zip(workers, per_worker, strict=True))
    )
    elapsed = time.perf_counter() - start
    server_after, client_after = server_cpu(), time.process_time()
    latencies = [sample for samples in per_worker for sample in samples]
    used = None if server_before is None or server_after is None else server_after - server_before
    return Phase(len(latencies), elapsed, latencies, failures, used, client_after - client_before)


async def warm_and_measure(
    workers: Sequence[Worker],
    server_cpu: Callable[[], float | None],
    *,
    warmup: float,
    seconds: float,
) -> Phase:
    """Warm up for `warmup` seconds, prepare every worker for the expected calls outside
    the measurement, then measure `seconds`; the warm-up phase when it failed."""
    warm = await measure(workers, server_cpu, warmup)
    if warm.failures:
        return warm
    expected = warm.calls / warm.elapsed * seconds / max(len(workers), 1)
    await asyncio.gather(*(w.prepare(math.ceil(expected * 1.5) + 10) for w in workers))
    return await measure(workers, server_cpu, seconds)


def percentile_ms(latencies: Sequence[float], fraction: float) -> float:
    """Nearest-rank latency percentile in milliseconds."""
    ordered = sorted(latencies)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)] * 1e3
