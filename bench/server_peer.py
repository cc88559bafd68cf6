"""The service beside the LangGraph server: the same conversation through `serve` (gRPC, its
OpenAI front and AG-UI) and through the server a team would deploy instead, `langgraph dev`
(langgraph-api with its in-memory runtime), interleaved in one run.

The conversation is the support example's (`examples/definitions/support.yaml`): `/start`
answers "What is your name?" and moves idle -> collecting, `/name Ada` answers "Welcome,
Ada." and moves to complete. Each conversation is a new session (a new thread on the
LangGraph side), created untimed, then two turns, each timed from the call to its answer.

- The service: one `serve` on SQLite (`synchronous=normal`, its default) with an HTTP
  listener, driven from this process three ways, each its own side: `grpc`, the project's
  Python client (`agentskit_chat_client.ChatClient`, one per concurrent client); `openai`,
  its OpenAI front (`POST /v1/chat/completions`, not streamed, with the session header);
  `agui`, its AG-UI endpoint (`POST /agui/support`, read to RUN_FINISHED). The HTTP sides
  use httpx, one connection per client, and create their sessions over Connect.
- The peer: `langgraph dev --no-reload` on the project in bench/langgraph_server (the same
  support bot as a graph of one deterministic router node, as in bench/peer.py), run with
  the python of its own environment (build/langgraph-env, from
  bench/langgraph_server/requirements.txt: its pins clash with the project's), and driven by
  the official `langgraph_sdk` client (`threads.create`, then one `runs.wait` a turn) in a
  child process of that environment (bench/langgraph_server/driver.py), which this script
  sends batches to and reads timings from as JSON lines.

Both servers run on the last CPU, this process and the LangGraph driver on the others
(with two CPUs: one each). Every round measures each client count on every side, in an
order rotated from round to round; server CPU is read from /proc, for the LangGraph
server summed over its process and every descendant. Each figure's ratio is the LangGraph
server's over each service side's (throughput: the side's over LangGraph's), per round,
and the run reports the median over rounds.

Run with `make bench-peer-server`, which makes the LangGraph environment first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from agentskit_chat_client import ChatClient, Submit

from . import _cli, _connect
from ._servers import Server, bench_env, pinned, placed, running
from ._turns import ROOT
from .peer import CONVERSATION, DEFINITION_ID, serve_command
from .service import SERVICE_PATH

PROJECT: Final = ROOT / "bench" / "langgraph_server"
ENV: Final = ROOT / "build" / "langgraph-env"
START_TIMEOUT: Final = 90.0
SERVICE_SIDES: Final = ("grpc", "openai", "agui")
SIDES: Final = (*SERVICE_SIDES, "langgraph")


@dataclass(frozen=True, slots=True)
class Config:
    """Rounds, client counts, conversations per client count (1 client gets `single`, each
    other count `per_client` per client), warm-up conversations, pinning."""

    rounds: int
    clients: tuple[int, ...]
    single: int
    per_client: int
    warmup: int
    pin: bool = True

    def conversations(self, clients: int) -> int:
        """Conversations of a batch with `clients` concurrent clients."""
        return self.single if clients == 1 else clients * self.per_client


FULL = Config(rounds=3, clients=(1, 16, 64), single=10, per_client=6, warmup=4)
QUICK = Config(rounds=2, clients=(1, 16), single=4, per_client=3, warmup=2)


@dataclass(slots=True)
class Batch:
    """One side's figures at one client count, round by round."""

    latencies: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p95_ms: list[float] = field(default_factory=list)
    turns_per_s: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, latencies: list[float], wall: float, cpu: float | None) -> None:
        """Fold in one batch: its turn latencies, its wall time and its server CPU."""
        if not latencies:
            return
        self.latencies.extend(latencies)
        self.p50_ms.append(_percentile(latencies, 0.5) * 1e3)
        self.p95_ms.append(_percentile(latencies, 0.95) * 1e3)
        self.turns_per_s.append(len(latencies) / wall)
        if cpu is not None:
            self.cpu_ms.append(cpu / len(latencies) * 1e3)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def tree_cpu_seconds(root: int) -> float | None:
    """User plus system CPU of process `root` and all its descendants, alive now; None
    without Linux /proc."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parents[int(entry)] = int(fields[1])
        ticks[int(entry)] = int(fields[11]) + int(fields[12])
    if root not in ticks:
        return None
    total, frontier = 0, [root]
    while frontier:
        pid = frontier.pop()
        total += ticks.get(pid, 0)
        frontier.extend(child for child, parent in parents.items() if parent == pid)
    return total / os.sysconf("SC_CLK_TCK")


class Measure:
    """One side: run a batch of conversations with some concurrent clients."""

    name: str
    server_pid: int

    async def batch(self, clients: int, conversations: int) -> tuple[list[float], float, list[str]]:
        """(turn latencies, wall seconds, failures)."""
        raise NotImplementedError

    async def measured(
        self, clients: int, conversations: int
    ) -> tuple[list[float], float, list[str], float | None]:
        """A batch and the server CPU it took."""
        before = tree_cpu_seconds(self.server_pid)
        latencies, wall, failures = await self.batch(clients, conversations)
        after = tree_cpu_seconds(self.server_pid)
        cpu = None if before is None or after is None else after - before
        return latencies, wall, failures, cpu


class Service(Measure):
    """`serve` over gRPC through the project's client, one ChatClient per concurrent client."""

    name = "grpc"

    def __init__(self, server: Server, stack: AsyncExitStack) -> None:
        self.server, self.server_pid, self.stack = server, server.pid, stack
        self.pool: list[Any] = []

    async def open(self) -> Any:
        """One more concurrent client, closed with the stack."""
        return await self.stack.enter_async_context(ChatClient(self.server.address, timeout=60))

    async def conversation(self, client: Any, latencies: list[float]) -> str | None:
        """One conversation on a new session (created untimed), each turn timed."""
        session = await client.create_session(DEFINITION_ID)
        clock = time.perf_counter
        for text, expected in CONVERSATION:
            start = clock()
            result = await client.run_turn(session.session_id, Submit(text))
            latencies.append(clock() - start)
            content = result.completed.content if result.completed is not None else None
            if content != expected:
                return f"{self.name}: unexpected answer {content!r}"
        return None

    async def batch(self, clients: int, conversations: int) -> tuple[list[float], float, list[str]]:
        while len(self.pool) < clients:
            self.pool.append(await self.open())
        latencies: list[float] = []
        failures: list[str] = []
        remaining = [conversations]

        async def worker(client: Any) -> None:
            while remaining[0] > 0:
                remaining[0] -= 1
                try:
                    problem = await self.conversation(client, latencies)
                except Exception as error:
                    problem = f"{self.name}: {type(error).__name__}: {error}"
                if problem is not None:
                    failures.append(problem)

        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for client in self.pool[:clients]))
        return latencies, time.perf_counter() - start, failures


