"""One JSON line per turn with trace ids; stdlib records share the format; nothing else leaks."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import io
import json
import logging
import os
import re
import select
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry import trace

from agentskit_chat.service import ModelCallReport, TurnReport
from agentskit_chat.telemetry import OtelObserver, configure_logging
from agentskit_chat.telemetry._logging import IsoUtcStamp, log_direct
from agentskit_chat.telemetry._observer import TURN_EVENT, TURN_LOGGER, log_fields
from agentskit_chat.telemetry._stdout import NonBlockingHandler

from .conftest import InMemory
from .reports import REPORTS

TURN_KEYS = {
    "definition_id",
    "revision",
    "session_id",
    "turn_id",
    "operation",
    "kind",
    "route_id",
    "from_state",
    "to_state",
    "replayed",
    "outcome",
    "error_code",
    "duration_ms",
    "time_to_first_chunk_ms",
    "model_provider",
    "model",
    "model_duration_ms",
    "input_tokens",
    "output_tokens",
    "model_error_code",
}
LINE_KEYS = {"event", "level", "logger", "timestamp", "trace_id", "span_id"} | TURN_KEYS
TURN_SPAN_KEYS = {
    "agentskit.chat.definition.id",
    "agentskit.chat.definition.revision",
    "agentskit.chat.session.id",
    "agentskit.chat.turn.id",
    "agentskit.chat.operation",
    "agentskit.chat.kind",
    "agentskit.chat.route.id",
    "agentskit.chat.from_state",
    "agentskit.chat.to_state",
    "agentskit.chat.replayed",
    "agentskit.chat.outcome",
    "agentskit.chat.error.code",
}
MODEL_SPAN_KEYS = {
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.request.temperature",
    "gen_ai.request.max_tokens",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "server.address",
    "server.port",
    "gen_ai.conversation.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
    "error.type",
    "agentskit.chat.model.adapter",
}


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_turn_line_is_json_with_the_turn_span_ids(in_memory: InMemory) -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    observer = OtelObserver(in_memory.tracer_provider, in_memory.meter_provider)
    observer.turn_finished(REPORTS["agentic"])
    (line,) = lines(stream)
    turn_span = next(s for s in in_memory.spans.get_finished_spans() if s.name.startswith("chat."))
    assert line["trace_id"] == trace.format_trace_id(turn_span.context.trace_id)
    assert line["span_id"] == trace.format_span_id(turn_span.context.span_id)
    assert len(line["trace_id"]) == 32
    assert len(line["span_id"]) == 16
    assert line["timestamp"].endswith("Z")
    assert {key: line[key] for key in ("event", "level", "logger")} == {
        "event": "turn",
        "level": "info",
        "logger": "agentskit_chat.turns",
    }
    assert line["duration_ms"] == 905.0
    assert line["time_to_first_chunk_ms"] == 301.0
    assert (line["input_tokens"], line["output_tokens"]) == (120, 45)
    assert (line["model_provider"], line["model"]) == ("openai", "gpt-4o-mini")
    assert line["model_duration_ms"] == 898.0
    assert line["session_id"] == "s-0001"
    assert line["kind"] == "agentic"


def test_turn_line_without_tracing_has_no_ids() -> None:
    stream = io.StringIO()
    configure_logging("INFO", stream=stream, json=True)
    OtelObserver().turn_finished(REPORTS["deterministic"])
    (line,) = lines(stream)
    assert "trace_id" not in line
    assert "span_id" not in line
    assert line["route_id"] == "greeting"
    assert line["replayed"] is False


def test_failed_turn_is_a_warning() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    OtelObserver().turn_finished(REPORTS["failed"])
    (line,) = lines(stream)
    assert line["level"] == "warning"
    assert line["error_code"] == "model_server_error"
    assert line["model_error_code"] == "model_server_error"


def test_stdlib_records_are_rendered_the_same_way() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    logging.getLogger("opentelemetry.sdk.test").warning("export to %s failed", "collector")
    logging.getLogger("agentskit_chat.serve").debug("below the level")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("agentskit_chat.serve").exception("it broke")
    first, second = lines(stream)
    assert first["event"] == "export to collector failed"
    assert first["level"] == "warning"
    assert first["logger"] == "opentelemetry.sdk.test"
    assert "timestamp" in first
    assert second["level"] == "error"
    assert second["exception"][0]["exc_type"] == "ValueError"


def test_configuring_again_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(logging.INFO, stream=first, json=True)
    configure_logging(logging.INFO, stream=second, json=True)
    logging.getLogger("agentskit_chat.serve").info("once")
    assert first.getvalue() == ""
    assert [line["event"] for line in lines(second)] == ["once"]


def test_console_format_when_not_json() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=False)
    OtelObserver().turn_finished(REPORTS["deterministic"])
    text = stream.getvalue()
    assert "turn" in text
    assert "session_id=s-0001" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


def test_reports_have_no_field_for_content() -> None:
    """A canary: a new report field must be reviewed here before it can reach telemetry."""
    assert {f.name for f in dataclasses.fields(TurnReport)} == {
        "session_id",
        "turn_id",
        "operation",
        "outcome",
        "started_ns",
        "ended_ns",
        "definition_id",
        "revision",
        "kind",
        "route_id",
        "route_tool",  # the name of the server tool a route runs, never its arguments
        "from_state",
        "to_state",
        "replayed",
        "error_code",
        "first_chunk_ns",
        "model_call",
        "earlier_model_calls",  # model calls of earlier tool rounds: the same reviewed fields
        "tool_calls",  # (call id, tool name) pairs: names, never arguments or results
        "migration",  # revisions, an outcome and a stable code
    }
    assert {f.name for f in dataclasses.fields(ModelCallReport)} == {
        "adapter",
        "provider",
        "model",
        "started_ns",
        "ended_ns",
        "first_chunk_ns",
        "input_tokens",
        "output_tokens",
        "finish_reasons",
        "error_code",
        "remote",
        "server_address",
        "server_port",
        "temperature",
        "max_tokens",
        "response_model",
        "response_id",
    }


def test_lines_and_spans_hold_only_the_expected_keys(in_memory: InMemory) -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    observer = OtelObserver(in_memory.tracer_provider, in_memory.meter_provider)
    for report in REPORTS.values():
        observer.turn_finished(report)
    written = lines(stream)
    assert len(written) == len(REPORTS)
    for line in written:
        assert set(line) <= LINE_KEYS
    for span in in_memory.spans.get_finished_spans():
        expected = MODEL_SPAN_KEYS if span.kind == trace.SpanKind.CLIENT else TURN_SPAN_KEYS
        assert set(span.attributes or {}) <= expected, span.name
        assert list(span.events) == []
        assert list(span.links) == []


def test_tracebacks_never_show_local_variables() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    secret = "canary-local-3f9a"

    def fail(text: str) -> None:
        raise ValueError("failed")

    try:
        fail(secret)
    except ValueError:
        logging.getLogger("agentskit_chat.serve").exception("it broke")
    (line,) = lines(stream)
    assert line["exception"]
    assert secret not in stream.getvalue()


def alone() -> None:
    """Leave only the configured handler on the root logger, as in `serve`. pytest's log
    capture adds its own while a test runs (and takes them off after), and while another
    handler would see the record, a turn line goes the ordinary way (see log_direct)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() != "agentskit_chat"]:
        root.removeHandler(handler)


