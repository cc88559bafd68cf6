"""Turn and GenAI metrics; attributes stay low-cardinality (no session or turn ids)."""

from __future__ import annotations

from collections.abc import Iterable
from weakref import WeakKeyDictionary

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.util.types import AttributeValue

from agentskit_chat import __version__
from agentskit_chat.service import MigrationReport, ModelCallReport, TurnReport, model_calls

from . import _names as n

Attributes = dict[str, AttributeValue]
TurnKey = tuple[str | None, str | None, int | None, str, str | None]
"""A turn's metric attributes as one hashable value: kind, definition, revision, outcome,
code."""
ModelKey = tuple[str, str | None, str | None, str | None, int | None, str | None, str | None]
"""A model call's metric attributes as one hashable value: provider, model, response model,
address, port, definition, error code."""
MODEL_ATTRIBUTE_SETS = 256
TOOL_NAMES = 256
"""Distinct tool names a server counts calls of; callers declare tools, so past this many
a call is counted under `_other` (a bound on the metric's cardinality)."""
"""Model-call attribute sets kept built; past that many the cache starts over (a bound on
memory should response models or addresses keep changing)."""


class TurnMetrics:
    """The instruments, created once per meter provider.

    The turn count is an observable counter over counts kept here, read when metrics are
    collected: a turn adds one to a dict entry instead of paying for an SDK measurement
    (attribute validation and hashing, an exemplar check, the aggregation's lock). Each
    attribute set is built once and shared by the turn's histograms, and a model call's
    (with and without its error, per token type) once per distinct call.
    """

    def __init__(self, provider: metrics.MeterProvider) -> None:
        meter = provider.get_meter(n.SCOPE, __version__)
        self._counts = _turn_counts(provider, meter)
        self.duration = meter.create_histogram(
            n.TURN_DURATION,
            unit="s",
            description="From the request reaching the service to the turn's last event.",
            explicit_bucket_boundaries_advisory=n.TURN_SECONDS_BUCKETS,
        )
        self.first_chunk = meter.create_histogram(
            n.TURN_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="From the request reaching the service to the first piece of answer.",
            explicit_bucket_boundaries_advisory=n.TURN_SECONDS_BUCKETS,
        )
        self.model_duration = meter.create_histogram(
            n.GEN_AI_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=n.GEN_AI_SECONDS_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            n.GEN_AI_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=n.GEN_AI_TOKEN_BUCKETS,
        )
        self._model_sets: dict[ModelKey, _ModelSets] = {}
        self.tool_calls = meter.create_counter(
            n.TOOL_CALLS, unit="{call}", description="Tool calls the model made, by tool name."
        )
        self._tool_sets: dict[tuple[str, str | None], Attributes] = {}
        self.migrations = meter.create_counter(
            n.MIGRATIONS,
            unit="{turn}",
            description="Turns that moved their session to a newer revision, or found it could "
            "not move yet (counted at every such turn), and why.",
        )

    def record(self, report: TurnReport) -> None:
        """Count the turn and record its timings and its model call."""
        key = (
            report.kind,
            report.definition_id,
            report.revision,
            report.outcome,
            report.error_code,
        )
        count = self._counts.get(key)
        if count is None:
            count = self._counts[key] = _Count(turn_metric_attributes(report))
        count.turns += 1
        attributes = count.attributes
        started = report.started_ns
        self.duration.record(max(report.ended_ns - started, 0) / 1e9, attributes)
        if report.first_chunk_ns is not None:
            self.first_chunk.record(max(report.first_chunk_ns - started, 0) / 1e9, attributes)
        for call in model_calls(report):
            if call.remote:  # A local stand-in is no GenAI operation.
                self._record_model_call(call, report.definition_id)
        for _, name in report.tool_calls:
            self.tool_calls.add(1, self._tool_attributes(name, report.definition_id))
        if report.migration is not None:
            self.migrations.add(1, migration_attributes(report.migration, report.definition_id))

    def _tool_attributes(self, name: str, definition_id: str | None) -> Attributes:
        key = (name, definition_id)
        found = self._tool_sets.get(key)
        if found is None:
            if len(self._tool_sets) >= TOOL_NAMES:
                key = (n.OTHER_TOOL, definition_id)
                name = n.OTHER_TOOL
            found = self._tool_sets.get(key)
            if found is None:
                found = {n.GEN_AI_TOOL_NAME: name}
                if definition_id is not None:
                    found[n.DEFINITION_ID] = definition_id
                self._tool_sets[key] = found
        return found

    def _record_model_call(self, call: ModelCallReport, definition_id: str | None) -> None:
        sets = self._model_attributes(call, definition_id)
        self.model_duration.record(_seconds(call.ended_ns - call.started_ns), sets.call)
        if call.input_tokens is not None:
            self.tokens.record(call.input_tokens, sets.input)
        if call.output_tokens is not None:
            self.tokens.record(call.output_tokens, sets.output)

    def _model_attributes(self, call: ModelCallReport, definition_id: str | None) -> _ModelSets:
        key = (
            call.provider,
            call.model,
            call.response_model,
            call.server_address,
            call.server_port,
            definition_id,
            call.error_code,
        )
        sets = self._model_sets.get(key)
        if sets is None:
            if len(self._model_sets) >= MODEL_ATTRIBUTE_SETS:
                self._model_sets.clear()
            sets = self._model_sets[key] = _ModelSets(gen_ai_metric_attributes(call, definition_id))
            if call.error_code is not None:
                sets.call[n.ERROR_TYPE] = call.error_code
        return sets