class OpenAIFront(Service):
    """`serve`'s OpenAI front: `POST /v1/chat/completions` (not streamed) with the session
    header, on a server-held session created over Connect; httpx, one connection each."""

    name = "openai"

    async def open(self) -> Any:
        return await _connect.own_client(self.stack, self.server.http_address)

    async def conversation(self, client: Any, latencies: list[float]) -> str | None:
        session = await _session(client)
        headers = {"X-AgentsKit-Session": session}
        clock = time.perf_counter
        for text, expected in CONVERSATION:
            body = {"model": DEFINITION_ID, "messages": [{"role": "user", "content": text}]}
            start = clock()
            reply = await client.post("/v1/chat/completions", json=body, headers=headers)
            latencies.append(clock() - start)
            if reply.status_code != 200:
                return f"openai: HTTP {reply.status_code} {reply.text[:200]}"
            answer = reply.json()["choices"][0]["message"]["content"]
            if answer != expected:
                return f"openai: unexpected answer {answer!r}"
        return None


class AgUi(Service):
    """`serve`'s AG-UI endpoint: `POST /agui/support`, a run whose last message is the new
    input on a server-held thread (created over Connect), its SSE read to RUN_FINISHED."""

    name = "agui"

    async def open(self) -> Any:
        return await _connect.own_client(self.stack, self.server.http_address)

    async def conversation(self, client: Any, latencies: list[float]) -> str | None:
        session = await _session(client)
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        clock = time.perf_counter
        for number, (text, expected) in enumerate(CONVERSATION):
            body = {
                "threadId": session,
                "runId": f"{session}-{number}",
                "state": {},
                "messages": [{"id": f"m-{session}-{number}", "role": "user", "content": text}],
                "tools": [],
                "context": [],
                "forwardedProps": {},
            }
            types: list[str] = []
            pieces: list[str] = []
            start = clock()
            async with client.stream(
                "POST", f"/agui/{DEFINITION_ID}", json=body, headers=headers
            ) as response:
                if response.status_code != 200:
                    return f"agui: HTTP {response.status_code}"
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        event = json.loads(line[5:])
                        types.append(event["type"])
                        if event["type"] == "TEXT_MESSAGE_CONTENT":
                            pieces.append(event["delta"])
            latencies.append(clock() - start)
            if not types or types[-1] != "RUN_FINISHED":
                return f"agui: events {types}"
            if "".join(pieces) != expected:
                return f"agui: unexpected answer {''.join(pieces)!r}"
        return None


