"""`serve --metrics-listen`: a real Prometheus scrapes a live server running real turns, and
every query of the Grafana dashboard returns data from it."""

from __future__ import annotations

import asyncio
import json
import math
import re
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit.chat.v1 import chat_pb2_grpc
from agentskit_chat.conversation import rollout_choice
from agentskit_chat.fakemodel import FakeModelServer, HttpResponse, Reply
from agentskit_chat_client import ChatClient, ChatError, Submit, TurnCompleted, TurnFailed
from tests.cli.conftest import Launcher
from tests.cli.fixtures.prometheus import Prometheus
from tests.cli.fixtures.serving import REPO, collect, terminal
from tests.cli.test_model_turns import write_assistant

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "agentskit-chat.json"
JOB = "agentskit-chat-test"
METRICS_AT = re.compile(r"agentskit-chat metrics at (http://127\.0\.0\.1:(\d+)/metrics)")
LOAD_SECONDS = 6.0
DATA_TIMEOUT = 30.0


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def dashboard_queries() -> tuple[list[str], list[str]]:
    """The panels' PromQL expressions and the template variables' label_values queries."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    panels = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    variables = [
        v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"
    ]
    return panels, variables


def concrete(expr: str) -> str:
    """A panel query as Grafana would send it, for this server and every definition."""
    return (
        expr.replace("$__rate_interval", "30s")
        .replace("$__range", "10m")
        .replace("$service", JOB)
        .replace("$definition", ".*")
    )


def has_data(samples: list[dict[str, object]]) -> bool:
    values = [float(sample["value"][1]) for sample in samples]  # type: ignore[index]
    return any(not math.isnan(value) for value in values)


async def lease_conflict(client: ChatClient, model: FakeModelServer, session: str) -> None:
    """A turn that finds the session's lease held by a turn still streaming."""
    model.enqueue(Reply(chunks=("held ", "then done"), pause_after=1))
    first = asyncio.create_task(collect(client, session, Submit("take your time")))
    deadline = time.monotonic() + 20
    while not model.requests or model.requests[-1].chunks_sent < 1:
        assert time.monotonic() < deadline, "the model was never called"
        await asyncio.sleep(0.02)
    with pytest.raises(ChatError) as refused:
        await collect(client, session, Submit("me too"))
    assert refused.value.reason == "ERROR_REASON_SESSION_BUSY"
    model.resume()
    assert isinstance(terminal(await first), TurnCompleted)


async def load(target: str, model: FakeModelServer) -> None:
    """Deterministic and model turns, model failures, lease conflicts and bad requests."""
    async with ChatClient(target, timeout=30) as client:
        session = (await client.create_session("assistant")).session_id
        await lease_conflict(client, model, session)
        until = time.monotonic() + LOAD_SECONDS
        while time.monotonic() < until:
            assert isinstance(
                terminal(await collect(client, session, Submit("/hello"))), TurnCompleted
            )
            assert isinstance(terminal(await collect(client, session, Submit("hi"))), TurnCompleted)
            model.enqueue(HttpResponse(400, '{"error": {"message": "no"}}'))
            failed = terminal(await collect(client, session, Submit("fail")))
            assert isinstance(failed, TurnFailed)
            with pytest.raises(ChatError):
                await client.get_session("s-missing-0000")
            await asyncio.sleep(0.2)
        await lease_conflict(client, model, session)


def write_revisions(directory: Path, base_url: str) -> Path:
    """The assistant chat at revisions 1 and 2, new sessions split half and half; the
    second declares a migration from the first. Beside it, the shop chat, whose routes
    call server tools of a real MCP server."""
    write_assistant(directory, base_url)
    write_shop(directory)
    first = directory / "assistant.yaml"
    text = first.read_text(encoding="utf-8")
    first.write_text(text.replace("revision: 1\n", "revision: 1\nrollout: 50\n"), "utf-8")
    second = text.replace("revision: 1\n", "revision: 2\nrollout: 50\nmigrations: [{from: 1}]\n")
    (directory / "assistant-2.yaml").write_text(second, encoding="utf-8")
    return directory


def write_shop(directory: Path) -> None:
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.mcp.servers.orders", "stdio"],
        "env": {"PYTHONPATH": str(REPO), "ORDERS_RECORD": str(directory / "record.jsonl")},
    }
    routes = [
        {
            "id": name,
            "command": f"/{name}",
            "event": "go",
            "tool": {"name": tool, "arguments": arguments},
            "response": "{result}",
        }
        for name, tool, arguments in (
            ("order", "lookup_order", {"order_id": "A-17"}),
            ("broken", "fail", {"reason": "on purpose"}),
        )
    ]
    chat = {
        "id": "shop",
        "revision": 1,
        "conversation": {
            "initial": "open",
            "states": {"open": {"on": {"go": "open"}}},
            "routes": routes,
        },
        "mcp_servers": {"orders": server},
        "tools": {"lookup_order": {"server": "orders"}, "fail": {"server": "orders"}},
    }
    (directory / "shop.json").write_text(json.dumps(chat), encoding="utf-8")


async def tool_load(target: str) -> None:
    """Server tool calls through the shop's routes, one that answers and one that fails,
    for a while (a rate needs calls in more than one scrape)."""
    async with ChatClient(target, timeout=30) as client:
        session = (await client.create_session("shop")).session_id
        until = time.monotonic() + LOAD_SECONDS
        while time.monotonic() < until:
            done = terminal(await collect(client, session, Submit("/order")))
            assert isinstance(done, TurnCompleted)
            failed = terminal(await collect(client, session, Submit("/broken")))
            assert isinstance(failed, TurnFailed)
            await asyncio.sleep(0.2)