_COUNTS: WeakKeyDictionary[metrics.MeterProvider, dict[TurnKey, _Count]] = WeakKeyDictionary()
"""The turn counts of each meter provider, shared by every TurnMetrics over it, since a
provider keeps the first observable counter of a name and ignores later ones."""


def _turn_counts(provider: metrics.MeterProvider, meter: metrics.Meter) -> dict[TurnKey, _Count]:
    """`provider`'s turn counts, with the `agentskit.chat.turns` counter that reports them."""
    counts = _COUNTS.get(provider)
    if counts is None:
        counts = _COUNTS[provider] = {}
        observed = counts  # The callback must not hold the provider alive.

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            """Every attribute set's turns so far (cumulative), at a collection."""
            return [Observation(count.turns, count.attributes) for count in list(observed.values())]

        meter.create_observable_counter(
            n.TURNS, callbacks=[observe], unit="{turn}", description="Turns by outcome."
        )
    return counts


class _Count:
    """One attribute set's turns."""

    __slots__ = ("attributes", "turns")

    def __init__(self, attributes: Attributes) -> None:
        self.attributes = attributes
        self.turns = 0


class _ModelSets:
    """A model call's attribute sets: its duration's (with `error.type` when it failed) and
    its token counts' (the conventions leave the error out of those)."""

    __slots__ = ("call", "input", "output")

    def __init__(self, attributes: Attributes) -> None:
        self.call = dict(attributes)
        self.input = {**attributes, n.GEN_AI_TOKEN_TYPE: "input"}
        self.output = {**attributes, n.GEN_AI_TOKEN_TYPE: "output"}


def migration_attributes(migration: MigrationReport, definition_id: str | None) -> Attributes:
    """The attributes of one migration count: the definition, the two revisions, the
    outcome and, for a session that stayed, why."""
    found: dict[str, AttributeValue] = {
        n.MIGRATION_FROM: migration.from_revision,
        n.MIGRATION_TO: migration.to_revision,
        n.MIGRATION_OUTCOME: migration.outcome,
    }
    if definition_id is not None:
        found[n.DEFINITION_ID] = definition_id
    if migration.code is not None:
        found[n.MIGRATION_CODE] = migration.code
    return found


def turn_metric_attributes(report: TurnReport) -> Attributes:
    """Kind, definition and its revision, outcome and error code: bounded by the
    definitions and revisions a server hosts and the service's own codes (a lease conflict
    is `SESSION_BUSY`)."""
    values: dict[str, AttributeValue | None] = {
        n.KIND: report.kind,
        n.DEFINITION_ID: report.definition_id,
        n.DEFINITION_REVISION: report.revision,
        n.OUTCOME: report.outcome,
        n.ERROR_CODE: report.error_code,
    }
    return {key: value for key, value in values.items() if value is not None}


def gen_ai_metric_attributes(call: ModelCallReport, definition_id: str | None = None) -> Attributes:
    """The GenAI conventions' operation, provider, models and endpoint, and the definition."""
    values: dict[str, AttributeValue | None] = {
        n.GEN_AI_OPERATION_NAME: n.CHAT,
        n.GEN_AI_PROVIDER_NAME: call.provider,
        n.GEN_AI_REQUEST_MODEL: call.model or None,
        n.GEN_AI_RESPONSE_MODEL: call.response_model,
        n.SERVER_ADDRESS: call.server_address,
        n.SERVER_PORT: call.server_port,
        n.DEFINITION_ID: definition_id,
    }
    return {key: value for key, value in values.items() if value is not None}


def _seconds(nanoseconds: int) -> float:
    return max(nanoseconds, 0) / 1e9
