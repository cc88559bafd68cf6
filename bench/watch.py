"""Session watches: the server CPU a watcher adds to a turn, and how late a watcher served
by another process sees a turn's events.

`cpu`: one `serve` process on SQLite, driven from this process; blocks of turns run with
no watcher, with one WatchSession stream on the session (reading everything), and with one
on another session that stays idle, in turn, each block on a fresh session. Server CPU
(user + system, from /proc) per turn, the median block of each kind, for route turns
(`/ping`) and agentic turns (the offline model, two deltas).

`delay`: a turn streams from the fake model server (one chunk every `--chunk-delay` s);
its starter's stream is read on one process and a WatchSession on another: a worker of
`serve --workers 2` on SQLite (the watch's connection is chosen so that the other worker
serves it), and the other replica of two on PostgreSQL (skipped with `--no-postgresql`).
For each delta, the delay is the time the watcher received it minus the time the
starter's stream received it, both on this process's clock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.fakemodel import FakeModelServer, Reply

ROOT: Final = Path(__file__).resolve().parents[1]
DEFINITIONS: Final = Path(__file__).resolve().with_name("definitions")
OWN_CONNECTION: Final = (("grpc.use_local_subchannel_pool", 1),)
DIGEST_KEY: Final = "6a" * 32
MODES: Final = ("none", "watched", "idle")
"""No watcher; one watching the session of the turns; one watching another, idle session."""
KINDS: Final = {"route": "/ping", "agentic": "tell me something"}


@dataclass
class Serve:
    """A `serve` process whose JSON log lines are kept."""

    process: asyncio.subprocess.Process
    address: str = ""
    lines: list[str] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def turn_pids(self) -> list[int]:
        found = []
        for line in self.lines:
            if line.startswith("{"):
                record = json.loads(line)
                if record.get("event") == "turn":
                    found.append(int(record["pid"]))
        return found


@asynccontextmanager
async def serve(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[Serve]:
    argv = [sys.executable, "-m", "agentskit_chat.cli", "--log-level", "INFO", "serve"]
    argv += ["--listen", "127.0.0.1:0", "--log-format", "json", *args]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSKIT_CHAT_")}
    environment.update({"AGENTSKIT_CHAT_DRAIN_DELAY": "0", "PYTHONPATH": str(ROOT)})
    environment.update(env or {})
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=ROOT,
        env=environment,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    server = Serve(process)
    assert process.stdout is not None
    stdout = process.stdout

    async def read() -> None:
        while line := await stdout.readline():
            server.lines.append(line.decode(errors="replace").strip())

    reader = asyncio.ensure_future(read())
    try:
        async with asyncio.timeout(60):
            while not server.address:
                for line in server.lines:
                    if line.startswith("agentskit-chat listening on "):
                        server.address = line.split()[3]
                await asyncio.sleep(0.05)
        yield server
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()
        await reader


async def turn(stub: Any, session_id: str, text: str) -> list[tuple[float, int, str]]:
    """(received at, sequence, event kind) for each event of one turn."""
    request = pb.StreamTurnRequest(
        session_id=session_id, turn_id=secrets.token_hex(8), submit=pb.SubmitOperation(content=text)
    )
    got = []
    async for event in stub.StreamTurn(request, timeout=60):
        got.append((time.perf_counter(), event.sequence, event.WhichOneof("event")))
    return got


async def create(stub: Any, definition_id: str) -> str:
    request = pb.CreateSessionRequest(definition_id=definition_id)
    response = await stub.CreateSession(request, timeout=30)
    return str(response.session.session_id)


@asynccontextmanager
async def watching(stub: Any, session_id: str) -> AsyncIterator[dict[tuple[str, int], float]]:
    """A WatchSession stream read in the background: {(turn id, sequence): received at}."""
    seen: dict[tuple[str, int], float] = {}
    call = stub.WatchSession(pb.WatchSessionRequest(session_id=session_id))
    first = asyncio.Event()

    async def read() -> None:
        async for item in call:
            if item.WhichOneof("item") == "event":
                seen[(item.event.turn_id, item.event.sequence)] = time.perf_counter()
            first.set()

    reader = asyncio.ensure_future(read())
    await asyncio.wait_for(first.wait(), 30)
    try:
        yield seen
    finally:
        call.cancel()
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def cpu(turns: int, rounds: int) -> dict[str, Any]:
    """Server CPU per turn without and with one watcher of the session."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as state:
        async with (
            serve("--state-dir", state, "--definitions", str(DEFINITIONS)) as server,
            grpc.aio.insecure_channel(server.address) as channel,
        ):
            stub = chat_pb2_grpc.ChatServiceStub(channel)
            for kind, text in KINDS.items():
                blocks: dict[str, list[float]] = {mode: [] for mode in MODES}
                for n in range(rounds * len(MODES) + 1):
                    mode = MODES[(n - 1) % len(MODES)] if n else "warmup"
                    sid = await create(stub, "ping")
                    async with AsyncExitStack() as stack:
                        if mode == "watched":
                            await stack.enter_async_context(watching(stub, sid))
                        elif mode == "idle":
                            idle = await create(stub, "ping")
                            await stack.enter_async_context(watching(stub, idle))
                        before = server.cpu_seconds()
                        for _ in range(turns):
                            await turn(stub, sid, text)
                        spent = server.cpu_seconds() - before
                    if mode != "warmup":
                        blocks[mode].append(spent * 1000 / turns)
                medians = {mode: statistics.median(blocks[mode]) for mode in MODES}
                none = medians["none"]
                results[kind] = {
                    "cpu_ms_per_turn": {m: round(v, 3) for m, v in medians.items()},
                    "extra": {
                        m: f"{(v / none - 1) * 100:+.1f} %"
                        for m, v in medians.items()
                        if m != "none"
                    },
                    "blocks": {k: [round(v, 3) for v in vs] for k, vs in blocks.items()},
                }
    return results


