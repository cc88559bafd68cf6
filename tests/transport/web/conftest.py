"""A live server with its HTTP listener, and an httpx client pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from agentskit_chat.transport.web import HttpSettings
from agentskit_chat.transport.web.boundary.screen import DRAIN_SECONDS
from tests.transport.conftest import Live, live


@dataclass
class WebLive:
    """A started server (gRPC and HTTP) and an HTTP client for its listener."""

    env: Live
    http: httpx.AsyncClient

    @property
    def url(self) -> str:
        assert self.env.server.http is not None
        return f"http://127.0.0.1:{self.env.server.http.port}"


@asynccontextmanager
async def web_live(
    tmp_path: Path,
    *,
    cors: frozenset[str] = frozenset(),
    web_root: Path | None = None,
    http2: bool = False,
    drain_seconds: float = DRAIN_SECONDS,
    **options: Any,
) -> AsyncIterator[WebLive]:
    """`live` with `--http-listen 127.0.0.1:0`; `http2` speaks h2c with prior knowledge."""
    root = None if web_root is None else str(web_root)
    settings = HttpSettings("127.0.0.1:0", cors, root, drain_seconds)
    async with live(tmp_path, http=settings, **options) as env:
        assert env.server.http is not None
        base = f"http://127.0.0.1:{env.server.http.port}"
        async with httpx.AsyncClient(
            base_url=base, http1=not http2, http2=http2, timeout=30
        ) as http:
            yield WebLive(env, http)


def draining(http: httpx.AsyncClient) -> Callable[[], Awaitable[bool]]:
    """Whether the listener's /healthz answers 503 (the server drains): to wait on."""

    async def answers_503() -> bool:
        return (await http.get("/healthz")).status_code == 503

    return answers_503