ISO_UTC = re.compile(r'"timestamp": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z"')
CONSOLE_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z ")
WORKER = {"worker": 2, "pid": 4242}


def structlog_line(report: TurnReport, level: int) -> str:
    """The line the ordinary structlog -> logging -> formatter path writes for `report`."""
    stream = io.StringIO()
    handler = logging.getLogger().handlers[-1]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    before = stream.getvalue()
    structlog.get_logger(TURN_LOGGER).log(level, TURN_EVENT, **log_fields(report))
    return stream.getvalue()[len(before) :]


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "console"])
@pytest.mark.parametrize("name", sorted(REPORTS))
def test_a_direct_line_is_the_line_logging_writes(name: str, as_json: bool) -> None:
    configure_logging(logging.INFO, stream=io.StringIO(), json=as_json, fields=WORKER)
    alone()
    logger = logging.getLogger(TURN_LOGGER)
    level = logging.WARNING if REPORTS[name].outcome in ("failed", "error") else logging.INFO
    direct = io.StringIO()
    logging.getLogger().handlers[-1].setStream(direct)  # type: ignore[attr-defined]
    token = structlog.contextvars.bind_contextvars(request_id="r-7")
    try:
        assert log_direct(logger, level, TURN_EVENT, log_fields(REPORTS[name]))
        ordinary = structlog_line(REPORTS[name], level)
    finally:
        structlog.contextvars.reset_contextvars(**token)
    assert direct.getvalue().endswith("\n")
    assert direct.getvalue().count("\n") == 1
    if as_json:
        assert ISO_UTC.search(direct.getvalue())
        assert ISO_UTC.sub("", direct.getvalue()) == ISO_UTC.sub("", ordinary)
        line = json.loads(direct.getvalue())
        assert {key: line[key] for key in ("event", "logger", "request_id")} == {
            "event": "turn",
            "logger": "agentskit_chat.turns",
            "request_id": "r-7",
        }
        assert line["level"] == logging.getLevelName(level).lower()
        assert list(line)[-2:] == ["worker", "pid"]
        assert (line["worker"], line["pid"]) == (2, 4242)
        assert {k: v for k, v in line.items() if k in TURN_KEYS} == log_fields(REPORTS[name])
    else:  # the console line starts with its timestamp
        assert CONSOLE_TIME.sub("", direct.getvalue()) == CONSOLE_TIME.sub("", ordinary)
        assert "request_id=r-7" in direct.getvalue()


