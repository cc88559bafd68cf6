"""The README's examples run as written; client examples run against a live server."""

from __future__ import annotations

import asyncio
import inspect
import re
import secrets
from pathlib import Path
from typing import Any

from agentskit_chat.conversation import load_definitions
from agentskit_chat.service import Catalog, ChatService
from agentskit_chat.storage import MemoryStore
from agentskit_chat.transport import start_server

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


async def against_live_server(main: Any) -> None:
    definitions = load_definitions(ROOT / "examples" / "definitions").values()
    service = ChatService(Catalog(definitions), MemoryStore(), digest_key=secrets.token_bytes(32))
    server = await start_server(service, "127.0.0.1:0")
    try:
        await main(f"127.0.0.1:{server.port}")
    finally:
        await server.drain(1.0)


def test_readme_python_examples_run() -> None:
    found = blocks()
    assert len(found) >= 2, "README lost its python examples"
    ran_client = False
    for block in found:
        namespace: dict[str, Any] = {}
        exec(compile(block, str(README), "exec"), namespace)
        main = namespace.get("main")
        if inspect.iscoroutinefunction(main):
            asyncio.run(against_live_server(main))
            ran_client = True
    assert ran_client, "README has no client example"


def test_readme_names_the_entry_points() -> None:
    text = README.read_text(encoding="utf-8")
    for command in ("make serve", "make test", "make demo", "make bench"):
        assert command in text
