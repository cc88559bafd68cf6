"""A live `serve` with its HTTP listener, the example definitions answered by the fake
model, and a token per tenant: what the OpenAI front's tests drive with the official SDKs."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from agentskit_chat.fakemodel import FakeModelServer
from agentskit_chat.transport import token_digest
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import EXAMPLES, REPO, Server

TOKEN = "openai-front-token-0123456789abcdef"
OTHER_TOKEN = "openai-front-other-tenant-token-0123"
"""A token of another tenant, which may use `support` only, for two turns a minute."""
LIMITED_TOKEN = "openai-front-limited-token-0123456789"
"""A token of TOKEN's tenant which may use `support` only."""
HTTP_LISTENING = re.compile(r"agentskit-chat http listening on 127\.0\.0\.1:(\d+) ")


@dataclass
class OpenAILive:
    """The server, its `/v1` base URL and its state directory."""

    server: Server
    base_url: str
    state: Path

    def rows(self, table: str) -> int:
        """Rows of `table` in the server's SQLite store."""
        with sqlite3.connect(self.state / "sessions.db") as db:
            return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def tables(self) -> list[str]:
        """Every table of the server's SQLite store."""
        with sqlite3.connect(self.state / "sessions.db") as db:
            found = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return [str(name) for (name,) in found]


def definitions(into: Path, model: FakeModelServer) -> Path:
    """The example definitions with their model swapped for the fake model."""
    into.mkdir()
    for source in EXAMPLES.glob("*.yaml"):
        if source.name.endswith(".test.yaml"):
            continue
        text = source.read_text(encoding="utf-8").replace("$schema: ../../", f"$schema: {REPO}/")
        fake = f"model: {{adapter: openai, base_url: '{model.url}', model: fake-model}}"
        text, swapped = re.subn(r"^model: .*$", fake, text, flags=re.M)
        assert swapped == 1, source
        (into / source.name).write_text(text, encoding="utf-8")
    return into


def start(
    launch: Launcher, model: FakeModelServer, tmp_path: Path, *args: str, reuse: bool = False
) -> OpenAILive:
    """`serve --http-listen` over the example definitions, requiring TOKEN or OTHER_TOKEN;
    `reuse` serves the state (and definitions) of an earlier start in `tmp_path`."""
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        "tokens:\n"
        f"  - {{sha256: {token_digest(TOKEN)}, tenant: main}}\n"
        f"  - {{sha256: {token_digest(OTHER_TOKEN)}, tenant: other, definitions: [support], "
        "rates: {turns: 0.03, turns_burst: 2}}\n"
        f"  - {{sha256: {token_digest(LIMITED_TOKEN)}, tenant: main, definitions: [support]}}\n"
    )
    state = tmp_path / "state"
    server = launch(
        state,
        "--definitions",
        str(tmp_path / "definitions" if reuse else definitions(tmp_path / "definitions", model)),
        "--auth-tokens",
        str(tokens),
        "--http-listen",
        "127.0.0.1:0",
        *args,
        log_level="INFO",
    )
    found = HTTP_LISTENING.search(server.stdout)
    assert found is not None, server.stdout
    return OpenAILive(server, f"http://127.0.0.1:{found.group(1)}/v1", state)
