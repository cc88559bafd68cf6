"""The LangGraph side's load, run with the LangGraph environment's python
(build/langgraph-env): the official `langgraph_sdk` client against a running LangGraph
server, driven by bench/server_peer.py over stdin and stdout.

Usage: `python driver.py URL`. Each line read is a JSON request
`{"conversations": N, "clients": C}`: N conversations of the support example (a new thread,
then two turns, each one `runs.wait` timed from the call to its result), run by C
concurrent clients. Each answer is one JSON line: `{"latencies": [seconds per turn],
"wall": seconds for the whole batch, "failures": [what went wrong]}`. The script ends at
the end of its input.

It imports nothing from the project, so that the project's environment and the server's
need not agree on any pin.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from langgraph_sdk import get_client

ASSISTANT = "support"
"""The graph's id in langgraph.json (the server makes it an assistant of the same id)."""
CONVERSATION = (("/start", "What is your name?"), ("/name Ada", "Welcome, Ada."))


async def conversation(client: Any, latencies: list[float]) -> str | None:
    """One conversation on a new thread (created untimed), each turn timed."""
    thread = await client.threads.create()
    clock = time.perf_counter
    for text, expected in CONVERSATION:
        start = clock()
        out = await client.runs.wait(thread["thread_id"], ASSISTANT, input={"input": text})
        latencies.append(clock() - start)
        answer = out.get("answer") if isinstance(out, dict) else None
        if answer != expected:
            return f"langgraph: unexpected answer {answer!r}"
    return None


async def batch(clients: list[Any], conversations: int) -> dict[str, Any]:
    """`conversations` conversations shared among the clients, each client one at a time."""
    latencies: list[float] = []
    failures: list[str] = []
    remaining = [conversations]

    async def worker(client: Any) -> None:
        while remaining[0] > 0:
            remaining[0] -= 1
            try:
                problem = await conversation(client, latencies)
            except Exception as error:
                problem = f"langgraph: {type(error).__name__}: {error}"
            if problem is not None:
                failures.append(problem)

    start = time.perf_counter()
    await asyncio.gather(*(worker(client) for client in clients))
    return {"latencies": latencies, "wall": time.perf_counter() - start, "failures": failures}


async def main(url: str) -> None:
    pool: list[Any] = []
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        request = json.loads(line)
        while len(pool) < request["clients"]:
            pool.append(get_client(url=url, timeout=60))
        result = await batch(pool[: request["clients"]], request["conversations"])
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