async def _session(client: httpx.AsyncClient) -> str:
    """A new session of the support definition, over Connect (untimed)."""
    reply = await _connect.unary(
        client, f"{SERVICE_PATH}/CreateSession", {"definitionId": DEFINITION_ID}
    )
    return str(reply["session"]["sessionId"])


class LangGraph(Measure):
    """The LangGraph server through the SDK driver, a child process of its environment."""

    name = "langgraph"

    def __init__(self, driver: asyncio.subprocess.Process, pid: int) -> None:
        self.driver, self.server_pid = driver, pid

    async def batch(self, clients: int, conversations: int) -> tuple[list[float], float, list[str]]:
        stdin, stdout = self.driver.stdin, self.driver.stdout
        if stdin is None or stdout is None:
            return [], 1.0, ["langgraph: no pipes to the driver"]
        stdin.write(
            json.dumps({"conversations": conversations, "clients": clients}).encode() + b"\n"
        )
        await stdin.drain()
        line = await stdout.readline()
        if not line:
            return [], 1.0, ["langgraph: the driver ended"]
        answer = json.loads(line)
        return answer["latencies"], answer["wall"], answer["failures"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def langgraph_server(cpus: set[int] | None, workdir: Path) -> AsyncIterator[tuple[int, str]]:
    """`langgraph dev` on the project in bench/langgraph_server, on `cpus`: (pid, URL).

    It runs on a copy of the project in `workdir` (langgraph.json's paths are taken from
    the working directory, and the in-memory runtime keeps its files in `.langgraph_api`
    there), its log discarded."""
    for name in ("langgraph.json", "support_graph.py"):
        shutil.copy(PROJECT / name, workdir / name)
    port = _free_port()
    argv = [str(ENV / "bin" / "langgraph"), "dev", "--no-browser", "--no-reload"]
    argv += ["--port", str(port), "--config", "langgraph.json"]
    env = {**bench_env(), "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}
    process = await asyncio.create_subprocess_exec(
        *(argv if cpus is None else pinned(argv, cpus)),
        cwd=workdir,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        async with httpx.AsyncClient() as http:
            while True:
                if process.returncode is not None:
                    raise RuntimeError(f"langgraph dev exited with status {process.returncode}")
                try:
                    if (await http.get(f"{url}/ok", timeout=2)).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("langgraph dev did not answer /ok in time")
                await asyncio.sleep(0.25)
        yield process.pid, url
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()


async def run(config: Config) -> tuple[dict[str, dict[int, Batch]], bool]:
    """Start both servers and the driver, then measure round by round."""
    figures = {side: {clients: Batch() for clients in config.clients} for side in SIDES}
    async with AsyncExitStack() as stack:
        state = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chat-server-peer-")))
        server_cpus, _ = placed(stack, config.pin)
        argv = [*serve_command(state, "normal"), "--http-listen", "127.0.0.1:0"]
        server = await stack.enter_async_context(
            running("serve", argv, cwd=ROOT, env=bench_env(), cpus=server_cpus)
        )
        (state / "langgraph").mkdir()
        pid, url = await stack.enter_async_context(
            langgraph_server(server_cpus, state / "langgraph")
        )
        driver = await asyncio.create_subprocess_exec(
            str(ENV / "bin" / "python"),
            str(PROJECT / "driver.py"),
            url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        stack.push_async_callback(_close_driver, driver)
        sides: dict[str, Measure] = {
            "grpc": Service(server, stack),
            "openai": OpenAIFront(server, stack),
            "agui": AgUi(server, stack),
            "langgraph": LangGraph(driver, pid),
        }
        for measure in sides.values():
            for clients in config.clients:
                await measure.batch(clients, max(config.warmup, clients))
        for number in range(config.rounds):
            order = SIDES[number % len(SIDES) :] + SIDES[: number % len(SIDES)]
            for clients in config.clients:
                for name in order:
                    conversations = config.conversations(clients)
                    latencies, wall, failures, cpu = await sides[name].measured(
                        clients, conversations
                    )
                    figures[name][clients].add(latencies, wall, cpu)
                    figures[name][clients].failures.extend(failures)
    return figures, server_cpus is not None


async def _close_driver(driver: asyncio.subprocess.Process) -> None:
    if driver.stdin is not None:
        driver.stdin.close()
    try:
        await asyncio.wait_for(driver.wait(), 20)
    except TimeoutError:
        driver.kill()
        await driver.wait()


def _ratio(theirs: list[float], mine: list[float]) -> list[float]:
    return [a / b for a, b in zip(theirs, mine, strict=False) if b]


def report(
    figures: dict[str, dict[int, Batch]], config: Config, *, quick: bool, pinned_: bool
) -> dict[str, Any]:
    """Print the table and the ratios; the figures as plain data."""
    where = "both servers on the last CPU, clients on the others" if pinned_ else "unpinned"
    one, five, _ = os.getloadavg()
    print(
        f"\nThe service beside the LangGraph server (langgraph dev, in-memory runtime): the"
        f" support conversation (2 turns), {config.rounds} rotated round(s)"
        f" ({os.cpu_count()} CPUs, {where}; load average {one:.2f}/{five:.2f} at the end;"
        f" Python {platform.python_version()})"
    )
    heads = ("turns", 6), ("p50 ms", 9), ("p95 ms", 9), ("turns/s", 9), ("CPU ms/turn", 12)
    print(f"  {'side':<10} {'clients':>7} " + " ".join(f"{head:>{width}}" for head, width in heads))
    data: dict[str, Any] = {"config": asdict(config), "pinned": pinned_, "sides": {}, "ratios": {}}
    for side, batches in figures.items():
        for clients, batch in batches.items():
            if not batch.latencies:
                continue
            cpu = statistics.median(batch.cpu_ms) if batch.cpu_ms else None
            row = {
                "turns": len(batch.latencies),
                "failures": len(batch.failures),
                "p50_ms": statistics.median(batch.p50_ms),
                "p95_ms": statistics.median(batch.p95_ms),
                "turns_per_s": statistics.median(batch.turns_per_s),
                "cpu_ms_per_turn": cpu,
            }
            data["sides"].setdefault(side, {})[clients] = row
            print(
                f"  {side:<10} {clients:>7} {row['turns']:>6}"
                f" {row['p50_ms']:>9.2f} {row['p95_ms']:>9.2f}"
                f" {row['turns_per_s']:>9.1f} {'-' if cpu is None else f'{cpu:.2f}':>12}"
            )
    print("  (medians over rounds; CPU: the server's, session/thread creation included, per turn)")
    for service in SERVICE_SIDES:
        for clients in config.clients:
            peer, mine = figures["langgraph"][clients], figures[service][clients]
            ratios = {
                "p50": _ratio(peer.p50_ms, mine.p50_ms),
                "p95": _ratio(peer.p95_ms, mine.p95_ms),
                "throughput": _ratio(mine.turns_per_s, peer.turns_per_s),
                "cpu": _ratio(peer.cpu_ms, mine.cpu_ms),
            }
            medians = {
                name: statistics.median(values) if values else None
                for name, values in ratios.items()
            }
            data["ratios"].setdefault(service, {})[clients] = medians
            shown = ", ".join(
                f"{name} {value:.1f}x" for name, value in medians.items() if value is not None
            )
            print(f"  LangGraph over {service:<6} at {clients:>2} client(s): {shown}")
    print("  (throughput: the service's over LangGraph's)")
    if quick:
        print("  (--quick: too few samples to trust)")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison and print it; 1 when any turn failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    _cli.add_run_options(parser, rounds=FULL.rounds, quick="two short rounds at 1 and 16 clients")
    parser.add_argument(
        "--clients",
        type=int,
        nargs="+",
        help=f"concurrent client counts [{' '.join(map(str, FULL.clients))}]",
    )
    _cli.add_output_options(parser)
    args = parser.parse_args(argv)
    if not (ENV / "bin" / "langgraph").exists():
        print(f"no LangGraph environment at {ENV}: run `make bench-peer-server`", file=sys.stderr)
        return 2
    base = QUICK if args.quick else FULL
    config = Config(
        rounds=args.rounds or base.rounds,
        clients=tuple(args.clients or base.clients),
        single=base.single,
        per_client=base.per_client,
        warmup=base.warmup,
        pin=not args.no_pin,
    )
    figures, pinned_ = asyncio.run(run(config))
    data = report(figures, config, quick=args.quick, pinned_=pinned_)
    failures = [
        problem
        for side in figures.values()
        for batch in side.values()
        for problem in batch.failures
    ]
    return _cli.finish(data, args.json, *_cli.first_of(failures), "conversations")


if __name__ == "__main__":
    raise SystemExit(main())
