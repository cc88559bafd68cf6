"""What a command loads when it starts: the MCP SDK and psycopg, which take most of a
second together, only once a definition or a store needs them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.cli.fixtures.serving import REPO, base_env

LOADED = "print(sorted(name for name in ('mcp', 'psycopg') if name in sys.modules))"


def loaded_after(script: str) -> str:
    """The heavy packages loaded in a new process after `script` ran, as a printed list."""
    program = f"import sys\n{textwrap.dedent(script)}\n{LOADED}\n"
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def test_serving_sqlite_without_server_tools_loads_neither() -> None:
    script = """
        import asyncio, tempfile
        from pathlib import Path
        from agentskit_chat.cli import main
        from agentskit_chat.cli._server_tools import ServedTools
        from agentskit_chat.conversation import load_definitions
        from agentskit_chat.mcp import NO_TOOL_OBSERVER
        from agentskit_chat.storage import open_store

        async def start() -> None:
            served = ServedTools(NO_TOOL_OBSERVER)
            assert await served.start(load_definitions(Path("examples/definitions")).values())
            path = Path(tempfile.mkdtemp()) / "chat.db"
            await (await open_store(f"sqlite:{path}")).close()

        asyncio.run(start())
    """
    assert loaded_after(script) == "[]"


def test_each_is_loaded_by_the_first_use_of_what_needs_it() -> None:
    assert loaded_after("from agentskit_chat.mcp import ServerTools") == "['mcp']"
    assert loaded_after("from agentskit_chat.storage import PostgresqlStore") == "['psycopg']"
    assert loaded_after("import agentskit_chat.storage as s; s.open_postgresql_store") == (
        "['psycopg']"
    )