def session_id_on(revision: int, prefix: str) -> str:
    """A session id the rollout gives `revision` (of the two weighted half and half)."""
    return next(
        name
        for index in range(1000)
        if rollout_choice(name := f"{prefix}-{index:04d}", [(1, 50), (2, 50)], 2) == revision
    )


async def revision_load(target: str) -> None:
    """Turns on each revision, and a session created on revision 1 whose id the rollout
    gives revision 2: its next turn migrates it."""
    async with ChatClient(target, timeout=30) as client:
        for revision in (1, 2):
            session = await client.create_session(
                "assistant", session_id=session_id_on(revision, "s-on")
            )
            for text in ("/hello", "hi"):
                done = terminal(await collect(client, session.session_id, Submit(text)))
                assert isinstance(done, TurnCompleted)
        moving = session_id_on(2, "s-moving")
        pinned = pb.CreateSessionRequest(
            definition_id="assistant", session_id=moving, definition_revision=1
        )
        await chat_pb2_grpc.ChatServiceStub(client.channel).CreateSession(pinned)
        moved = terminal(await collect(client, moving, Submit("/hello")))
        assert isinstance(moved, TurnCompleted)
        assert (await client.get_session(moving)).session.definition_revision == 2


def test_prometheus_scrapes_serve_and_every_dashboard_query_returns_data(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    definitions = write_revisions(tmp_path / "definitions", model.url)
    server = launch(
        tmp_path / "state", "--definitions", str(definitions), "--metrics-listen", "127.0.0.1:0"
    )
    server.wait_output("agentskit-chat metrics at ")
    found = METRICS_AT.search(server.stdout)
    assert found is not None, server.stdout
    with urllib.request.urlopen(found.group(1), timeout=10) as answer:  # scrapeable at once
        assert answer.status == 200
        assert "text/plain" in answer.headers["content-type"]
    with Prometheus(tmp_path / "prometheus", f"127.0.0.1:{found.group(2)}", JOB) as prometheus:
        deadline = time.monotonic() + DATA_TIMEOUT
        while not prometheus.scraped_up():
            assert time.monotonic() < deadline, prometheus.log()
            time.sleep(0.2)
        asyncio.run(load(server.target, model))
        asyncio.run(revision_load(server.target))  # after: load watches the model's last call
        asyncio.run(tool_load(server.target))
        panels, variables = dashboard_queries()
        assert len(panels) >= 16
        missing = list(panels)
        while missing:
            missing = [expr for expr in missing if not has_data(prometheus.query(concrete(expr)))]
            if missing and time.monotonic() > deadline + LOAD_SECONDS:
                raise AssertionError(f"no data for {missing}")
            time.sleep(0.5)
        assert JOB in prometheus.label_values("job", "agentskit_chat_turns_total")
        definitions_seen = prometheus.label_values(
            "agentskit_chat_definition_id", f'agentskit_chat_turns_total{{job=~"{JOB}"}}'
        )
        assert definitions_seen == ["assistant", "shop"]
        assert len(variables) == 2
        by_revision = (
            "sum by (agentskit_chat_definition_revision) "
            f'(agentskit_chat_turns_total{{job="{JOB}"}})'
        )
        while len(revisions := prometheus.query(by_revision)) < 2:
            assert time.monotonic() < deadline + 2 * LOAD_SECONDS, revisions
            time.sleep(0.5)  # the last turns are in a later scrape
        assert {s["metric"]["agentskit_chat_definition_revision"] for s in revisions} == {"1", "2"}
        moves = prometheus.query(f'agentskit_chat_migrations_total{{job="{JOB}"}}')
        assert [
            (
                s["metric"]["agentskit_chat_migration_from_revision"],
                s["metric"]["agentskit_chat_migration_to_revision"],
                s["metric"]["agentskit_chat_migration_outcome"],
                s["value"][1],
            )
            for s in moves
        ] == [("1", "2", "migrated", "1")]
        busy = (
            f'sum(agentskit_chat_turns_total{{job="{JOB}", '
            'agentskit_chat_error_code="SESSION_BUSY", agentskit_chat_outcome="rejected", '
            'agentskit_chat_definition_id="assistant"})'
        )
        while not has_data(counted := prometheus.query(busy)) or float(counted[0]["value"][1]) < 2:
            assert time.monotonic() < deadline + 2 * LOAD_SECONDS, counted
            time.sleep(0.5)  # the second conflict is in a later scrape
        assert float(counted[0]["value"][1]) == 2  # rejected turns keep their definition
        codes = prometheus.query(
            "sum by (rpc_response_status_code) "
            f'(rpc_server_call_duration_seconds_count{{job="{JOB}"}})'
        )
        assert {s["metric"]["rpc_response_status_code"] for s in codes} >= {
            "OK",
            "NOT_FOUND",
            "ABORTED",
        }
    server.send(signal.SIGTERM)
    assert server.wait() == 0


def test_a_malformed_or_taken_metrics_address_is_refused(launch: Launcher, tmp_path: Path) -> None:
    bad = launch(tmp_path / "a", "--metrics-listen", "nowhere", wait=False)
    assert bad.wait() == 2
    assert "--metrics-listen wants HOST:PORT" in bad.stderr
    first = launch(tmp_path / "b", "--metrics-listen", "127.0.0.1:0")
    first.wait_output("agentskit-chat metrics at ")
    found = METRICS_AT.search(first.stdout)
    assert found is not None
    taken = launch(tmp_path / "c", "--metrics-listen", f"127.0.0.1:{found.group(2)}", wait=False)
    assert taken.wait() == 2
    assert "cannot serve metrics" in taken.stderr