def test_a_line_below_the_level_is_not_written_and_a_failure_is_a_warning() -> None:
    stream = io.StringIO()
    configure_logging(logging.WARNING, stream=stream, json=True)
    alone()
    observer = OtelObserver()
    observer.turn_finished(REPORTS["deterministic"])
    assert stream.getvalue() == ""
    observer.turn_finished(REPORTS["failed"])
    (line,) = lines(stream)
    assert (line["level"], line["outcome"], line["event"]) == ("warning", "failed", "turn")


def test_other_handlers_and_filters_on_the_way_still_see_the_turn() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    alone()
    extra = Collect()
    turns = logging.getLogger(TURN_LOGGER)
    observer = OtelObserver()
    logging.getLogger().addHandler(extra)
    try:
        observer.turn_finished(REPORTS["deterministic"])
    finally:
        logging.getLogger().removeHandler(extra)
    assert len(extra.records) == 1
    turns.addFilter(lambda record: False)
    try:
        observer.turn_finished(REPORTS["deterministic"])
    finally:
        turns.filters.clear()
    observer.turn_finished(REPORTS["replayed"])
    assert [(line["event"], line["replayed"]) for line in lines(stream)] == [
        ("turn", False),
        ("turn", True),
    ]


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_configuring_again_sends_the_turn_line_to_the_new_stream(
    pipe: tuple[int, int],
) -> None:
    read, write = pipe
    observer = OtelObserver()
    with os.fdopen(os.dup(write), "w") as first:
        handler = configure_logging(logging.INFO, stream=first, json=True, fields=WORKER)
        alone()
        observer.turn_finished(REPORTS["deterministic"])
        second = io.StringIO()
        configure_logging(logging.INFO, stream=second, json=True)
        observer.turn_finished(REPORTS["fallback"])
    assert isinstance(handler, NonBlockingHandler)
    (line,) = [json.loads(text) for text in drain(read).decode().splitlines()]
    assert (line["kind"], line["worker"]) == ("deterministic", 2)
    (other,) = lines(second)
    assert other["kind"] == "fallback"
    assert "worker" not in other


