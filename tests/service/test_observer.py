"""Every StreamTurn ends in exactly one content-free report to the turn observer."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentskit_chat.conversation import load_definitions
from agentskit_chat.models import (
    AdapterRegistry,
    FinishChunk,
    ModelChunk,
    ModelError,
    ModelRequest,
    TextChunk,
    UsageChunk,
)
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Delta,
    Edit,
    Operation,
    Retry,
    ServiceError,
    Submit,
    TurnEvent,
    TurnObserver,
    TurnReport,
    TurnRequest,
)
from agentskit_chat.storage import HistoryMode, MemoryStore

T = TypeVar("T")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "definitions"
CANARY = "canary-observer-5d1e"


class Recorder:
    """A turn observer that keeps every report."""

    def __init__(self) -> None:
        self.reports: list[TurnReport] = []

    def turn_finished(self, report: TurnReport) -> None:
        self.reports.append(report)


class Scripted:
    """A model that streams two chunks, usage and a finish reason, or fails when told."""

    name = "scripted"
    provider = "agentskit.scripted"

    def __init__(self) -> None:
        self.fail = False
        self.crash = False
        self.gate = asyncio.Event()
        self.hold = False

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        if self.fail:
            raise ModelError("model_server_error", "The model server failed.", retryable=True)
        yield TextChunk(f"{CANARY} one ")
        if self.crash:
            raise RuntimeError("adapter bug")
        if self.hold:
            await self.gate.wait()
        yield TextChunk(f"{CANARY} two")
        yield UsageChunk(input_tokens=11, output_tokens=4)
        yield FinishChunk("stop")

    async def close(self) -> None:
        """Nothing to release."""


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


class Harness:
    def __init__(self, observer: TurnObserver | None = None) -> None:
        self.recorder = Recorder()
        self.model = Scripted()
        definitions = list(load_definitions(EXAMPLES).values())
        assisted = dataclasses.replace(
            definitions[0], id="assisted", model={"adapter": "scripted", "model": "m-1"}
        )
        self.service = ChatService(
            Catalog([*definitions, assisted]),
            MemoryStore(),
            digest_key=b"observer-tests-digest-key-32byte",
            adapters=AdapterRegistry({"scripted": lambda settings: self.model}),
            observer=observer or self.recorder,
        )

    async def session(self, definition: str) -> str:
        view = await self.service.create_session(definition, None, HistoryMode.SERVER)
        return view.session_id

    async def turn(self, session_id: str, turn_id: str, operation: Operation) -> list[TurnEvent]:
        request = TurnRequest(session_id, turn_id, operation)
        return [event async for event in self.service.run_turn(request)]

    @property
    def last(self) -> TurnReport:
        return self.recorder.reports[-1]


def test_a_deterministic_turn_reports_its_decision_and_definition() -> None:
    async def scenario() -> None:
        h = Harness()
        sid = await h.session("orders")
        await h.turn(sid, "t1", Submit("/return"))
        report = h.last
        assert len(h.recorder.reports) == 1
        assert (report.definition_id, report.revision) == ("orders", 1)
        assert (report.session_id, report.turn_id, report.operation) == (sid, "t1", "submit")
        assert (report.kind, report.route_id) == ("deterministic", "begin")
        assert (report.from_state, report.to_state) == ("browsing", "identifying")
        assert (report.outcome, report.replayed, report.model_call) == ("completed", False, None)
        assert report.started_ns <= report.first_chunk_ns <= report.ended_ns  # type: ignore[operator]

    run(scenario())


def test_repaired_and_fallback_turns_report_their_kind() -> None:
    async def scenario() -> None:
        h = Harness()
        sid = await h.session("orders")
        await h.turn(sid, "t1", Submit("/retrun"))
        assert (h.last.kind, h.last.route_id) == ("repaired", "begin-typo")
        await h.turn(sid, "t2", Submit("/help"))
        assert (h.last.kind, h.last.route_id, h.last.to_state) == (
            "fallback",
            "help",
            "identifying",
        )

    run(scenario())


def test_an_agentic_turn_reports_its_model_call_with_usage() -> None:
    async def scenario() -> None:
        h = Harness()
        sid = await h.session("assisted")
        await h.turn(sid, "t1", Submit(f"hello {CANARY}"))
        report = h.last
        assert (report.kind, report.route_id, report.outcome) == ("agentic", None, "completed")
        call = report.model_call
        assert call is not None
        assert (call.adapter, call.provider) == ("scripted", "agentskit.scripted")
        assert call.model == "m-1"
        assert (call.input_tokens, call.output_tokens) == (11, 4)
        assert call.finish_reasons == ("stop",)
        assert call.error_code is None
        assert call.started_ns <= call.first_chunk_ns <= call.ended_ns  # type: ignore[operator]

    run(scenario())


def test_a_retry_reports_the_replayed_decision() -> None:
    async def scenario() -> None:
        h = Harness()
        sid = await h.session("orders")
        await h.turn(sid, "t1", Submit("/return"))
        await h.turn(sid, "t2", Retry())
        assert (h.last.operation, h.last.replayed, h.last.route_id) == ("retry", True, "begin")

    run(scenario())


def test_a_model_failure_is_reported_with_its_code() -> None:
    async def scenario() -> None:
        h = Harness()
        sid = await h.session("assisted")
        h.model.fail = True
        await h.turn(sid, "t1", Submit("hi"))
        report = h.last
        assert (report.outcome, report.error_code) == ("failed", "model_server_error")
        assert report.model_call is not None
        assert report.model_call.error_code == "model_server_error"

    run(scenario())


def test_a_refused_turn_is_reported_as_rejected_with_its_reason() -> None:
    async def scenario() -> None:
        h = Harness()
        with pytest.raises(ServiceError):
            await h.turn("s-0000000000000000", "t1", Submit("hi"))
        report = h.last
        assert (report.outcome, report.error_code) == ("rejected", "SESSION_NOT_FOUND")
        assert report.definition_id is None

    run(scenario())


def test_a_repeated_turn_id_is_reported_as_duplicate() -> None:
    async def scenario() -> None:
        h = Harness()
        sid = await h.session("orders")
        await h.turn(sid, "t1", Submit("/return"))
        await h.turn(sid, "t1", Submit("/return"))
        assert [r.outcome for r in h.recorder.reports] == ["completed", "duplicate"]
        assert h.last.route_id == "begin"

    run(scenario())


def test_a_turn_abandoned_mid_stream_is_reported_as_cancelled() -> None:
    async def scenario() -> None:
        h = Harness()
        sid = await h.session("assisted")
        h.model.hold = True
        stream = h.service.run_turn(TurnRequest(sid, "t1", Submit("hi")))
        async for event in stream:
            if isinstance(event, Delta):
                break
        await stream.aclose()
        report = h.last
        assert report.outcome == "cancelled"
        assert report.model_call is not None
        assert report.model_call.error_code == "cancelled"

    run(scenario())


def test_reports_hold_no_content() -> None:
    async def scenario() -> None:
        h = Harness()
        sid = await h.session("assisted")
        await h.turn(sid, "t1", Submit(f"hello {CANARY}"))
        orders = await h.session("orders")
        await h.turn(orders, "t2", Submit(f"{CANARY} /return"))
        messages = (await h.service.get_session(sid)).messages
        await h.turn(sid, "t3", Edit(messages[0].id, f"edited {CANARY}"))
        assert len(h.recorder.reports) == 3
        assert all(CANARY not in repr(report) for report in h.recorder.reports)

    run(scenario())


def test_an_observer_that_raises_does_not_fail_the_turn() -> None:
    class Broken:
        def turn_finished(self, report: TurnReport) -> None:
            raise RuntimeError("observer down")

    async def scenario() -> None:
        h = Harness(Broken())
        sid = await h.session("orders")
        events = await h.turn(sid, "t1", Submit("/return"))
        assert type(events[-1]).__name__ == "Completed"

    run(scenario())


def test_an_error_after_the_turn_started_is_reported_as_error_not_rejected() -> None:
    async def scenario() -> None:
        h = Harness()
        sid = await h.session("assisted")
        h.model.crash = True
        with pytest.raises(RuntimeError):
            await h.turn(sid, "t1", Submit("hi"))
        assert (h.last.outcome, h.last.error_code, h.last.kind) == ("error", "internal", "agentic")

    run(scenario())
