"""deploy/nginx/nginx.conf run by Debian's nginx in front of three `serve` replicas on one
PostgreSQL database (tests/deploy/nginx.py renders it with the test's ports)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentskit_chat.fakemodel import FakeModelServer
from agentskit_chat_client import ChatClient, Submit, TurnCompleted
from tests.cli.fixtures.serving import collect, terminal
from tests.deploy.nginx import TURN_HEADER, Nginx
from tests.deploy.replicas import (
    DEFINITION,
    Replicas,
    Store,
    migrate,
    slow_reply,
    write_definitions,
)
from tests.postgres import Cluster

REPLICAS = 3


@pytest.fixture
def store(postgres: Cluster, tmp_path: Path) -> Iterator[Store]:
    name = f"proxy_{secrets.token_hex(4)}"
    url = postgres.create_database(name)
    password_file = tmp_path / "store-password"
    password_file.write_text(postgres.password + "\n")
    password_file.chmod(0o600)
    try:
        yield migrate(url, password_file)
    finally:
        postgres.drop_database(name)


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer(default=slow_reply(4, 0.0)) as server:
        yield server


def test_the_shipped_configuration_is_valid_nginx(tmp_path: Path) -> None:
    proxy = Nginx(tmp_path / "nginx", ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"])
    checked = proxy.check()
    assert checked.returncode == 0, checked.stderr


def test_calls_through_nginx_go_round_robin_to_every_replica(
    store: Store, model: FakeModelServer, tmp_path: Path
) -> None:
    definitions = write_definitions(tmp_path / "definitions", model.url)
    replicas = Replicas(tmp_path / "replicas", store, definitions, REPLICAS)
    try:
        replicas.start_all()
        with Nginx(tmp_path / "nginx", replicas.addresses) as proxy:

            async def scenario() -> None:
                async with ChatClient(proxy.target, timeout=30) as client:
                    sid = (await client.create_session(DEFINITION)).session_id
                for n in range(REPLICAS * 2):
                    turn = f"t{n}"
                    headers = ((TURN_HEADER, turn),)
                    async with ChatClient(proxy.target, timeout=30, metadata=headers) as client:
                        events = await collect(client, sid, Submit(f"turn {n}"), turn_id=turn)
                        assert isinstance(terminal(events), TurnCompleted), events

            asyncio.run(scenario())
            turns = [call for call in proxy.calls() if call.method == "StreamTurn"]
            assert [call.turn for call in turns] == [f"t{n}" for n in range(REPLICAS * 2)]
            served = {call.upstreams[-1] for call in turns}
            assert served == set(replicas.addresses)
    finally:
        replicas.close()