def test_turn_lines_never_block_on_a_stalled_reader_and_drops_are_reported(
    pipe: tuple[int, int],
) -> None:
    read, write = pipe
    observer = OtelObserver()
    stream = os.fdopen(os.dup(write), "w")
    handler = configure_logging(logging.INFO, stream=stream, json=True)
    alone()
    assert isinstance(handler, NonBlockingHandler)
    done = threading.Event()

    def turns() -> None:
        for _ in range(2000):  # ~900 kB into a 64 kB pipe and a 256 kB backlog
            observer.turn_finished(REPORTS["agentic"])
        done.set()

    threading.Thread(target=turns, daemon=True).start()
    assert done.wait(60.0), "a turn line blocked on the stalled pipe"
    assert handler.dropped > 0
    chunks: list[bytes] = []
    reader = threading.Thread(target=read_all, args=(read, chunks), daemon=True)
    reader.start()  # the reader comes back
    deadline = time.monotonic() + 60.0
    while handler.pending and time.monotonic() < deadline:
        handler.flush()
        time.sleep(0.01)
    observer.turn_finished(REPORTS["replayed"])
    handler.close()
    stream.close()
    os.close(write)
    reader.join(60.0)
    *held, notice, last = [json.loads(text) for text in b"".join(chunks).decode().splitlines()]
    assert len(held) + handler.dropped == 2000
    assert all(line["event"] == "turn" and line["kind"] == "agentic" for line in held)
    assert (
        notice["event"] == f"{handler.dropped} log lines were dropped while the output was not read"
    )
    assert notice["level"] == "warning"
    assert (last["event"], last["replayed"]) == ("turn", True)


def read_all(fd: int, chunks: list[bytes]) -> None:
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        with contextlib.suppress(OSError):
            os.close(fd)


def drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            data += chunk
    return data


def test_a_turn_line_makes_no_log_record_when_the_handler_is_alone() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    alone()
    made: list[str] = []
    factory = logging.getLogRecordFactory()

    def counting(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        made.append(record.name)
        return record

    logging.setLogRecordFactory(counting)
    try:
        OtelObserver().turn_finished(REPORTS["deterministic"])
        logging.getLogger("agentskit_chat.serve").info("a record")
    finally:
        logging.setLogRecordFactory(factory)
    assert TURN_LOGGER not in made
    assert "agentskit_chat.serve" in made  # the factory does see the records logging makes
    assert [line["event"] for line in lines(stream)] == ["turn", "a record"]


def test_a_direct_line_on_a_terminal_is_the_console_line_logging_writes() -> None:
    leader, follower = os.openpty()
    terminal = os.fdopen(follower, "w")
    try:
        handler = configure_logging(logging.INFO, stream=terminal)  # a tty: console, colours
        alone()
        assert isinstance(handler, NonBlockingHandler)
        fields = log_fields(REPORTS["agentic"])
        assert log_direct(logging.getLogger(TURN_LOGGER), logging.INFO, TURN_EVENT, dict(fields))
        direct = read_terminal(leader)
        structlog.get_logger(TURN_LOGGER).log(logging.INFO, TURN_EVENT, **fields)
        ordinary = read_terminal(leader)
        handler.close()
    finally:
        terminal.close()
        os.close(leader)
    assert "\x1b[" in direct  # coloured, as on a terminal
    assert "session_id" in direct
    assert ANY_TIME.sub("", direct) == ANY_TIME.sub("", ordinary)


ANY_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z")


def read_terminal(fd: int) -> str:
    data = b""
    while select.select([fd], [], [], 0.5)[0]:
        data += os.read(fd, 65536)
        if data.endswith(b"\n"):
            break
    return data.decode()


@pytest.mark.parametrize(
    "nanoseconds",
    [
        0,
        999,
        1_000,
        1_767_225_600_000_000_000,  # 2026-01-01T00:00:00Z: a whole second, no fraction
        1_767_225_599_999_999_999,  # the last nanosecond of 2025
        1_767_225_600_000_001_000,
        1_767_225_600_000_000_999,  # rounded down to the microsecond, as datetime does
        1_709_164_800_123_456_789,  # 2024-02-29
        4_102_444_800_500_000_000,  # 2100-01-01
    ],
)
def test_the_direct_timestamp_is_the_text_structlog_writes(nanoseconds: int) -> None:
    stamp = IsoUtcStamp()
    stamp.text(nanoseconds - 7 * 10**9)  # a second formatted earlier is not reused
    expected = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
        microseconds=nanoseconds // 1000
    )
    assert stamp.text(nanoseconds) == expected.isoformat().replace("+00:00", "Z")
    assert stamp.text(nanoseconds) == stamp.text(nanoseconds)


def test_the_direct_timestamp_reads_the_clock_datetime_reads() -> None:
    stamp = IsoUtcStamp()
    before = datetime.datetime.now(tz=datetime.UTC)
    event = stamp(None, "info", {})
    after = datetime.datetime.now(tz=datetime.UTC)
    written = datetime.datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))
    assert before <= written <= after
