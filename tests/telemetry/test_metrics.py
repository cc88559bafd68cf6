"""Turn and GenAI metrics: each measurement carries its own attribute set, however often
the sets are reused from one turn to the next."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from agentskit_chat.telemetry._metrics import MODEL_ATTRIBUTE_SETS, TurnMetrics

from .reports import REPORTS, model_call, turn


def points(reader: InMemoryMetricReader, name: str) -> dict[tuple[Any, ...], tuple[int, float]]:
    """Each attribute set's (count, sum) of histogram `name`."""
    data = reader.get_metrics_data()
    found: dict[tuple[Any, ...], tuple[int, float]] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        key = tuple(sorted((point.attributes or {}).items()))
                        found[key] = (point.count, point.sum)  # type: ignore[union-attr]
    return found


def test_a_failed_call_between_good_ones_marks_only_its_own_duration() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    recorder = TurnMetrics(provider)
    good = REPORTS["agentic"]
    failed = turn(kind="agentic", model_call=model_call(error_code="model_timeout"))
    for report in (good, failed, good, failed, good):
        recorder.record(report)
    durations = points(reader, "gen_ai.client.operation.duration")
    errors = {dict(key).get("error.type"): count for key, (count, _) in durations.items()}
    assert errors == {None: 3, "model_timeout": 2}
    tokens = points(reader, "gen_ai.client.token.usage")
    by_type = {
        dict(key)["gen_ai.token.type"]: (count, total) for key, (count, total) in tokens.items()
    }
    assert by_type == {"input": (5, 5 * 120), "output": (5, 5 * 45)}  # no error.type here
    assert all("error.type" not in dict(key) for key in tokens)
    provider.shutdown()


def test_every_distinct_model_call_is_recorded_past_the_kept_attribute_sets() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    recorder = TurnMetrics(provider)
    models = [f"model-{index}" for index in range(MODEL_ATTRIBUTE_SETS + 10)]
    for name in [*models, *models]:  # the second pass starts after the sets were dropped
        recorder.record(turn(kind="agentic", model_call=model_call(response_model=name)))
    durations = points(reader, "gen_ai.client.operation.duration")
    counted = {dict(key)["gen_ai.response.model"]: count for key, (count, _) in durations.items()}
    assert counted == dict.fromkeys(models, 2)
    assert len(recorder._model_sets) <= MODEL_ATTRIBUTE_SETS
    provider.shutdown()
