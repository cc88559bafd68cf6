"""`serve --metrics-listen`: a real Prometheus scrapes a live server running real turns, and
every query of the Grafana dashboard returns data from it."""

from __future__ import annotations

import asyncio
import json
import math
import re
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentskit_chat.fakemodel import FakeModelServer, HttpResponse, Reply
from agentskit_chat_client import ChatClient, ChatError, Submit, TurnCompleted, TurnFailed
from tests.cli.conftest import Launcher
from tests.cli.fixtures.prometheus import Prometheus
from tests.cli.fixtures.serving import collect, terminal
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


def test_prometheus_scrapes_serve_and_every_dashboard_query_returns_data(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    definitions = write_assistant(tmp_path / "definitions", model.url)
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
        panels, variables = dashboard_queries()
        assert len(panels) >= 12
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
        assert definitions_seen == ["assistant"]
        assert len(variables) == 2
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
