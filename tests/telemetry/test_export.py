"""Export over real OTLP/gRPC, and a collector that is down, failing or stalled hurts no turn."""

from __future__ import annotations

import logging
import socket

import pytest

from agentskit_chat.telemetry import (
    LogOnce,
    TelemetrySettings,
    configure_telemetry,
    settings_from_env,
)

from .receiver import OtlpReceiver
from .reports import REPORTS

EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.grpc.exporter"
QUIET = {"OTEL_BSP_SCHEDULE_DELAY": "60000", "OTEL_METRIC_EXPORT_INTERVAL": "60000"}
"""No background exports: the test decides when to flush."""


@pytest.fixture(autouse=True)
def _fresh_duplicate_filters() -> None:
    """The SDK drops a record equal to its logger's previous one (within 20 s), even when
    that one came from an earlier test; forget those."""
    for name in list(logging.root.manager.loggerDict):
        if not name.startswith("opentelemetry"):
            continue
        for log_filter in logging.getLogger(name).filters:
            if hasattr(log_filter, "last_log"):
                del log_filter.last_log


def use_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> TelemetrySettings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return settings_from_env()


def records(
    caplog: pytest.LogCaptureFixture, logger: str, template: str
) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and str(r.msg).startswith(template)]


def test_spans_and_metrics_reach_the_collector(
    otlp_receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = use_env(
        monkeypatch,
        otlp_receiver.env(**QUIET, OTEL_RESOURCE_ATTRIBUTES="deployment.environment.name=test"),
    )
    telemetry = configure_telemetry(settings)
    try:
        assert telemetry.enabled
        for report in REPORTS.values():
            telemetry.observer.turn_finished(report)
        assert telemetry.force_flush(timeout=10)
        model = otlp_receiver.wait_for_spans(lambda s: s.name == "chat gpt-4o-mini")[0]
        (turn,) = otlp_receiver.wait_for_spans(lambda s: s.span_id == model.parent_span_id)
        assert turn.name == "chat.turn submit"
        assert turn.attributes["agentskit.chat.kind"] == "agentic"
        assert model.trace_id == turn.trace_id
        assert model.kind == "CLIENT"
        assert model.attributes["gen_ai.response.finish_reasons"] == ["stop"]
        assert model.attributes["gen_ai.usage.input_tokens"] == 120
        assert turn.kind == "INTERNAL"
        assert turn.scope == "agentskit_chat"
        assert turn.resource["service.name"] == "agentskit-chat"
        assert turn.resource["deployment.environment.name"] == "test"
        failed = otlp_receiver.wait_for_spans(lambda s: s.status == "ERROR", count=2)
        assert {s.status_message for s in failed} == {"model_server_error"}
        (busy,) = otlp_receiver.wait_for_spans(
            lambda s: (
                s.name == "chat.turn retry"
                and s.attributes.get("agentskit.chat.outcome") == "rejected"
            )
        )
        assert busy.status != "ERROR"  # the caller's doing, not the server's
        assert busy.attributes["agentskit.chat.error.code"] == "SESSION_BUSY"
        otlp_receiver.wait_for_metric("agentskit.chat.turns")
        assert otlp_receiver.metric_names() == {
            "agentskit.chat.turns",
            "agentskit.chat.turn.duration",
            "agentskit.chat.turn.time_to_first_chunk",
            "gen_ai.client.operation.duration",
            "gen_ai.client.token.usage",
        }
        tokens = otlp_receiver.metric_points("gen_ai.client.token.usage")
        assert {p.attributes["gen_ai.token.type"]: p.value for p in tokens} == {
            "input": 120,
            "output": 45,
        }
        (counter,) = {p.kind for p in otlp_receiver.metric_points("agentskit.chat.turns")}
        assert counter == "sum"
    finally:
        telemetry.shutdown()


def test_service_name_from_the_environment(
    otlp_receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = use_env(monkeypatch, otlp_receiver.env(**QUIET, OTEL_SERVICE_NAME="chat-eu"))
    telemetry = configure_telemetry(settings)
    try:
        telemetry.observer.turn_finished(REPORTS["deterministic"])
        telemetry.force_flush(timeout=10)
        (span,) = otlp_receiver.wait_for_spans()
        assert span.resource["service.name"] == "chat-eu"
    finally:
        telemetry.shutdown()


def test_failing_collector_is_logged_once_however_many_exports(
    otlp_receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    otlp_receiver.fail(retry_delay=0.001)  # the exporter retries at once, six times per export
    settings = use_env(monkeypatch, otlp_receiver.env(**QUIET, OTEL_EXPORTER_OTLP_TIMEOUT="10"))
    caplog.set_level(logging.INFO)
    telemetry = configure_telemetry(settings)
    try:
        for _ in range(5):
            telemetry.observer.turn_finished(REPORTS["agentic"])  # returns, does not raise
            telemetry.force_flush(timeout=10)
        assert otlp_receiver.attempts("traces") >= 5 * 6
        assert otlp_receiver.attempts("metrics") >= 5 * 6
        assert otlp_receiver.spans() == []
        assert len(records(caplog, EXPORTER_LOGGER, "Transient error")) == 1
        assert len(records(caplog, EXPORTER_LOGGER, "Failed to export")) == 1
    finally:
        telemetry.shutdown()
    summaries = records(caplog, "agentskit_chat.telemetry", "%d more log records")
    assert summaries
    assert sum(r.args[0] for r in summaries if isinstance(r.args, tuple)) >= 8  # type: ignore[misc]


def test_collector_down_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = use_env(
        monkeypatch,
        {
            **QUIET,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "0.5",  # first backoff exceeds it: one attempt each
        },
    )
    caplog.set_level(logging.WARNING)
    telemetry = configure_telemetry(settings)
    try:
        for _ in range(4):
            for report in REPORTS.values():
                telemetry.observer.turn_finished(report)
            telemetry.force_flush(timeout=10)
        assert len(records(caplog, EXPORTER_LOGGER, "Failed to export")) == 1
    finally:
        telemetry.shutdown(timeout=2)


def test_a_stalled_collector_never_blocks_turns_and_a_full_queue_drops(
    otlp_receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = use_env(
        monkeypatch,
        otlp_receiver.env(
            OTEL_BSP_SCHEDULE_DELAY="10",
            OTEL_BSP_MAX_QUEUE_SIZE="4",
            OTEL_BSP_MAX_EXPORT_BATCH_SIZE="2",
            OTEL_METRIC_EXPORT_INTERVAL="60000",
            OTEL_EXPORTER_OTLP_TIMEOUT="60",
        ),
    )
    caplog.set_level(logging.WARNING)
    otlp_receiver.hold()
    telemetry = configure_telemetry(settings)
    try:
        observer = telemetry.observer
        observer.turn_finished(REPORTS["deterministic"])
        otlp_receiver.wait_for_held(1)  # the export of that span now waits on the collector
        for _ in range(50):
            observer.turn_finished(REPORTS["deterministic"])
        assert otlp_receiver.held == 1  # fifty turns went by while the export still waited
        assert len(records(caplog, "opentelemetry.sdk._shared_internal", "Queue full")) == 1
        otlp_receiver.release()
        otlp_receiver.wait_for_spans(count=5)
    finally:
        telemetry.shutdown()
    assert len(otlp_receiver.spans()) == 5  # the first span and the four the queue held


def test_shutdown_does_not_wait_for_a_stalled_collector(
    otlp_receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = use_env(
        monkeypatch,
        otlp_receiver.env(
            OTEL_BSP_SCHEDULE_DELAY="10",
            OTEL_METRIC_EXPORT_INTERVAL="60000",
            OTEL_EXPORTER_OTLP_TIMEOUT="60",
        ),
    )
    otlp_receiver.hold()
    telemetry = configure_telemetry(settings)
    telemetry.observer.turn_finished(REPORTS["agentic"])
    otlp_receiver.wait_for_held(1)
    caplog.set_level(logging.WARNING, logger="agentskit_chat.telemetry")
    telemetry.shutdown(timeout=0.2)
    assert otlp_receiver.held >= 1  # shutdown returned while the collector still had not answered
    assert records(caplog, "agentskit_chat.telemetry", "telemetry was not flushed")
    telemetry.shutdown(timeout=0.2)  # a second call does nothing


def test_log_once_lets_each_template_through_once() -> None:
    once = LogOnce()
    logger = logging.getLogger("opentelemetry.test.once")
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    keep = Keep()
    logger.addHandler(keep)
    logger.propagate = False
    once.attach([logger])
    try:
        for attempt in range(3):
            logger.warning("export failed: %s", attempt)
            logger.warning("retrying in %.1f s", attempt)
        logging.getLogger("opentelemetry.test.other").warning("export failed: %s", 9)
    finally:
        once.detach()
        logger.removeHandler(keep)
        logger.propagate = True
    assert seen == ["export failed: 0", "retrying in 0.0 s"]
    assert once.suppressed() == {
        ("opentelemetry.test.once", "export failed: %s"): 2,
        ("opentelemetry.test.once", "retrying in %.1f s"): 2,
    }
    logger.warning("after detach")  # no longer filtered
    assert logger.filters == []


def test_nothing_is_exported_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    telemetry = configure_telemetry(settings_from_env({}))
    assert not telemetry.enabled
    assert len(telemetry.server_interceptors()) == 1  # only carries the caller's trace id
    telemetry.observer.turn_finished(REPORTS["agentic"])
    telemetry.shutdown()
