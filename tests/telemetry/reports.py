"""Turn reports of every kind and outcome, as the service hands them to its observer."""

from __future__ import annotations

from agentskit_chat.service import ModelCallReport, TurnReport

T0 = 1_767_225_600_000_000_000
"""2026-01-01T00:00:00Z in nanoseconds."""
MS = 1_000_000


def model_call(**changes: object) -> ModelCallReport:
    values: dict[str, object] = {
        "adapter": "openai",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "started_ns": T0 + 2 * MS,
        "ended_ns": T0 + 900 * MS,
        "first_chunk_ns": T0 + 300 * MS,
        "input_tokens": 120,
        "output_tokens": 45,
        "finish_reasons": ("stop",),
        "server_address": "models.example",
        "server_port": 443,
        "temperature": 0.2,
        "max_tokens": 256,
        "response_model": "gpt-4o-mini-2024-07-18",
        "response_id": "chatcmpl-123",
    }
    values.update(changes)
    return ModelCallReport(**values)  # type: ignore[arg-type]


def turn(**changes: object) -> TurnReport:
    values: dict[str, object] = {
        "session_id": "s-0001",
        "turn_id": "t-0001",
        "operation": "submit",
        "outcome": "completed",
        "started_ns": T0,
        "ended_ns": T0 + MS // 2,
        "definition_id": "support",
        "revision": 3,
        "kind": "deterministic",
        "route_id": "greeting",
        "from_state": "start",
        "to_state": "start",
        "first_chunk_ns": T0 + MS // 4,
    }
    values.update(changes)
    return TurnReport(**values)  # type: ignore[arg-type]


REPORTS: dict[str, TurnReport] = {
    "deterministic": turn(),
    "agentic": turn(
        kind="agentic",
        route_id=None,
        from_state="triage",
        to_state="triage",
        ended_ns=T0 + 905 * MS,
        first_chunk_ns=T0 + 301 * MS,
        model_call=model_call(),
    ),
    "repaired": turn(kind="repaired", route_id="order-status", to_state="orders"),
    "fallback": turn(kind="fallback", route_id="fallback"),
    "replayed": turn(operation="dispatch", replayed=True),
    "failed": turn(
        kind="agentic",
        route_id=None,
        outcome="failed",
        error_code="model_server_error",
        first_chunk_ns=None,
        ended_ns=T0 + 40 * MS,
        model_call=model_call(
            model=None,
            ended_ns=T0 + 38 * MS,
            first_chunk_ns=None,
            input_tokens=None,
            output_tokens=None,
            finish_reasons=(),
            error_code="model_server_error",
            response_model=None,
            response_id=None,
        ),
    ),
    "cancelled": turn(
        kind="agentic",
        route_id=None,
        outcome="cancelled",
        ended_ns=T0 + 200 * MS,
        first_chunk_ns=T0 + 150 * MS,
        model_call=model_call(
            ended_ns=T0 + 199 * MS,
            first_chunk_ns=T0 + 149 * MS,
            input_tokens=None,
            output_tokens=None,
            finish_reasons=(),
            error_code="cancelled",
        ),
    ),
    "rejected": TurnReport(
        session_id="s-0002",
        turn_id="t-0009",
        operation="retry",
        outcome="rejected",
        started_ns=T0,
        ended_ns=T0 + MS // 10,
        error_code="SESSION_BUSY",
    ),
    "duplicate": turn(outcome="duplicate", operation="retry"),
}
