"""Settings from the standard OTEL_* variables: nothing exported unless an endpoint is set."""

from __future__ import annotations

import pytest

from agentskit_chat.telemetry import TelemetrySettings, configure_telemetry, settings_from_env

from .reports import REPORTS

ENDPOINT = "http://collector:4317"


def test_nothing_by_default() -> None:
    settings = settings_from_env({})
    assert settings == TelemetrySettings()
    assert not settings.enabled
    assert settings.service_name == "agentskit-chat"


def test_one_endpoint_turns_on_both_signals() -> None:
    settings = settings_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT})
    assert (settings.traces_endpoint, settings.metrics_endpoint) == (ENDPOINT, ENDPOINT)
    assert settings.traces
    assert settings.metrics


def test_per_signal_endpoints() -> None:
    settings = settings_from_env(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://tempo:4317",
        }
    )
    assert settings.traces_endpoint == "http://tempo:4317"
    assert settings.metrics_endpoint == ENDPOINT
    only_metrics = settings_from_env({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": ENDPOINT})
    assert only_metrics.metrics
    assert not only_metrics.traces


@pytest.mark.parametrize("value", ["none", "NONE", " none "])
def test_exporter_none_turns_a_signal_off(value: str) -> None:
    settings = settings_from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": value}
    )
    assert not settings.traces
    assert settings.metrics
    settings = settings_from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_METRICS_EXPORTER": value}
    )
    assert settings.traces
    assert not settings.metrics


def test_console_exporters_from_env_or_flag() -> None:
    from_env = settings_from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert from_env.console_traces
    assert not from_env.console_metrics
    assert from_env.traces_endpoint is None
    from_flag = settings_from_env({}, console=True)
    assert from_flag.console_traces
    assert from_flag.console_metrics
    both = settings_from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "otlp,console"}
    )
    assert both.traces_endpoint == ENDPOINT
    assert both.console_traces


def test_sdk_disabled_wins() -> None:
    settings = settings_from_env(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "TRUE"}, console=True
    )
    assert not settings.enabled
    telemetry = configure_telemetry(settings)
    assert not telemetry.enabled
    assert len(telemetry.server_interceptors()) == 1  # only carries the caller's trace id


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"OTEL_SERVICE_NAME": "chat-eu"}, "chat-eu"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "team=chat,service.name=chat%20eu"}, "chat eu"),
        (
            {"OTEL_SERVICE_NAME": "named", "OTEL_RESOURCE_ATTRIBUTES": "service.name=other"},
            "named",
        ),
        ({"OTEL_RESOURCE_ATTRIBUTES": "team=chat"}, "agentskit-chat"),
    ],
)
def test_service_name(env: dict[str, str], name: str) -> None:
    assert settings_from_env(env).service_name == name


def test_console_writes_spans_to_stderr_only(capsys: pytest.CaptureFixture[str]) -> None:
    telemetry = configure_telemetry(TelemetrySettings(console_traces=True))
    try:
        assert telemetry.enabled
        assert telemetry.meter_provider is None
        assert len(telemetry.server_interceptors()) == 1
        telemetry.observer.turn_finished(REPORTS["agentic"])
        assert telemetry.force_flush(timeout=10)
    finally:
        telemetry.shutdown()
    captured = capsys.readouterr()
    assert '"name": "chat.turn submit"' in captured.err
    assert '"name": "chat gpt-4o-mini"' in captured.err
    assert "chat.turn submit" not in captured.out
