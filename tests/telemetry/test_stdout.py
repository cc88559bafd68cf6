"""Log lines never block on a stalled reader: a bounded backlog, counted drops, real pipes."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import threading
from collections.abc import Iterator

import pytest

from agentskit_chat.telemetry import configure_logging
from agentskit_chat.telemetry._stdout import NonBlockingHandler, line_writer, stream_handler

LIMIT = 16 * 1024
HANG_GUARD = 60.0
"""Seconds after which a writer still running is taken for blocked (it never should be)."""


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        with contextlib.suppress(OSError):  # a test may have closed it
            os.close(fd)


def drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


def emit_all(logger: logging.Logger, count: int) -> None:
    done = threading.Event()

    def write() -> None:
        for number in range(count):
            logger.info("line %d %s", number, "x" * 200)
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert done.wait(HANG_GUARD), "a log write blocked on the stalled pipe"


def test_a_stalled_pipe_never_blocks_and_drops_are_counted_then_reported(
    pipe: tuple[int, int],
) -> None:
    read, write = pipe
    handler = NonBlockingHandler(write, pending_bytes=LIMIT)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("tests.stdout.stalled")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        emit_all(logger, 2000)  # ~420 kB into a 64 kB pipe nobody reads
        assert handler.dropped > 0
        assert 0 < handler.pending <= LIMIT
        assert os.get_blocking(write)  # the pipe's own description is left blocking
        first = drain(read)
        logger.info("after the reader came back")
        rest = drain(read)
    finally:
        logger.removeHandler(handler)
        handler.close()
    lines = (first + rest).decode().splitlines()
    written = [line for line in lines if line.startswith("line ")]
    numbers = [int(line.split()[1]) for line in written]
    assert numbers == sorted(numbers)  # in order, every line whole
    assert all(line.endswith("x" * 200) for line in written)
    assert len(written) + handler.dropped == 2000
    (notice,) = [line for line in lines if "dropped" in line]
    assert notice == f"{handler.dropped} log lines were dropped while the output was not read"
    assert lines.index(notice) == len(lines) - 2
    assert lines[-1] == "after the reader came back"


def test_closing_waits_briefly_for_the_reader_then_lets_go(pipe: tuple[int, int]) -> None:
    read, write = pipe
    handler = NonBlockingHandler(write, pending_bytes=LIMIT)
    handler.setFormatter(logging.Formatter("%(message)s"))
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "y" * 1000, None, None)
    for _ in range(200):
        handler.handle(record)
    assert handler.pending > 0
    closed = threading.Thread(target=handler.close, daemon=True)
    closed.start()
    closed.join(HANG_GUARD)
    assert not closed.is_alive()
    assert len(drain(read)) >= 60 * 1001  # what fit in the pipe before the handler let go


def test_a_reader_gone_for_good_is_no_error(pipe: tuple[int, int]) -> None:
    read, write = pipe
    os.close(read)
    handler = NonBlockingHandler(write)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.handle(logging.LogRecord("t", logging.INFO, __file__, 1, "lost", None, None))
    assert handler.pending == 0
    handler.close()


def test_streams_without_a_descriptor_get_a_plain_handler() -> None:
    assert type(stream_handler(io.StringIO())) is logging.StreamHandler


def test_configure_logging_writes_json_lines_to_a_pipe(pipe: tuple[int, int]) -> None:
    read, write = pipe
    with os.fdopen(os.dup(write), "w") as stream:
        handler = configure_logging(logging.INFO, stream=stream, json=True)
        assert isinstance(handler, NonBlockingHandler)
        logging.getLogger("agentskit_chat.test").info("hello %s", "pipe")
        handler.close()
    (line,) = drain(read).decode().splitlines()
    assert json.loads(line)["event"] == "hello pipe"
    assert re.match(r"\d{4}-", json.loads(line)["timestamp"])


def test_a_line_writer_writes_as_the_handler_would() -> None:
    stream = io.StringIO()
    plain = logging.StreamHandler(stream)
    plain.terminator = "\r\n"
    write = line_writer(plain)
    assert write is not None
    write('{"event": "one"}')
    plain.setFormatter(logging.Formatter("%(message)s"))
    plain.handle(logging.LogRecord("t", logging.INFO, __file__, 1, '{"event": "two"}', None, None))
    assert stream.getvalue() == '{"event": "one"}\r\n{"event": "two"}\r\n'


def test_a_handler_of_another_kind_gets_no_line_writer() -> None:
    class Upper(logging.StreamHandler):  # type: ignore[type-arg]
        def emit(self, record: logging.LogRecord) -> None:
            self.stream.write(self.format(record).upper() + "\n")

    assert line_writer(Upper(io.StringIO())) is None
    assert line_writer(logging.NullHandler()) is None


def test_a_nonblocking_line_is_written_whole(pipe: tuple[int, int]) -> None:
    read, write = pipe
    handler = NonBlockingHandler(write)
    handler.setFormatter(logging.Formatter("%(message)s"))
    writer = line_writer(handler)
    assert writer is not None
    writer("first")
    handler.handle(logging.LogRecord("t", logging.INFO, __file__, 1, "second", None, None))
    handler.close()
    assert drain(read) == b"first\nsecond\n"
