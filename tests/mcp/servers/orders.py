"""An MCP server the tests start: `python -m tests.mcp.servers.orders stdio|http`.

Tools: `lookup_order` answers a fixed text, `slow` blocks until `release` is called with
the same gate, `fail` raises, `count` appends a line (its key, the request's `_meta`, the
`traceparent` header and the process id) to the file named by ORDERS_RECORD,
`count_slow` appends such a line and then blocks as `slow` does, `big`
answers `size` characters and `die` ends the process in the middle of the call. While the
file named by ORDERS_REFUSE exists, the server exits at once instead of starting; each
start appends the process id to the file named by ORDERS_STARTS.

Over `http` it listens on an ephemeral loopback port, prints `port N` once it accepts
connections, and refuses a request without `Authorization: Bearer <ORDERS_TOKEN>`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

RECORD_ENV = "ORDERS_RECORD"
TOKEN_ENV = "ORDERS_TOKEN"
REFUSE_ENV = "ORDERS_REFUSE"
STARTS_ENV = "ORDERS_STARTS"

server = MCPServer("orders")
_gates: dict[str, asyncio.Event] = {}


def _gate(name: str) -> asyncio.Event:
    return _gates.setdefault(name, asyncio.Event())


@server.tool()
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"order {order_id}: 2 items, shipped"


@server.tool()
async def slow(gate: str) -> str:
    """Wait until `release` is called with the same gate."""
    await _gate(gate).wait()
    return f"released {gate}"


@server.tool()
def release(gate: str) -> str:
    """Let the `slow` calls waiting on `gate` finish."""
    _gate(gate).set()
    return f"released {gate}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"failed on purpose: {reason}")


@server.tool()
def count(key: str, ctx: Context) -> str:
    """Record one execution under `key`."""
    _record(key, ctx)
    return f"counted {key}"


@server.tool()
async def count_slow(key: str, gate: str, ctx: Context) -> str:
    """Record one execution under `key`, then wait until `release` is called with `gate`."""
    _record(key, ctx)
    await _gate(gate).wait()
    return f"counted {key}"


def _record(key: str, ctx: Context) -> None:
    meta = dict(ctx.request_context.meta or {})
    headers = ctx.headers or {}
    line = {
        "key": key,
        "meta": meta,
        "traceparent": headers.get("traceparent"),
        "pid": os.getpid(),
    }
    with open(os.environ[RECORD_ENV], "a", encoding="utf-8") as file:
        file.write(json.dumps(line) + "\n")


@server.tool()
def big(size: int) -> str:
    """Answer `size` characters."""
    return "x" * size


@server.tool()
def die() -> str:
    """End the server process while the call is in flight."""
    os._exit(3)


ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


def _bearer(app: ASGIApp, token: str) -> ASGIApp:
    expected = f"Bearer {token}".encode()

    async def guarded(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"bad token"})
            return
        await app(scope, receive, send)

    return guarded


async def _serve_http() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app = _bearer(server.streamable_http_app(), os.environ[TOKEN_ENV])
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    task = asyncio.create_task(web.serve(sockets=[sock]))
    while not web.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)  # uvicorn offers no startup event; polling its flag.
    print(f"port {sock.getsockname()[1]}", flush=True)
    await task


def main() -> None:
    starts = os.environ.get(STARTS_ENV)
    if starts:
        with open(starts, "a", encoding="utf-8") as file:
            file.write(f"{os.getpid()}\n")
    refuse = os.environ.get(REFUSE_ENV)
    if refuse and os.path.exists(refuse):
        sys.exit("orders: refusing to start while the refuse file exists")
    if sys.argv[1:] == ["stdio"]:
        server.run("stdio")
    elif sys.argv[1:] == ["http"]:
        asyncio.run(_serve_http())
    else:
        sys.exit("usage: python -m tests.mcp.servers.orders stdio|http")


if __name__ == "__main__":
    main()