def assistant(directory: Path, url: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "assistant.yaml").write_text(
        "id: assistant\nrevision: 1\n"
        f"model: {{adapter: openai, base_url: '{url}', model: fake-1}}\n"
        "conversation:\n  initial: open\n  states: {open: {on: {hello: open}}}\n"
        "  routes: [{id: hello, command: /hello, event: hello, response: Hi.}]\n",
        encoding="utf-8",
    )
    return directory


async def delays(
    runner: Any, watcher: Any, turns: int, model: FakeModelServer, chunks: int, pace: float
) -> dict[str, Any]:
    """Delay of each delta on the watcher after the starter's stream, over `turns` turns."""
    found: list[float] = []
    for _ in range(turns):
        model.enqueue(Reply(chunks=tuple(f"c{n} " for n in range(chunks)), delay=pace))
        sid = await create(runner, "assistant")
        async with watching(watcher, sid) as seen:
            request = pb.StreamTurnRequest(
                session_id=sid, turn_id="t", submit=pb.SubmitOperation(content="hello")
            )
            got = []
            async for event in runner.StreamTurn(request, timeout=60):
                got.append((time.perf_counter(), event.sequence, event.WhichOneof("event")))
            deadline = time.monotonic() + 30
            while ("t", got[-1][1]) not in seen and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        found += [seen[("t", seq)] - at for at, seq, kind in got if kind == "delta"]
    ms = sorted(d * 1000 for d in found)
    return {
        "deltas": len(ms),
        "median_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[int(len(ms) * 0.95) - 1], 1),
        "max_ms": round(ms[-1], 1),
    }


async def two_workers(server: Serve, count: int = 16) -> list[grpc.aio.Channel]:
    """Two channels that two different workers serve (a route turn on each tells)."""
    by_pid: dict[int, grpc.aio.Channel] = {}
    first = grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION)
    sid = await create(chat_pb2_grpc.ChatServiceStub(first), "assistant")
    for done in range(1, count + 1):
        channel = grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION)
        await turn(chat_pb2_grpc.ChatServiceStub(channel), sid, "/hello")
        async with asyncio.timeout(30):
            while len(server.turn_pids()) < done:
                await asyncio.sleep(0.02)
        pid = server.turn_pids()[done - 1]
        if pid in by_pid:
            await channel.close()
        else:
            by_pid[pid] = channel
        if len(by_pid) == 2:
            await first.close()
            return list(by_pid.values())
    raise RuntimeError("every connection went to one worker")


async def delay_workers(turns: int, chunks: int, pace: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as state, FakeModelServer() as model:
        definitions = assistant(Path(state) / "definitions", model.url)
        args = ("--state-dir", state, "--definitions", str(definitions), "--workers", "2")
        async with serve(*args) as server:
            runner, watcher = await two_workers(server)
            try:
                return await delays(
                    chat_pb2_grpc.ChatServiceStub(runner),
                    chat_pb2_grpc.ChatServiceStub(watcher),
                    turns,
                    model,
                    chunks,
                    pace,
                )
            finally:
                await runner.close()
                await watcher.close()


async def delay_replicas(turns: int, chunks: int, pace: float) -> dict[str, Any]:
    from ._postgres import cluster

    with cluster() as postgres, tempfile.TemporaryDirectory() as state, FakeModelServer() as model:
        url = postgres.create_database("watch_bench")
        password = Path(state) / "password"
        password.write_text(postgres.password + "\n")
        password.chmod(0o600)
        env = {"AGENTSKIT_CHAT_STORE_PASSWORD_FILE": str(password)}
        definitions = assistant(Path(state) / "definitions", model.url)
        common = ("--store", url, "--definitions", str(definitions), "--migrate")
        env["AGENTSKIT_CHAT_DIGEST_KEY"] = DIGEST_KEY
        async with (
            serve("--state-dir", f"{state}/a", *common, env=env) as first,
            serve("--state-dir", f"{state}/b", *common, env=env) as second,
            grpc.aio.insecure_channel(first.address) as runner,
            grpc.aio.insecure_channel(second.address) as watcher,
        ):
            return await delays(
                chat_pb2_grpc.ChatServiceStub(runner),
                chat_pb2_grpc.ChatServiceStub(watcher),
                turns,
                model,
                chunks,
                pace,
            )


async def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns per CPU block")
    parser.add_argument("--rounds", type=int, default=3, help="CPU blocks of each kind")
    parser.add_argument("--delay-turns", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-delay", type=float, default=0.05)
    parser.add_argument("--no-postgresql", action="store_true")
    parser.add_argument("--only", choices=("cpu", "delay"))
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    if args.only in (None, "cpu"):
        report["cpu"] = await cpu(args.turns, args.rounds)
    if args.only in (None, "delay"):
        shape = (args.delay_turns, args.chunks, args.chunk_delay)
        report["delay_sqlite_workers"] = await delay_workers(*shape)
        if not args.no_postgresql:
            report["delay_postgresql_replicas"] = await delay_replicas(*shape)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
