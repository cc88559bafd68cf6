"""The deterministic gRPC turn in user-space instructions, counted by valgrind's callgrind:
figures a busy machine does not change, as it changes CPU time.

`python -m bench.instructions [--turns N] [--quick] [--json PATH]` runs each side under
`valgrind --tool=callgrind` with counting off, warms it up, and counts only while its
measured calls run:

- the bare grpc.aio echo of a turn's four messages (bench/_echo.py), per call;
- `serve` over gRPC, one client, per `/ping` turn, on SQLite and on the memory store;
- `ChatService.run_turn` in this repository's process, per turn, on the same stores (the
  turns bench/floor.py times).

The rest is `serve`'s count beyond the echo's and the in-process turn's: the code the gRPC
front adds to a turn (its interceptors, the stall watch, the events' conversion, the turn's
log line, the per-call context). System calls are not counted: under valgrind a side runs
some 50 times slower, and the pollers of gRPC and asyncio wake more often for the same
work. bench/floor.py measures the same three parts in CPU time; its rest is
larger than this one at the in-process turn's instructions per microsecond, and the
difference is not code: it is the same code running slower in a server that waits between
turns than in a loop that runs them back to back.

Needs valgrind (Debian's `valgrind`, which `make bench` installs when absent).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import grpc

from . import _cli
from ._echo import PATH as ECHO_PATH
from ._servers import ROOT, bench_env, running
from ._turns import DEFINITIONS, ChatWorker
from .floor import STORES, ping_chat, run_turns

START_SECONDS: Final = 600.0
"""How long a side may take to start under valgrind (it runs some 50 times slower)."""
TURNS: Final = 200
QUICK_TURNS: Final = 20
WARM_TURNS: Final = 60
READY: Final = "ready"
DONE: Final = "done"


@dataclass(frozen=True, slots=True)
class Count:
    """User-space instructions per call of one side."""

    instructions: float


def valgrind() -> str | None:
    """valgrind's path, when both it and callgrind_control are installed."""
    found = shutil.which("valgrind")
    return found if found is not None and shutil.which("callgrind_control") else None


def callgrind(out: Path, argv: Sequence[str]) -> list[str]:
    """`argv` under callgrind, counting off until `control` turns it on; its counts go to
    files in `out`."""
    tool = valgrind()
    if tool is None:
        raise RuntimeError("valgrind and callgrind_control are needed: apt-get install valgrind")
    return [
        tool,
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}/callgrind.%p",
        *argv,
    ]


async def control(pid: int, *options: str) -> None:
    """Run `callgrind_control OPTIONS PID`; RuntimeError when it fails."""
    process = await asyncio.create_subprocess_exec(
        "callgrind_control",
        *options,
        str(pid),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, errors = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"callgrind_control {' '.join(options)}: {errors.decode()[-300:]}")


def totals(out: Path) -> int:
    """The instructions counted in the callgrind files in `out`, summed: each file's
    `events:` line names its columns, its `totals:` line holds them."""
    instructions = 0
    for path in sorted(out.glob("callgrind.*")):
        names: list[str] = []
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("totals:"):
                values = dict(zip(names, (int(v) for v in line.split()[1:]), strict=False))
                instructions += values.get("Ir", 0)
                break
    return instructions


class _Counting:
    """Turns callgrind's counting on and off in one process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    async def on(self) -> None:
        await control(self.pid, "--instr=on")

    async def off(self) -> None:
        await control(self.pid, "--instr=off")
        await control(self.pid, "--dump")


async def count_echo(turns: int, scratch: Path) -> Count:
    """The echo server's count per call."""
    argv = [sys.executable, "-m", "bench._echo"]
    out = _fresh(scratch / "echo")
    started = running(
        "echo", callgrind(out, argv), cwd=ROOT, env=bench_env(), start_timeout=START_SECONDS
    )
    async with started as server:
        counting = _Counting(server.pid)
        async with grpc.aio.insecure_channel(server.address) as channel:
            call: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(ECHO_PATH)
            for _ in range(WARM_TURNS):
                _ = [reply async for reply in call(b"/ping")]
            await counting.on()
            for _ in range(turns):
                _ = [reply async for reply in call(b"/ping")]
            await counting.off()
    return _per_call(out, turns)


async def count_serve(store_name: str, turns: int, scratch: Path) -> Count:
    """`serve`'s count per `/ping` turn over gRPC, on `store_name`."""
    state = _fresh(scratch / f"serve-{store_name}-state")
    store = "memory://" if store_name == "memory" else f"sqlite:{state / 'sessions.db'}"
    argv = [sys.executable, "-m", "agentskit_chat.cli", "serve", "--listen", "127.0.0.1:0"]
    argv += ["--definitions", str(DEFINITIONS), "--drain-delay", "0", "--store", store]
    argv += ["--state-dir", str(state)]
    out = _fresh(scratch / f"serve-{store_name}")
    started = running(
        "serve", callgrind(out, argv), cwd=ROOT, env=bench_env(), start_timeout=START_SECONDS
    )
    async with started as server:
        counting = _Counting(server.pid)
        async with grpc.aio.insecure_channel(server.address) as channel:
            worker = ChatWorker(channel, "counted")
            await worker.prepare(WARM_TURNS + turns)
            await _calls(worker, WARM_TURNS)
            await counting.on()
            await _calls(worker, turns)
            await counting.off()
    return _per_call(out, turns)


