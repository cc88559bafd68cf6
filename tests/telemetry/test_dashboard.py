"""Every dashboard query names series and labels the observer really exports.

The exported set is not written down here: the observer runs over reports of every kind
into an in-memory reader, and its metrics are translated the way OTLP metrics reach
Prometheus (dots become underscores, a unit suffix such as `_seconds`, `_total` on
counters, `_bucket`/`_sum`/`_count` on histograms).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.sdk.metrics.export import AggregationTemporality, Histogram, Sum

from agentskit_chat.mcp import ToolCallReport
from agentskit_chat.service import MigrationReport
from agentskit_chat.telemetry import ToolTelemetry

from .conftest import InMemory
from .reports import REPORTS
from .test_grpc import SERVICE, Unary, serving

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "agentskit-chat.json"
OURS = re.compile(r"\b(?:agentskit|gen_ai|rpc_server)_\w+")
UNIT_SUFFIXES = {"s": "seconds", "ms": "milliseconds", "By": "bytes"}
CUMULATIVE = AggregationTemporality.CUMULATIVE
RESOURCE_LABELS = {"job", "instance"}
"""Prometheus derives these from service.name and service.instance.id."""


def prometheus_label(attribute: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", attribute)


def prometheus_series(name: str, unit: str, data: Any) -> set[str]:
    base = re.sub(r"[^A-Za-z0-9_:]", "_", name)
    suffix = UNIT_SUFFIXES.get(unit)  # annotations such as {turn} add no suffix
    if suffix and not base.endswith(f"_{suffix}"):
        base = f"{base}_{suffix}"
    if isinstance(data, Sum) and data.is_monotonic:
        return {f"{base}_total"}
    if isinstance(data, Histogram):
        return {f"{base}_bucket", f"{base}_sum", f"{base}_count"}
    return {base}


def exported(in_memory: InMemory) -> dict[str, set[str]]:
    """Prometheus series name -> label names, from what the observer and the gRPC
    interceptor record (one call that succeeds and one that is refused), with a session
    that migrated and one that stayed, and two server tool calls (one ending in an error)."""
    for report in REPORTS.values():
        in_memory.observer.turn_finished(report)
    for migration in (
        MigrationReport(2, 3, "migrated"),
        MigrationReport(2, 3, "stayed", "replay"),
    ):
        in_memory.observer.turn_finished(replace(REPORTS["deterministic"], migration=migration))

    async def calls(channel: grpc.aio.Channel) -> None:
        call: Unary = channel.unary_unary(f"/{SERVICE}/Fail")
        assert await call(b"OK") == b"fine"
        with pytest.raises(grpc.aio.AioRpcError):
            await call(b"NOT_FOUND")

    asyncio.run(serving(in_memory, calls))
    tools = ToolTelemetry(meter_provider=in_memory.meter_provider)
    for error_type in (None, "timeout"):
        called = ToolCallReport("lookup_order", "call-1", "orders", 0.25, error_type)
        tools.tool_started("lookup_order", "call-1").finish(called)
    data = in_memory.reader.get_metrics_data()
    assert data is not None
    series: dict[str, set[str]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                labels = {
                    prometheus_label(key)
                    for point in metric.data.data_points
                    for key in point.attributes or {}
                }
                for name in prometheus_series(metric.name, metric.unit or "", metric.data):
                    extra = {"le"} if name.endswith("_bucket") else set()
                    series.setdefault(name, set()).update(labels | extra | RESOURCE_LABELS)
    return series


def queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    found = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            found.append(query["query"] if isinstance(query, dict) else query)
    return found


def parse(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a PromQL expression (or label_values call) uses."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    variable = re.fullmatch(r"\s*label_values\(\s*(\w+)(?:\{([^}]*)\})?\s*,\s*(\w+)\s*\)\s*", expr)
    if variable:
        matched = set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", variable.group(2) or ""))
        return {variable.group(1)}, {variable.group(3)} | matched
    labels: set[str] = set()
    for body in re.findall(r"\{([^}]*)\}", expr):
        labels |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", body))
    for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        labels |= {label.strip() for label in group.split(",") if label.strip()}
    bare = re.sub(r"\b(?:by|without)\s*\([^)]*\)", " ", re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr))
    metrics = set(OURS.findall(bare))
    return metrics, labels


def test_every_query_uses_exported_series_and_labels(in_memory: InMemory) -> None:
    series = exported(in_memory)
    found = queries()
    assert len(found) >= 8
    for expr in found:
        metrics, labels = parse(expr)
        assert metrics, expr
        unknown = metrics - set(series)
        assert not unknown, f"{expr}: no exported series {unknown}; exported: {sorted(series)}"
        allowed = set().union(*(series[name] for name in metrics))
        assert labels <= allowed, f"{expr}: labels {labels - allowed} are not on {metrics}"
        ours = set(OURS.findall(re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)))
        assert ours <= metrics | labels, expr


def test_dashboard_covers_every_exported_metric(in_memory: InMemory) -> None:
    families = {re.sub(r"_(bucket|sum|count|total)$", "", name) for name in exported(in_memory)}
    used = {
        re.sub(r"_(bucket|sum|count|total)$", "", name)
        for expr in queries()
        for name in parse(expr)[0]
    }
    assert families == used


def test_expected_translation() -> None:
    """The translation rules, on the names the README documents."""
    assert prometheus_series("agentskit.chat.turns", "{turn}", Sum([], CUMULATIVE, True)) == {
        "agentskit_chat_turns_total"
    }
    assert prometheus_series("gen_ai.client.token.usage", "{token}", Histogram([], CUMULATIVE)) == {
        "gen_ai_client_token_usage_bucket",
        "gen_ai_client_token_usage_sum",
        "gen_ai_client_token_usage_count",
    }
    assert "agentskit_chat_turn_duration_seconds_bucket" in prometheus_series(
        "agentskit.chat.turn.duration", "s", Histogram([], CUMULATIVE)
    )


def test_queries_use_the_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    names = {variable["name"] for variable in dashboard["templating"]["list"]}
    assert names == {"datasource", "service", "definition"}
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {
        "Turns by kind",
        "Deterministic share",
        "Turn latency (p50, p95)",
        "Time to first chunk (p50, p95)",
        "Model tokens",
        "Lease conflicts",
        "RPC error rate",
        "Turns by revision and kind",
        "Agentic share by revision",
        "Failed turns by revision",
        "Migrations",
    } <= titles


def test_the_revision_panels_split_by_revision_and_the_migrations_panel_by_outcome() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = {panel["title"]: panel["targets"][0]["expr"] for panel in dashboard["panels"]}
    for title in ("Turns by revision and kind", "Agentic share by revision"):
        assert "agentskit_chat_definition_revision" in parse(exprs[title])[1], title
    assert "agentskit_chat_definition_revision" in parse(exprs["Failed turns by revision"])[1]
    metrics, labels = parse(exprs["Migrations"])
    assert metrics == {"agentskit_chat_migrations_total"}
    assert {
        "agentskit_chat_migration_from_revision",
        "agentskit_chat_migration_to_revision",
        "agentskit_chat_migration_outcome",
        "agentskit_chat_migration_code",
    } <= labels


def test_every_query_filters_by_service_and_by_definition_where_it_can(
    in_memory: InMemory,
) -> None:
    series = exported(in_memory)
    for expr in queries():
        if expr.startswith("label_values("):
            continue  # the variables' own queries list the values to choose from
        assert 'job=~"$service"' in expr, expr
        metrics, _ = parse(expr)
        if any("agentskit_chat_definition_id" in series[name] for name in metrics):
            assert "agentskit_chat_definition_id" in expr, (
                f"{expr}: its metric carries the definition, the query ignores it"
            )
        for selector in re.findall(r"\b(\w+)\{([^}]*)\}", expr):
            name, body = selector
            if "agentskit_chat_definition_id" in series.get(name, set()):
                assert '=~"$definition"' in body, f"{expr}: {name} ignores the definition"
