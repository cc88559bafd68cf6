"""`serve` and `migrate`: PostgreSQL schema versions, the password in no output; SQLite."""

from __future__ import annotations

import asyncio
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentskit_chat.storage.postgresql import SCHEMA_VERSION
from agentskit_chat_client import ChatClient, Submit, TurnCompleted
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import collect, run_cli, terminal
from tests.postgres import Cluster

DIGEST_KEY = "6a" * 32


@pytest.fixture
def empty_database(postgres: Cluster) -> Iterator[str]:
    name = f"cli_{secrets.token_hex(4)}"
    url = postgres.create_database(name)
    try:
        yield url
    finally:
        postgres.drop_database(name)


def with_password(url: str, password: str) -> str:
    return url.replace("agentskit@", f"agentskit:{password}@", 1)


def test_serve_refuses_an_unmigrated_database_and_migrate_fixes_it(
    launch: Launcher, postgres: Cluster, empty_database: str, tmp_path: Path
) -> None:
    env = {
        "AGENTSKIT_CHAT_STORE_PASSWORD": postgres.password,
        "AGENTSKIT_CHAT_DIGEST_KEY": DIGEST_KEY,
    }
    refused = launch(tmp_path / "state", "--store", empty_database, env=env, wait=False)
    assert refused.wait() == 1
    assert "no schema; run `agentskit-chat migrate`" in refused.stderr

    password_file = tmp_path / "password"
    password_file.write_text(postgres.password + "\n")
    flags = ("--store", empty_database, "--store-password-file", str(password_file))
    first = run_cli("migrate", *flags)
    assert first.returncode == 0, first.stderr
    assert f"migrated from schema version 0 to {SCHEMA_VERSION}" in first.stdout
    again = run_cli("migrate", *flags)
    assert again.returncode == 0, again.stderr
    assert f"is at schema version {SCHEMA_VERSION}; nothing to do" in again.stdout

    server = launch(tmp_path / "state", "--store", empty_database, env=env)
    server.send(signal.SIGTERM)
    assert server.wait() == 0


def test_serve_migrate_flag_applies_the_schema_at_start(
    launch: Launcher, postgres: Cluster, empty_database: str, tmp_path: Path
) -> None:
    env = {
        "AGENTSKIT_CHAT_STORE": empty_database,
        "AGENTSKIT_CHAT_STORE_PASSWORD": postgres.password,
        "AGENTSKIT_CHAT_DIGEST_KEY": DIGEST_KEY,
    }
    server = launch(tmp_path / "state", "--migrate", env=env)
    assert f"store {empty_database}," in server.stdout
    server.send(signal.SIGTERM)
    assert server.wait() == 0


def test_the_password_appears_in_no_output(
    launch: Launcher, postgres: Cluster, empty_database: str, tmp_path: Path
) -> None:
    url = with_password(empty_database, postgres.password)
    key = {"AGENTSKIT_CHAT_DIGEST_KEY": DIGEST_KEY}
    server = launch(tmp_path / "state", "--store", url, "--migrate", env=key, log_level="DEBUG")

    async def turn() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("support")
            done = terminal(await collect(client, session.session_id, Submit("/start")))
            assert isinstance(done, TurnCompleted), done

    asyncio.run(turn())
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    assert "agentskit:***@127.0.0.1" in server.stdout
    wrong = launch(
        tmp_path / "state",
        "--store",
        with_password(empty_database, "hunter2-wrong"),
        env=key,
        wait=False,
    )
    assert wrong.wait() == 1
    assert "password authentication failed" in wrong.stderr
    bad_file = run_cli(
        "migrate", "--store", empty_database, "--store-password-file", str(tmp_path / "missing")
    )
    assert bad_file.returncode == 2
    assert "cannot read the store password file" in bad_file.stderr
    for output in (server.stdout, server.stderr, wrong.stdout, wrong.stderr):
        assert postgres.password not in output
        assert "hunter2" not in output


def test_migrate_on_sqlite_creates_the_schema_and_on_memory_has_nothing_to_do(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    done = run_cli("migrate", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert "at the current schema version" in done.stdout
    assert (state / "sessions.db").is_file()
    memory = run_cli("migrate", "--store", "memory://")
    assert memory.returncode == 0, memory.stderr
    refused = run_cli("migrate", "--store", "mysql://user:secret@db.example/chat")
    assert refused.returncode == 2
    assert "unsupported store URL" in refused.stderr
    assert "secret" not in refused.stderr


def test_serve_takes_the_sqlite_durability_from_a_flag_or_the_environment(
    launch: Launcher, tmp_path: Path
) -> None:
    server = launch(tmp_path / "full", "--sqlite-synchronous", "full")

    async def turn() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("support")
            done = terminal(await collect(client, session.session_id, Submit("/start")))
            assert isinstance(done, TurnCompleted), done

    asyncio.run(turn())
    server.send(signal.SIGTERM)
    assert server.wait() == 0
    assert f"store sqlite://{tmp_path / 'full' / 'sessions.db'} (synchronous full)," in (
        server.stdout
    )
    from_env = launch(tmp_path / "env", env={"AGENTSKIT_CHAT_SQLITE_SYNCHRONOUS": "full"})
    from_env.send(signal.SIGTERM)
    assert from_env.wait() == 0
    assert "(synchronous full)," in from_env.stdout
    default = launch(tmp_path / "default")
    default.send(signal.SIGTERM)
    assert default.wait() == 0
    assert "(synchronous normal)," in default.stdout
    refused = run_cli(
        "serve",
        "--state-dir",
        str(tmp_path / "bad"),
        env={"AGENTSKIT_CHAT_SQLITE_SYNCHRONOUS": "off"},
    )
    assert refused.returncode == 2
    assert "AGENTSKIT_CHAT_SQLITE_SYNCHRONOUS must be one of normal, full, not 'off'" in (
        refused.stderr
    )
    bad_flag = run_cli("serve", "--sqlite-synchronous", "off")
    assert bad_flag.returncode == 2
    assert "invalid choice: 'off'" in bad_flag.stderr