async def _calls(worker: ChatWorker, turns: int) -> None:
    for _ in range(turns):
        await worker.next()
        failure = await worker.call()
        if failure is not None:
            raise RuntimeError(f"a turn failed: {failure}")


async def count_in_process(store_name: str, turns: int, scratch: Path) -> Count:
    """The in-process turn's count per turn on `store_name`: a child process of this module
    (`--child`) warms up, says READY, runs `turns` turns when told, says DONE."""
    out = _fresh(scratch / f"in-process-{store_name}")
    argv = [sys.executable, "-m", "bench.instructions", "--child", store_name]
    argv += ["--turns", str(turns), "--scratch", str(_fresh(scratch / f"child-{store_name}"))]
    process = await asyncio.create_subprocess_exec(
        *callgrind(out, argv),
        cwd=ROOT,
        env=bench_env(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdin, stdout = process.stdin, process.stdout
    if stdin is None or stdout is None:
        raise RuntimeError("no pipes to the in-process child")
    counting = _Counting(process.pid)
    try:
        async with asyncio.timeout(START_SECONDS):
            await _expect(stdout, READY)
            await counting.on()
            stdin.write(b"go\n")
            await stdin.drain()
            await _expect(stdout, DONE)
            await counting.off()
            stdin.write(b"end\n")
            await stdin.drain()
            _, errors = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"the in-process child failed: {errors.decode()[-500:]}")
    return _per_call(out, turns)


async def _expect(stdout: asyncio.StreamReader, word: str) -> None:
    while line := await stdout.readline():
        if line.decode().strip() == word:
            return
    raise RuntimeError(f"the in-process child ended before saying {word!r}")


async def child(store_name: str, turns: int, scratch: Path) -> None:
    """The counted side of `count_in_process`: warm up, then run `turns` turns between two
    lines of stdin."""
    chat, store, sessions = await ping_chat(store_name, scratch / "sessions.db", turns)
    await run_turns(chat, sessions[-1:], WARM_TURNS, "warm")
    loop = asyncio.get_running_loop()
    print(READY, flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    await run_turns(chat, sessions[:-1], turns, "counted")
    print(DONE, flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)
    await chat.close()
    await store.close()


def _fresh(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _per_call(out: Path, calls: int) -> Count:
    instructions = totals(out)
    if instructions == 0:
        raise RuntimeError(f"callgrind counted nothing in {out}")
    return Count(instructions / calls)


async def measure(turns: int) -> dict[str, Any]:
    """Every side's count, one after another (each alone on the machine's CPUs)."""
    with tempfile.TemporaryDirectory(prefix="chat-instructions-") as path:
        scratch = Path(path)
        echo = await count_echo(turns, scratch)
        stores: dict[str, Any] = {}
        for name in STORES:
            served = await count_serve(name, turns, scratch)
            in_process = await count_in_process(name, turns, scratch)
            stores[name] = {"serve": asdict(served), "in_process": asdict(in_process)}
    return {"turns": turns, "echo": asdict(echo), "stores": stores}


def report(data: dict[str, Any]) -> dict[str, Any]:
    """Print the counts and the rest; the figures with the rest added."""
    echo = data["echo"]
    print(f"\nUser-space instructions per deterministic gRPC turn ({data['turns']} counted)")
    print(f"  {'store':<8} {'serve':>11} {'echo':>11} {'in-process':>11} {'rest':>11}  rest share")
    for name, row in data["stores"].items():
        served, turn = row["serve"], row["in_process"]
        rest = served["instructions"] - echo["instructions"] - turn["instructions"]
        row["rest_instructions"] = rest
        row["rest_share"] = rest / served["instructions"]
        cells = (served["instructions"], echo["instructions"], turn["instructions"], rest)
        counts = " ".join(f"{value:>11,.0f}" for value in cells)
        print(f"  {name:<8} {counts}  {row['rest_share']:.1%}")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Count and print; 1 when valgrind is missing or a side failed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TURNS} turns a side")
    parser.add_argument("--turns", type=int, help=f"counted turns a side [{TURNS}]")
    parser.add_argument("--child", choices=STORES, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    _cli.add_output_options(parser, unpinned=None)
    args = parser.parse_args(argv)
    turns = args.turns or (QUICK_TURNS if args.quick else TURNS)
    if args.child is not None:
        asyncio.run(child(args.child, turns, args.scratch or Path(os.getcwd())))
        return 0
    if valgrind() is None:
        print("INVALID: valgrind and callgrind_control are needed (apt-get install valgrind)")
        return 1
    try:
        data = asyncio.run(measure(turns))
    except RuntimeError as exc:
        print(f"INVALID: {exc}")
        return 1
    return _cli.finish(report(data), args.json, 0, None, "sides")


if __name__ == "__main__":
    raise SystemExit(main())
